//! Configurations: TOML files and built-in presets.
//!
//! Two stages, as everywhere in xlat: serde structs mirror the TOML exactly (unknown keys are
//! rejected), then [`Config::validate`] checks every value and [`crate::engine::System::new`]
//! builds the components. Every error names the file and the key.

use crate::cache::{CacheLevelConfig, MemoryConfig};
use crate::cost::CostConfig;
use crate::os::OsConfig;
use crate::pt::{PageTableConfig, ParamError};
use crate::tlb::Policy;
use serde::Deserialize;
use std::path::Path;

/// Which references a TLB structure serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Serves {
    /// Instruction fetches and data alike.
    #[default]
    Unified,
    /// Loads, stores and modifies.
    Data,
    /// Instruction fetches.
    Instruction,
}

impl Serves {
    /// Name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            Serves::Unified => "unified",
            Serves::Data => "data",
            Serves::Instruction => "instruction",
        }
    }
}

/// How TLB entries of different processes are kept apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AsidMode {
    /// Entries are tagged with the ASID; nothing is flushed on a switch.
    #[default]
    Tagged,
    /// Every switch to another process flushes all non-global entries.
    Flush,
}

/// Entry format of a TLB structure (talluri95 §4.1, Figure 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum TlbFormat {
    /// One page size: every entry maps one base page.
    #[default]
    Single,
    /// Entries of the base page size and of any superpage size the page table provides, mixed.
    Superpage,
    /// One tag, one frame and a valid bit per base page for an aligned page block of
    /// `subblock_factor` pages, usable for properly placed pages; base-page entries otherwise.
    PartialSubblock,
    /// One tag per page block and a frame and valid bit per base page.
    CompleteSubblock,
}

impl TlbFormat {
    /// Name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            TlbFormat::Single => "single",
            TlbFormat::Superpage => "superpage",
            TlbFormat::PartialSubblock => "partial-subblock",
            TlbFormat::CompleteSubblock => "complete-subblock",
        }
    }
}

/// One `[[tlb]]` structure.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlbConfig {
    /// Name in reports ("L1", "L1D", "STLB", ...).
    pub name: String,
    /// Entries (> 0; need not be a power of two).
    pub entries: u32,
    /// Ways per set (must divide `entries`); default: `entries` (fully associative).
    #[serde(default)]
    pub ways: Option<u32>,
    /// Replacement policy (default lru).
    #[serde(default)]
    pub policy: Policy,
    /// Level in the hierarchy, 1 = closest to the core (default 1).
    #[serde(default = "one")]
    pub level: u32,
    /// What it serves (default unified).
    #[serde(default)]
    pub serves: Serves,
    /// Cycles per lookup in this structure, hit or miss (default 1).
    #[serde(default = "one_u64")]
    pub latency: u64,
    /// Entries of `entries` reserved for page-table translations (a linear table's upper
    /// levels; bala94's wired L2 entries); they form a separate fully associative partition.
    #[serde(default)]
    pub reserved: u32,
    /// Replacement policy of the reserved partition (default lru).
    #[serde(default)]
    pub reserved_policy: Policy,
    /// Seed of the random policy (default 1).
    #[serde(default = "one_u64")]
    pub seed: u64,
    /// Entry format (default single).
    #[serde(default)]
    pub format: TlbFormat,
    /// Base pages per block entry of the subblock formats (default 16; a power of two, 2 to 64).
    #[serde(default = "sixteen")]
    pub subblock_factor: u32,
    /// Complete-subblock only: a block miss loads every mapping of the block (subblock
    /// prefetch, talluri95 §4.4) instead of only the missing page's (default false).
    #[serde(default)]
    pub prefetch: bool,
}

fn sixteen() -> u32 {
    16
}

fn one() -> u32 {
    1
}
fn one_u64() -> u64 {
    1
}
fn page_4k() -> u64 {
    4096
}

/// A whole configuration: one simulated design.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Name in reports.
    pub name: String,
    /// What this design is (presets: the machine).
    #[serde(default)]
    pub description: String,
    /// Where its parameters come from (presets: a citation).
    #[serde(default)]
    pub source: String,
    /// Base page size in bytes (power of two, default 4096).
    #[serde(default = "page_4k")]
    pub page_size: u64,
    /// ASID tagging or flush on switch.
    #[serde(default)]
    pub asid: AsidMode,
    /// TLB structures.
    pub tlb: Vec<TlbConfig>,
    /// The page table.
    #[serde(default)]
    pub page_table: PageTableConfig,
    /// The OS model.
    #[serde(default)]
    pub os: OsConfig,
    /// The cycle model of translation.
    #[serde(default)]
    pub cost: CostConfig,
    /// Cache levels (`[[cache]]`); none: translation only, as without caches.
    #[serde(default)]
    pub cache: Vec<CacheLevelConfig>,
    /// Memory behind the caches (`[memory]`).
    #[serde(default)]
    pub memory: Option<MemoryConfig>,
    /// The timing model (`[time]`).
    #[serde(default)]
    pub time: Option<TimeConfig>,
    /// Where traced mappings land in the machine's address space (`[layout]`).
    #[serde(default)]
    pub layout: crate::os::layout::LayoutConfig,
    /// Itanium regions and region IDs (`[itanium]`); none: TLB entries tagged by process.
    #[serde(default)]
    pub itanium: Option<crate::os::regions::ItaniumConfig>,
    /// A software TLB behind the structure holding page-table translations (`[stlb]`).
    #[serde(default)]
    pub stlb: Option<StlbConfig>,
    /// The Mach 3.0 personality's constants (`[mach3]`; used with `os.personality = "mach3"`).
    #[serde(default)]
    pub mach3: crate::os::mach3::Mach3Config,
    /// The prefetch TLB on the IPC path (`[ptlb]`; needs `os.personality = "mach3"`).
    #[serde(default)]
    pub ptlb: Option<crate::os::mach3::PtlbConfig>,
    /// The memory controller's TLB over shadow addresses (`[mtlb]`, swanson98; needs caches and
    /// `[memory] dram_bytes` and `pa_bits`).
    #[serde(default)]
    pub mtlb: Option<crate::mtlb::MtlbConfig>,
    /// Shadow superpages' constants (`[shadow]`; used when `os.shadow_superpages` is not `none`).
    #[serde(default)]
    pub shadow: crate::os::shadow::ShadowConfig,
}

/// `[stlb]`: bala94 §4's software TLB, a table in unmapped memory that the refill handler
/// checks before walking up the page table for a page-table page's translation; it holds the
/// translations evicted from the TLB. Costs from bala94 Table 5.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StlbConfig {
    /// Entries (bala94: 1K or 4K).
    pub entries: u32,
    /// Ways: 1 is direct-mapped.
    pub ways: u32,
    /// Cycles of a lookup that hits (bala94 Table 5: 105 for L2 entries).
    pub hit_cycles: u64,
    /// Cycles a lookup that misses adds (bala94 §5: about 70).
    pub miss_cycles: u64,
}

impl Default for StlbConfig {
    fn default() -> Self {
        StlbConfig { entries: 4096, ways: 1, hit_cycles: 105, miss_cycles: 70 }
    }
}

/// `[time]`: the in-order timing model (see `docs/caches.md`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimeConfig {
    /// Base cycles per instruction: everything but the stalls the model adds (default 1.0).
    pub cpi: f64,
}

impl Default for TimeConfig {
    fn default() -> Self {
        TimeConfig { cpi: 1.0 }
    }
}

impl Config {
    /// True if the design models caches and time: it has a `[[cache]]`, `[memory]` or `[time]`
    /// section. Otherwise it simulates translation only and reports no time.
    pub fn timed(&self) -> bool {
        !self.cache.is_empty() || self.memory.is_some() || self.time.is_some()
    }
}

/// A config that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{file}: {error}")]
    Io {
        /// The file.
        file: String,
        /// Why.
        error: std::io::Error,
    },
    /// TOML syntax or an unknown/mistyped key.
    #[error("{file}: line {line}: {message}")]
    Parse {
        /// The file.
        file: String,
        /// 1-based line of the offending key or value.
        line: usize,
        /// What was wrong (names the key).
        message: String,
    },
    /// A value that cannot be simulated.
    #[error("{file}: {error}")]
    Invalid {
        /// The file.
        file: String,
        /// The key and what is expected.
        error: ParamError,
    },
    /// No preset of that name.
    #[error("unknown preset '{0}'{hint}; `xlat presets` lists them", hint = did_you_mean(.0))]
    UnknownPreset(String),
}

/// " (did you mean 'x86-64'?)" for the preset closest to a misspelt name, if one is close.
fn did_you_mean(name: &str) -> String {
    PRESETS
        .iter()
        .map(|(n, _)| (strsim::jaro_winkler(&name.to_lowercase(), n), *n))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| format!(" (did you mean '{n}'?)"))
        .unwrap_or_default()
}

/// Most entries one TLB structure may have (2^24).
pub const MAX_TLB_ENTRIES: u32 = 1 << 24;

/// Most physical frames a machine may have (2^32: 16 TiB of 4 KB frames).
pub const MAX_FRAMES: u64 = 1 << 32;

/// Built-in presets: (name, TOML source). Each file in `configs/` documents its source.
pub const PRESETS: &[(&str, &str)] = &[
    ("mips-r3000", include_str!("../../../configs/mips-r3000.toml")),
    ("mach3-r3000", include_str!("../../../configs/mach3-r3000.toml")),
    ("itanium2", include_str!("../../../configs/itanium2.toml")),
    ("itanium2-linux", include_str!("../../../configs/itanium2-linux.toml")),
    ("itanium2-lvhpt", include_str!("../../../configs/itanium2-lvhpt.toml")),
    ("itanium2-lvhpt-sharing", include_str!("../../../configs/itanium2-lvhpt-sharing.toml")),
    ("pa-8000", include_str!("../../../configs/pa-8000.toml")),
    ("ultrasparc", include_str!("../../../configs/ultrasparc.toml")),
    ("x86-64", include_str!("../../../configs/x86-64.toml")),
    ("x86-64-5level", include_str!("../../../configs/x86-64-5level.toml")),
    ("talluri95", include_str!("../../../configs/talluri95.toml")),
    ("decstation-5000-240", include_str!("../../../configs/decstation-5000-240.toml")),
    ("swanson98", include_str!("../../../configs/swanson98.toml")),
    ("swanson98-mtlb", include_str!("../../../configs/swanson98-mtlb.toml")),
];

impl Config {
    /// Parses and validates TOML text; `file` names it in errors.
    pub fn from_toml(text: &str, file: &str) -> Result<Config, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| {
            let msg = e.message().trim().replace('\n', " ");
            // Some errors (nesting too deep) come without a place: find the first line at which
            // the text stops parsing.
            let start = match e.span() {
                Some(s) if s.start > 0 => Some(s.start.min(text.len())),
                _ => first_bad_line(text),
            };
            let line = start.map(|p| text[..p].matches('\n').count() + 1).unwrap_or(1);
            let at = start.map(|p| section_at(text, p)).unwrap_or_default();
            ConfigError::Parse {
                file: file.to_string(),
                line,
                message: if at.is_empty() { msg } else { format!("in {at}: {msg}") },
            }
        })?;
        cfg.validate().map_err(|error| ConfigError::Invalid { file: file.to_string(), error })?;
        Ok(cfg)
    }

    /// Reads, parses and validates a config file.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Io { file: file.clone(), error })?;
        Config::from_toml(&text, &file)
    }

    /// A built-in preset by name.
    pub fn preset(name: &str) -> Result<Config, ConfigError> {
        let (n, text) =
            PRESETS.iter().find(|(n, _)| *n == name).ok_or_else(|| ConfigError::UnknownPreset(name.to_string()))?;
        Config::from_toml(text, &format!("preset {n}"))
    }

    /// Checks every value that serde cannot; the error names the key.
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.page_size < 2 || !self.page_size.is_power_of_two() {
            return Err(ParamError::new(
                "page_size",
                format!("must be a power of two of at least 2 bytes, got {}", self.page_size),
            ));
        }
        if self.tlb.is_empty() {
            return Err(ParamError::new("tlb", "at least one [[tlb]] is needed"));
        }
        for (i, t) in self.tlb.iter().enumerate() {
            let key = |k: &str| format!("tlb[{i}].{k}");
            if t.entries == 0 || t.entries > MAX_TLB_ENTRIES {
                return Err(ParamError::new(
                    key("entries"),
                    format!("must be from 1 to {MAX_TLB_ENTRIES}, got {}", t.entries),
                ));
            }
            if t.reserved >= t.entries {
                return Err(ParamError::new(
                    key("reserved"),
                    format!("must be less than entries = {}, got {}", t.entries, t.reserved),
                ));
            }
            let main = t.entries - t.reserved;
            let ways = t.ways.unwrap_or(main);
            if ways == 0 || main % ways != 0 {
                return Err(ParamError::new(
                    key("ways"),
                    format!("must be at least 1 and divide entries - reserved = {main}, got {ways}"),
                ));
            }
            if t.policy == Policy::Plru && !ways.is_power_of_two() {
                return Err(ParamError::new(
                    key("policy"),
                    format!("\"plru\" needs a power-of-two number of ways, got {ways}"),
                ));
            }
            if t.reserved_policy == Policy::Plru && !t.reserved.is_power_of_two() && t.reserved > 0 {
                return Err(ParamError::new(
                    key("reserved_policy"),
                    format!("\"plru\" needs a power-of-two number of reserved entries, got {}", t.reserved),
                ));
            }
            if t.level == 0 {
                return Err(ParamError::new(key("level"), "levels start at 1"));
            }
            if matches!(t.format, TlbFormat::PartialSubblock | TlbFormat::CompleteSubblock)
                && (!t.subblock_factor.is_power_of_two() || !(2..=64).contains(&t.subblock_factor))
            {
                return Err(ParamError::new(
                    key("subblock_factor"),
                    format!("must be a power of two from 2 to 64, got {}", t.subblock_factor),
                ));
            }
            if t.prefetch && t.format != TlbFormat::CompleteSubblock {
                return Err(ParamError::new(
                    key("prefetch"),
                    format!("subblock prefetch needs format = \"complete-subblock\", not \"{}\"", t.format.name()),
                ));
            }
            if self.tlb[..i].iter().any(|o| o.name == t.name) {
                return Err(ParamError::new(key("name"), format!("'{}' is used by another [[tlb]]", t.name)));
            }
        }
        // Every reference kind needs a path, and one structure per level and kind.
        for (kind, wants) in [("instruction fetches", Serves::Instruction), ("data references", Serves::Data)] {
            let levels: Vec<u32> =
                self.tlb.iter().filter(|t| t.serves == Serves::Unified || t.serves == wants).map(|t| t.level).collect();
            // A kind may start at level 2 behind a level-1 structure that serves only the other
            // kind (a micro-ITLB in front of a unified TLB: swanson98 §3.2).
            let other_l1 = self.tlb.iter().any(|t| t.level == 1 && t.serves != Serves::Unified && t.serves != wants);
            let start = if levels.contains(&1) {
                1
            } else if other_l1 && levels.contains(&2) {
                2
            } else {
                return Err(ParamError::new("tlb", format!("no level-1 TLB serves {kind}")));
            };
            let mut sorted = levels.clone();
            sorted.sort_unstable();
            sorted.dedup();
            if sorted.len() != levels.len() {
                return Err(ParamError::new("tlb", format!("two TLBs at the same level serve {kind}")));
            }
            if sorted.iter().enumerate().any(|(i, &l)| l != i as u32 + start) {
                return Err(ParamError::new("tlb", format!("levels serving {kind} must be 1, 2, ... without gaps")));
            }
        }
        let frames = self.os.memory_bytes / self.page_size;
        if frames == 0 || frames > MAX_FRAMES {
            return Err(ParamError::new(
                "os.memory_bytes",
                format!(
                    "must hold from 1 to 2^32 pages of {} bytes, got {} bytes ({frames} pages)",
                    self.page_size, self.os.memory_bytes
                ),
            ));
        }
        if !(0.0..1.0).contains(&self.os.fragmentation) {
            return Err(ParamError::new(
                "os.fragmentation",
                format!("must be in [0, 1), got {}", self.os.fragmentation),
            ));
        }
        self.os.global_ranges()?;
        self.os.validate(self.page_size)?;
        // The models check their own parameters (cheap: the structures start empty).
        let page_size = crate::addr::PageSize::from_bytes(self.page_size).expect("checked above");
        crate::pt::PageTable::new(&self.page_table, page_size)?;
        if let Some(c) = &self.cost.cache {
            crate::cost::PtCache::new(c)?;
        }
        crate::cache::validate(&self.cache, self.page_size)?;
        if self.timed() && self.cost.cache.is_some() {
            return Err(ParamError::new(
                "cost.cache",
                "walks go through the [[cache]] levels and [memory] of a timed design: remove [cost.cache]",
            ));
        }
        if let Some(t) = &self.time {
            if !(t.cpi.is_finite() && t.cpi >= 0.0) {
                return Err(ParamError::new("time.cpi", format!("must be a finite number >= 0, got {}", t.cpi)));
            }
        }
        let pt = &self.page_table;
        let vhpt = matches!(pt.kind, crate::pt::Kind::VhptShort | crate::pt::Kind::VhptLong);
        if pt.vhpt_entries != 0 && (!pt.vhpt_entries.is_power_of_two() || pt.vhpt_entries > 1 << 28) {
            return Err(ParamError::new(
                "page_table.vhpt_entries",
                format!("must be 0 (4 x page frames) or a power of two up to 2^28, got {}", pt.vhpt_entries),
            ));
        }
        if !vhpt && (pt.walker != crate::pt::Walker::Hardware || pt.vhpt_entries != 0 || pt.os.is_some()) {
            let key = if pt.os.is_some() {
                "page_table.os"
            } else if pt.vhpt_entries != 0 {
                "page_table.vhpt_entries"
            } else {
                "page_table.walker"
            };
            return Err(ParamError::new(
                key,
                format!(
                    "applies to kind = \"vhpt-short\" or \"vhpt-long\", not \"{}\" (use cost.refill)",
                    pt.kind.name()
                ),
            ));
        }
        if pt.kind == crate::pt::Kind::VhptLong
            && pt.vhpt_entries == 0
            && self.os.memory_bytes / self.page_size > 1 << 26
        {
            return Err(ParamError::new(
                "page_table.vhpt_entries",
                "4 x the page frames of os.memory_bytes is more than 2^28 entries; give a size",
            ));
        }
        self.layout.validate()?;
        if let Some(i) = &self.itanium {
            i.validate()?;
            if i.protection_keys && i.shared_region && pt.kind == crate::pt::Kind::VhptShort {
                return Err(ParamError::new(
                    "itanium.shared_region",
                    "key-based sharing needs per-page keys, which the short VHPT cannot hold (its key is the region's, chapman03 §2.3.1); use page_table.kind = \"vhpt-long\"",
                ));
            }
            if i.shared_region && self.layout.kind != crate::os::layout::LayoutKind::ItaniumLinux {
                return Err(ParamError::new(
                    "itanium.shared_region",
                    "needs layout.kind = \"itanium-linux\" (the shared region is region 1 of that layout)",
                ));
            }
        }
        if self.layout.kind == crate::os::layout::LayoutKind::Compact32
            && self.page_table.va_bits < 64
            && (1u64 << self.page_table.va_bits) < self.layout.size
        {
            return Err(ParamError::new(
                "layout.size",
                format!(
                    "{} bytes do not fit the {}-bit virtual address space of the page table (page_table.va_bits)",
                    self.layout.size, self.page_table.va_bits
                ),
            ));
        }
        Ok(())
    }
}

/// The byte offset of the start of the first line of `text` whose inclusion makes the text
/// fail to parse as TOML, if the whole text fails (by bisection over line counts).
fn first_bad_line(text: &str) -> Option<usize> {
    let starts: Vec<usize> = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
    let fails = |k: usize| {
        let end = starts.get(k).copied().unwrap_or(text.len());
        toml::from_str::<toml::Table>(&text[..end]).is_err()
    };
    if !fails(starts.len()) {
        return None;
    }
    // The smallest k such that the first k lines fail; the bad line is line k (index k - 1).
    let (mut lo, mut hi) = (1, starts.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if fails(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(starts[lo - 1])
}

/// The `[table]` or `[[array]]` header in force at byte `pos` of `text` (empty at the top
/// level), a header on the line of `pos` included.
fn section_at(text: &str, pos: usize) -> String {
    let mut section = String::new();
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let pos = pos.min(text.len());
    // Through the end of the line holding `pos`: a header there is where the error is.
    let through = text[pos..].find('\n').map_or(text.len(), |i| pos + i);
    for line in text[..through].lines() {
        let l = line.trim();
        if let Some(name) = l.strip_prefix("[[").and_then(|r| r.split("]]").next()) {
            // Named as the validation errors name them: `tlb[0]` is the first `[[tlb]]`.
            let n = index.entry(name.trim().to_string()).or_insert(0);
            section = format!("{}[{}]", name.trim(), *n);
            *n += 1;
        } else if let Some(name) = l.strip_prefix('[').and_then(|r| r.split(']').next()) {
            section = format!("[{}]", name.trim());
        }
    }
    if section == "[]" {
        section.clear();
    }
    section
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
name = "fa64"
page_size = 4096
[[tlb]]
name = "L1"
entries = 64
ways = 64          # ways == entries: fully associative
policy = "lru"     # lru | fifo | random | nru | plru
[page_table]
kind = "radix"     # radix | linear | hashed | clustered
"#;

    #[test]
    fn minimal_config_parses() {
        let c = Config::from_toml(MINIMAL, "m.toml").unwrap();
        assert_eq!(c.tlb[0].entries, 64);
        assert_eq!(c.page_table.kind, crate::pt::Kind::Radix);
    }

    #[test]
    fn unknown_preset_suggests_the_closest_name() {
        let e = Config::preset("x86_64").unwrap_err().to_string();
        assert_eq!(e, "unknown preset 'x86_64' (did you mean 'x86-64'?); `xlat presets` lists them");
        let e = Config::preset("itanium").unwrap_err().to_string();
        assert!(e.contains("did you mean 'itanium2'?"), "{e}");
        let e = Config::preset("zzzz").unwrap_err().to_string();
        assert_eq!(e, "unknown preset 'zzzz'; `xlat presets` lists them");
    }

    #[test]
    fn errors_without_a_place_are_located_by_line() {
        let deep = format!("{MINIMAL}[{}]\nx = 1\n", vec!["a"; 300].join("."));
        let e = Config::from_toml(&deep, "m.toml").unwrap_err().to_string();
        let line = MINIMAL.lines().count() + 1;
        assert!(e.starts_with(&format!("m.toml: line {line}: ")), "{e}");
        let header = format!("{MINIMAL}[page_table.a.b]\nx = 1\n");
        let e = Config::from_toml(&header, "m.toml").unwrap_err().to_string();
        assert!(e.starts_with(&format!("m.toml: line {line}: in [page_table.a.b]: unknown field `a`")), "{e}");
    }

    #[test]
    fn unknown_key_names_line_and_key() {
        let text = MINIMAL.replace("ways = 64", "wayz = 64");
        let e = Config::from_toml(&text, "m.toml").unwrap_err().to_string();
        assert!(e.starts_with("m.toml: line 7: in tlb[0]:"), "{e}");
        assert!(e.contains("wayz"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn impossible_values_name_the_key() {
        let cases = [
            ("ways = 64", "ways = 5", "tlb[0].ways"),
            ("entries = 64", "entries = 0", "tlb[0].entries"),
            ("page_size = 4096", "page_size = 4000", "page_size"),
        ];
        for (from, to, key) in cases {
            let e = Config::from_toml(&MINIMAL.replace(from, to), "m.toml").unwrap_err().to_string();
            assert!(e.starts_with(&format!("m.toml: {key}:")), "{e}");
        }
    }

    #[test]
    fn every_preset_is_valid() {
        for (name, _) in PRESETS {
            Config::preset(name).unwrap();
        }
    }
}
