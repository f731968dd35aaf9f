//! Configurations: TOML files and built-in presets.
//!
//! Two stages, as everywhere in xlat: serde structs mirror the TOML exactly (unknown keys are
//! rejected), then [`Config::validate`] checks every value and [`crate::engine::System::new`]
//! builds the components. Every error names the file and the key.

pub use crate::cache::Serves;
use crate::cache::{CacheLevelConfig, MemoryConfig};
use crate::cost::CostConfig;
use crate::os::OsConfig;
use crate::pt::{PageTableConfig, ParamError};
use crate::tlb::Policy;
use serde::Deserialize;
use std::path::Path;

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
    /// Cycles per lookup in this structure, hit or miss (default 0: a first-level hit the
    /// pipeline overlaps costs nothing; deeper levels, looked up after a miss above them, take
    /// the latency their machine gives). A first-level structure with a latency charges hit
    /// latency, which the report marks ([`crate::cost::hit_latency_cycles`]).
    #[serde(default)]
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
    /// With several cores: one structure all cores share, rather than one per core (default
    /// false; docs/multicore.md).
    #[serde(default)]
    pub shared: bool,
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
    /// The simulated cores and how threads are placed on them (`[cores]`, docs/multicore.md).
    #[serde(default)]
    pub cores: crate::multicore::CoresConfig,
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
    /// How the core waits for data-cache misses: `blocking` (every miss stalls the core for
    /// its whole latency; the default) or `overlap` (misses close together overlap, see
    /// [`crate::cost::Overlap`] and docs/caches.md).
    pub core: Core,
    /// `overlap`: misses that may be outstanding at once (miss status holding registers;
    /// default 6, the pending transactions of HP's Runway bus, which swanson98 §3.2 models).
    pub mshrs: u32,
    /// `overlap`: instructions from a group's first miss within which later misses join it
    /// (default 8: an assumption, the distance a single-issue stall-on-use core runs ahead of
    /// a missing load before an instruction uses it).
    pub window: u64,
    /// The core's clock in MHz (unset by default): with it the report gives the time in seconds
    /// (`time.seconds`) and event rates per second (`shootdowns.ipis_per_second`).
    pub clock_mhz: Option<f64>,
}

/// `time.core`: whether data-cache misses overlap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Core {
    /// Every miss stalls the core for its whole latency.
    #[default]
    Blocking,
    /// Non-blocking loads, stall on use: misses issued close together overlap.
    Overlap,
}

impl Core {
    /// The name in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            Core::Blocking => "blocking",
            Core::Overlap => "overlap",
        }
    }
}

impl Default for TimeConfig {
    fn default() -> Self {
        TimeConfig { cpi: 1.0, core: Core::Blocking, mshrs: 6, window: 8, clock_mhz: None }
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
    #[error("{file}: {}{error}", line.map(|l| format!("line {l}: ")).unwrap_or_default())]
    Invalid {
        /// The file.
        file: String,
        /// 1-based line of the key's value in the file (or of the nearest table on its path
        /// that the file has); `None` when the text does not hold it (a default's key).
        line: Option<usize>,
        /// The key and what is expected.
        error: ParamError,
    },
    /// No preset of that name.
    #[error("unknown preset '{0}'{hint}; `xlat presets` lists them", hint = did_you_mean(.0))]
    UnknownPreset(String),
}

/// " (did you mean 'x86-64'?)" for the presets a misspelt name may mean: those it is a part of
/// (`r3000`: 'mips-r3000' or 'mach3-r3000', the names ending in it first, then the shorter),
/// else the closest spelling, if one is close.
fn did_you_mean(name: &str) -> String {
    let name = name.to_lowercase();
    let mut parts: Vec<&str> =
        PRESETS.iter().map(|(n, _)| *n).filter(|n| name.len() >= 2 && n.contains(&name)).collect();
    parts.sort_by_key(|n| (!n.ends_with(&name), n.len()));
    let names: Vec<String> = if parts.is_empty() {
        PRESETS
            .iter()
            .map(|(n, _)| (strsim::jaro_winkler(&name, n), *n))
            .filter(|(score, _)| *score >= 0.8)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, n)| format!("'{n}'"))
            .into_iter()
            .collect()
    } else {
        parts.iter().take(3).map(|n| format!("'{n}'")).collect()
    };
    match names.as_slice() {
        [] => String::new(),
        [one] => format!(" (did you mean {one}?)"),
        [rest @ .., last] => format!(" (did you mean {} or {last}?)", rest.join(", ")),
    }
}

/// The 1-based line in `text` of the value a validation error's key names (`tlb[1].ways`,
/// `page_table.os.va_bits`), or of the last table on its path the text holds (a key left at its
/// default); `None` if the text holds none of it.
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    use toml::de::{DeTable, DeValue};
    let doc = DeTable::parse(text).ok()?;
    let mut table: &DeTable = doc.get_ref();
    let mut at = None;
    for part in key.split('.') {
        let (name, index) = match part.split_once('[') {
            Some((n, i)) => (n, i.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let Some((k, v)) = table.iter().find(|(k, _)| k.get_ref() == name) else {
            break;
        };
        at = Some(k.span().start);
        let mut value = v;
        if let (Some(i), DeValue::Array(items)) = (index, v.get_ref()) {
            let Some(item) = items.get(i) else {
                break;
            };
            at = Some(item.span().start);
            value = item;
        }
        match value.get_ref() {
            DeValue::Table(t) => table = t,
            _ => break,
        }
    }
    at.map(|p| text[..p.min(text.len())].matches('\n').count() + 1)
}

use crate::limits;
pub use crate::limits::{MAX_FRAMES, MAX_TLB_ENTRIES};

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
        cfg.validate().map_err(|error| ConfigError::Invalid {
            file: file.to_string(),
            line: line_of_key(text, &error.key),
            error,
        })?;
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
        self.cores.validate()?;
        self.os.shootdown.validate()?;
        if self.cores.count > 1 {
            if self.os.personality != crate::os::mach3::Personality::Linux {
                return Err(ParamError::new("cores.count", "more than one core needs os.personality = \"linux\""));
            }
            if self.itanium.is_some() {
                return Err(ParamError::new(
                    "cores.count",
                    "more than one core is not modelled with [itanium] regions",
                ));
            }
        }
        if self.tlb.len() > limits::MAX_TLBS {
            return Err(ParamError::new(
                "tlb",
                format!("at most {} [[tlb]] structures, got {}", limits::MAX_TLBS, self.tlb.len()),
            ));
        }
        if self.cache.len() > limits::MAX_CACHES {
            return Err(ParamError::new(
                "cache",
                format!("at most {} [[cache]] levels, got {}", limits::MAX_CACHES, self.cache.len()),
            ));
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
        self.check_bounds()?;
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
            if levels.len() > limits::MAX_TLB_LEVELS {
                return Err(ParamError::new(
                    "tlb",
                    format!("at most {} levels per reference kind", limits::MAX_TLB_LEVELS),
                ));
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
            if !(t.cpi.is_finite() && (0.0..=limits::MAX_CPI).contains(&t.cpi)) {
                return Err(ParamError::new(
                    "time.cpi",
                    format!("must be a number from 0 to {}, got {:?}", limits::MAX_CPI, t.cpi),
                ));
            }
            if let Some(c) = t.clock_mhz {
                if !(c.is_finite() && c > 0.0 && c <= limits::MAX_CLOCK_MHZ) {
                    return Err(ParamError::new(
                        "time.clock_mhz",
                        format!("must be a number above 0 and at most {}, got {c:?}", limits::MAX_CLOCK_MHZ),
                    ));
                }
            }
            if t.mshrs == 0 || t.mshrs > limits::MAX_MSHRS {
                return Err(ParamError::new(
                    "time.mshrs",
                    format!("must be from 1 to {}, got {}", limits::MAX_MSHRS, t.mshrs),
                ));
            }
            if t.window == 0 || t.window > limits::MAX_WINDOW {
                return Err(ParamError::new(
                    "time.window",
                    format!("must be from 1 to 2^32 = {} instructions, got {}", limits::MAX_WINDOW, t.window),
                ));
            }
        }
        let pt = &self.page_table;
        let vhpt = matches!(pt.kind, crate::pt::Kind::VhptShort | crate::pt::Kind::VhptLong);
        if pt.vhpt_entries != 0 && (!pt.vhpt_entries.is_power_of_two() || pt.vhpt_entries > limits::MAX_VHPT_ENTRIES) {
            return Err(ParamError::new(
                "page_table.vhpt_entries",
                format!("must be 0 (4 x page frames) or a power of two up to 2^26, got {}", pt.vhpt_entries),
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
            && (self.os.memory_bytes / self.page_size).next_power_of_two() * 4 > limits::MAX_VHPT_ENTRIES
        {
            return Err(ParamError::new(
                "page_table.vhpt_entries",
                "4 x the page frames of os.memory_bytes is more than 2^26 entries; give a size",
            ));
        }
        self.layout.validate()?;
        self.check_mach3_machine()?;
        self.check_optional_parts()?;
        if self.layout.kind == crate::os::layout::LayoutKind::ItaniumLinux {
            let (bits, key) = pt.translated_va_bits();
            if bits < 64 {
                return Err(ParamError::new(
                    key,
                    format!("layout.kind = \"itanium-linux\" puts mappings in regions 1 to 4 (addresses from 2^61 up), which needs 64 bits, got {bits}"),
                ));
            }
        }
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
        if self.layout.kind.is_32bit()
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

impl Config {
    /// The optional parts that need others: the memory controller's TLB (caches, DRAM and a
    /// shadow range), shadow superpages (the trace's own addresses, a shadow range to remap
    /// into), the PTLB (Mach's IPC path) and Mach's measured cost model (caches on the
    /// handlers' paths). Checked here, without building anything large, so that a design that
    /// validates builds.
    fn check_optional_parts(&self) -> Result<(), ParamError> {
        use crate::os::mach3::Personality;
        use crate::os::shadow::ShadowPolicy;
        let page_size = self.page_size;
        let mut shadow_range = None;
        if self.os.fork_flush == crate::os::ForkFlush::NewContext && self.itanium.is_none() {
            return Err(ParamError::new(
                "os.fork_flush",
                "\"new-context\" gives the parent new region IDs: it needs [itanium] (use \"parent\" without regions)",
            ));
        }
        if let Some(m) = &self.mtlb {
            if !self.timed() {
                return Err(ParamError::new(
                    "mtlb",
                    "the memory-controller TLB sees the requests that leave the caches: it needs [[cache]] levels",
                ));
            }
            let memory = self.memory.clone().unwrap_or_default();
            let need = |k: &str| {
                ParamError::new(
                    format!("memory.{k}"),
                    "the memory-controller TLB ([mtlb]) retranslates the addresses above the installed DRAM: \
                     set memory.dram_bytes and memory.pa_bits",
                )
            };
            let dram = memory.dram_bytes.ok_or_else(|| need("dram_bytes"))?;
            let bits = memory.pa_bits.ok_or_else(|| need("pa_bits"))?;
            if self.os.memory_bytes > dram {
                return Err(ParamError::new(
                    "os.memory_bytes",
                    format!("the OS's frames ({} bytes) must fit in memory.dram_bytes = {dram}", self.os.memory_bytes),
                ));
            }
            let layout = crate::mtlb::Mtlb::layout(m, dram, bits, page_size)?;
            if self.os.memory_bytes > layout.table_base {
                return Err(ParamError::new(
                    "os.memory_bytes",
                    format!(
                        "the OS's frames (the first {} bytes of DRAM) overlap the controller's table at {:#x}: \
                         set os.memory_bytes to at most {} (or move mtlb.table_base below them)",
                        self.os.memory_bytes, layout.table_base, layout.table_base
                    ),
                ));
            }
            let first = dram / page_size;
            shadow_range = Some((first * page_size, (first + layout.pages) * page_size));
        }
        if self.os.shadow_superpages != ShadowPolicy::None {
            let bad = |why: &str| Err(ParamError::new("os.shadow_superpages", why.to_string()));
            if self.layout.kind != crate::os::layout::LayoutKind::Identity {
                return bad("shadow superpages map the trace's own addresses: they need [layout] kind = \"identity\"");
            }
            if self.itanium.is_some() || self.os.personality != Personality::Linux {
                return bad("shadow superpages need os.personality = \"linux\" and no [itanium]");
            }
            // The shadow state starts small (free regions are kept as runs): build it to check it.
            crate::os::shadow::Shadow::new(self.os.shadow_superpages, &self.shadow, page_size, shadow_range)?;
        }
        match self.os.personality {
            Personality::Linux if self.ptlb.is_some() => {
                Err(ParamError::new("ptlb", "the PTLB is on Mach's IPC path: it needs os.personality = \"mach3\""))
            }
            Personality::Linux => Ok(()),
            Personality::Mach3 => {
                let serves = |c: &crate::cache::CacheLevelConfig, wants: Serves| {
                    c.serves == Serves::Unified || c.serves == wants
                };
                let handlers_cached = self.cache.iter().any(|c| serves(c, Serves::Instruction))
                    && self.cache.iter().any(|c| serves(c, Serves::Data) && c.walker);
                if self.mach3.cost_model == crate::os::mach3::CostModel::Cache && !handlers_cached {
                    return Err(ParamError::new(
                        "mach3.cost_model",
                        "\"cache\" measures the handlers' cache misses: it needs [[cache]] levels serving instructions and data",
                    ));
                }
                self.mach3.zones(self.ptlb.as_ref()).map(|_| ())
            }
        }
    }

    /// `[os]`'s kernel costs: each at most 2^32 cycles, the footprints at most 1 MiB per event,
    /// and no event charged twice (a fault as translation and as kernel time, a RID purge as
    /// translation and as a kernel flush).
    fn check_kernel_costs(&self) -> Result<(), ParamError> {
        let o = &self.os;
        limits::all_cycles([
            ("os.syscall_cycles", o.syscall_cycles),
            ("os.switch_cycles", o.switch_cycles),
            ("os.minor_fault_cycles", o.minor_fault_cycles),
            ("os.major_fault_cycles", o.major_fault_cycles),
            ("os.flush_cycles", o.flush_cycles),
            ("os.ipc_cycles", o.ipc_cycles),
        ])?;
        for (key, bytes) in
            [("os.kernel_text_bytes", o.kernel_text_bytes), ("os.kernel_data_bytes", o.kernel_data_bytes)]
        {
            if bytes > limits::MAX_KERNEL_FOOTPRINT {
                return Err(ParamError::new(
                    key,
                    format!("must be at most 2^20 = {} bytes per event, got {bytes}", limits::MAX_KERNEL_FOOTPRINT),
                ));
            }
        }
        if o.kernel_text_bytes + o.kernel_data_bytes > 0 && o.personality != crate::os::mach3::Personality::Linux {
            let key = if o.kernel_text_bytes > 0 { "os.kernel_text_bytes" } else { "os.kernel_data_bytes" };
            return Err(ParamError::new(
                key,
                "Mach 3.0's kernel makes its own references (docs/mach3.md): the footprint needs os.personality = \"linux\"",
            ));
        }
        if self.cost.page_fault_cycles > 0 {
            if let Some(key) =
                [("os.minor_fault_cycles", o.minor_fault_cycles), ("os.major_fault_cycles", o.major_fault_cycles)]
                    .iter()
                    .find(|(_, c)| *c > 0)
                    .map(|(k, _)| *k)
            {
                return Err(ParamError::new(
                    key,
                    "a fault would be charged twice: set either cost.page_fault_cycles (as translation) or \
                     os.minor_fault_cycles and os.major_fault_cycles (as kernel time), not both",
                ));
            }
        }
        if o.flush_cycles > 0 && self.itanium.as_ref().is_some_and(|i| i.purge_cycles > 0) {
            return Err(ParamError::new(
                "os.flush_cycles",
                "a RID purge would be charged twice: set itanium.purge_cycles = 0 to charge purges as kernel flushes",
            ));
        }
        Ok(())
    }

    /// Under `os.personality = "mach3"`: the machine Mach 3.0 ran on (bala94's R3000).
    fn check_mach3_machine(&self) -> Result<(), ParamError> {
        use crate::os::layout::LayoutKind;
        if self.os.personality != crate::os::mach3::Personality::Mach3 {
            return Ok(());
        }
        let bad =
            |why: &str| Err(ParamError::new("os.personality", format!("mach3 models Mach 3.0 on the R3000: {why}")));
        if self.page_size != 4096 {
            return bad("it needs page_size = 4096");
        }
        if self.tlb.len() != 1 || self.tlb[0].serves != Serves::Unified {
            return bad("it needs one unified [[tlb]] (the R3000's, with `reserved` entries for L2 PTEs)");
        }
        let kuseg = match self.layout.kind {
            LayoutKind::Compact32 | LayoutKind::Sparse32 => self.layout.size <= crate::os::mach3::KUSEG_TOP,
            // Traces with 32-bit user addresses already (an address at or above 2 GB stops the
            // design when it is referenced).
            LayoutKind::Identity => true,
            LayoutKind::ItaniumLinux => false,
        };
        if !kuseg {
            return bad("it needs a 32-bit user space: [layout] kind = \"sparse32\" or \"compact32\" with size <= 2 GB (kuseg), or \"identity\" for traces of 32-bit addresses");
        }
        if self.itanium.is_some() || self.page_table.kind != crate::pt::Kind::Linear {
            return bad("it needs page_table.kind = \"linear\" and no [itanium]");
        }
        Ok(())
    }

    /// The bounds of docs/configuration.md that no single part's own check covers: every cycle
    /// cost and latency, and the entries of all TLB structures and lines of all caches together.
    fn check_bounds(&self) -> Result<(), ParamError> {
        for (i, t) in self.tlb.iter().enumerate() {
            limits::cycles(format!("tlb[{i}].latency"), t.latency)?;
        }
        for (i, c) in self.cache.iter().enumerate() {
            limits::cycles(format!("cache[{i}].latency"), c.latency)?;
        }
        let c = &self.cost;
        limits::all_cycles([
            ("cost.trap_cycles", c.trap_cycles),
            ("cost.walker_cycles", c.walker_cycles),
            ("cost.memory_cycles", c.memory_cycles),
            ("cost.page_fault_cycles", c.page_fault_cycles),
        ])?;
        if let Some(pc) = &c.cache {
            limits::all_cycles([("cost.cache.hit_cycles", pc.hit_cycles), ("cost.cache.miss_cycles", pc.miss_cycles)])?;
        }
        if let Some(m) = &self.memory {
            limits::cycles("memory.latency", m.latency)?;
        }
        if let Some(s) = &self.stlb {
            limits::all_cycles([("stlb.hit_cycles", s.hit_cycles), ("stlb.miss_cycles", s.miss_cycles)])?;
        }
        if let Some(p) = &self.ptlb {
            limits::all_cycles([
                ("ptlb.prefetch_cycles", p.prefetch_cycles),
                ("ptlb.present_cycles", p.present_cycles),
            ])?;
        }
        if let Some(m) = &self.mtlb {
            limits::cycles("mtlb.mmc_cycles", m.mmc_cycles)?;
            if let Some(c) = m.miss_cycles {
                limits::cycles("mtlb.miss_cycles", c)?;
            }
        }
        if let Some(i) = &self.itanium {
            limits::all_cycles([
                ("itanium.key_fault_cycles", i.key_fault_cycles),
                ("itanium.pkr_reload_cycles", i.pkr_reload_cycles),
                ("itanium.purge_cycles", i.purge_cycles),
            ])?;
        }
        self.mach3.check_bounds()?;
        let s = &self.shadow;
        limits::all_cycles([
            ("shadow.flush_line_cycles", s.flush_line_cycles),
            ("shadow.writeback_cycles", s.writeback_cycles),
            ("shadow.page_cycles", s.page_cycles),
            ("shadow.copy_page_cycles", s.copy_page_cycles),
        ])?;
        self.check_kernel_costs()?;
        if self.os.global.len() > limits::MAX_GLOBAL_RANGES {
            return Err(ParamError::new(
                "os.global",
                format!("at most {} ranges, got {}", limits::MAX_GLOBAL_RANGES, self.os.global.len()),
            ));
        }
        // The shadow range's regions are kept one by one (a free set per size): count them, and
        // their bytes, before anything is built.
        let regions = s.partition.iter().fold(0u64, |n, &(_, count)| n.saturating_add(count));
        let bytes = s.partition.iter().try_fold(0u64, |b, &(size, count)| b.checked_add(size.checked_mul(count)?));
        if regions > limits::MAX_SHADOW_REGIONS || bytes.map_or(true, |b| b > 1 << 52) {
            return Err(ParamError::new(
                "shadow.partition",
                format!(
                    "at most 2^20 = {} regions of at most 2^52 bytes in all, got {regions} regions",
                    limits::MAX_SHADOW_REGIONS
                ),
            ));
        }
        // Sizes of the optional structures, then the design's totals.
        let optional = [
            ("stlb.entries", self.stlb.as_ref().map(|s| s.entries)),
            ("ptlb.entries", self.ptlb.as_ref().map(|p| p.entries)),
            ("mtlb.entries", self.mtlb.as_ref().map(|m| m.entries)),
        ];
        for (key, entries) in optional {
            if let Some(n) = entries.filter(|&n| n == 0 || n > MAX_TLB_ENTRIES) {
                return Err(ParamError::new(key, format!("must be from 1 to 2^24 = {MAX_TLB_ENTRIES}, got {n}")));
            }
        }
        if let Some(s) = &self.stlb {
            if s.ways == 0 || s.entries % s.ways != 0 {
                return Err(ParamError::new(
                    "stlb.ways",
                    format!("must be at least 1 and divide stlb.entries = {}, got {}", s.entries, s.ways),
                ));
            }
        }
        let entries: u64 = self.tlb.iter().map(|t| t.entries as u64).sum::<u64>()
            + optional.iter().filter_map(|(_, n)| n.map(u64::from)).sum::<u64>();
        if entries > limits::MAX_TOTAL_TLB_ENTRIES {
            return Err(ParamError::new(
                "tlb",
                format!(
                    "the design's TLB structures ([[tlb]], [stlb], [ptlb], [mtlb]) hold {entries} entries in all; at most 2^25 = {}",
                    limits::MAX_TOTAL_TLB_ENTRIES
                ),
            ));
        }
        let lines: u64 = self.cache.iter().map(|c| c.size / c.line.max(1)).fold(0, u64::saturating_add);
        if lines > limits::MAX_TOTAL_CACHE_LINES {
            return Err(ParamError::new(
                "cache",
                format!(
                    "the design's [[cache]] levels hold {lines} lines in all; at most 2^25 = {}",
                    limits::MAX_TOTAL_CACHE_LINES
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
        assert!(e.contains("did you mean 'itanium2', "), "{e}");
        let e = Config::preset("r3000").unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown preset 'r3000' (did you mean 'mips-r3000' or 'mach3-r3000'?); `xlat presets` lists them"
        );
        let e = Config::preset("lvhpt-SHARING").unwrap_err().to_string();
        assert!(e.contains("(did you mean 'itanium2-lvhpt-sharing'?)"), "{e}");
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

    /// A validation error's text without its "line N: " (these tests check the key and the
    /// message; the line has a test of its own).
    fn unlined(e: ConfigError) -> String {
        let e = e.to_string();
        match e.split_once(": line ") {
            Some((file, rest)) => match rest.split_once(": ") {
                Some((n, msg)) if n.bytes().all(|b| b.is_ascii_digit()) => format!("{file}: {msg}"),
                _ => e,
            },
            None => e,
        }
    }

    #[test]
    fn impossible_values_name_the_key() {
        let cases = [
            ("ways = 64", "ways = 5", "tlb[0].ways"),
            ("entries = 64", "entries = 0", "tlb[0].entries"),
            ("page_size = 4096", "page_size = 4000", "page_size"),
            ("page_size = 4096", "page_size = 4096\n[os]\nfork_flush = \"new-context\"", "os.fork_flush"),
        ];
        for (from, to, key) in cases {
            let e = Config::from_toml(&MINIMAL.replace(from, to), "m.toml").map_err(unlined).unwrap_err();
            assert!(e.starts_with(&format!("m.toml: {key}:")), "{e}");
        }
    }

    /// Every cost and latency key takes 2^32 cycles and refuses one more, naming itself.
    #[test]
    fn every_cost_is_bounded() {
        let sections: &[(&str, &[&str])] = &[
            ("cost", &["trap_cycles", "walker_cycles", "memory_cycles", "page_fault_cycles"]),
            ("stlb", &["hit_cycles", "miss_cycles"]),
            ("itanium", &["key_fault_cycles", "pkr_reload_cycles", "purge_cycles"]),
            ("memory", &["latency"]),
            (
                "mach3",
                &[
                    "l1u_cycles",
                    "l1k_cycles",
                    "l2_cycles",
                    "l3_cycles",
                    "invalid_cycles",
                    "stlb_hit_cycles",
                    "stlb_l2_user_hit_cycles",
                    "stlb_l2_kernel_hit_cycles",
                    "stlb_miss_cycles",
                    "miss_cycles",
                ],
            ),
            ("shadow", &["flush_line_cycles", "writeback_cycles", "page_cycles", "copy_page_cycles"]),
            (
                "os",
                &[
                    "syscall_cycles",
                    "switch_cycles",
                    "minor_fault_cycles",
                    "major_fault_cycles",
                    "flush_cycles",
                    "ipc_cycles",
                ],
            ),
        ];
        let max = crate::limits::MAX_CYCLES;
        for (section, keys) in sections {
            for key in *keys {
                let with = |v: u64| Config::from_toml(&format!("{MINIMAL}[{section}]\n{key} = {v}\n"), "m.toml");
                with(max).unwrap_or_else(|e| panic!("{section}.{key} = 2^32: {e}"));
                let e = with(max + 1).map_err(unlined).unwrap_err();
                assert!(e.starts_with(&format!("m.toml: {section}.{key}: must be at most 2^32")), "{e}");
            }
        }
        let with = |v: u64| Config::from_toml(&format!("{MINIMAL}[mach3]\ntrap_l2 = [1, {v}]\n"), "m.toml");
        with(max).unwrap();
        assert!(with(max + 1).map_err(unlined).unwrap_err().starts_with("m.toml: mach3.trap_l2: must be at most 2^32"));
        let tlb = MINIMAL.replace("policy = \"lru\" ", &format!("latency = {}\npolicy = \"lru\" ", max + 1));
        let e = Config::from_toml(&tlb, "m.toml").map_err(unlined).unwrap_err();
        assert!(e.starts_with("m.toml: tlb[0].latency: must be at most 2^32"), "{e}");
        let e = Config::from_toml(&format!("{MINIMAL}[time]\ncpi = 1e300\n"), "m.toml").map_err(unlined).unwrap_err();
        assert_eq!(e, "m.toml: time.cpi: must be a number from 0 to 1000, got 1e300");
        Config::from_toml(&format!("{MINIMAL}[time]\ncpi = 1000.0\n"), "m.toml").unwrap();
    }

    /// Sizes: each structure, and the design's totals, at their bounds and one past them.
    #[test]
    fn every_size_is_bounded() {
        let refused = |text: String, key: &str| {
            let e = Config::from_toml(&text, "m.toml").map_err(unlined).unwrap_err();
            assert!(e.starts_with(&format!("m.toml: {key}: ")), "{key}: {e}");
            assert!(!e.contains('\n'));
        };
        let accepted = |text: String| Config::from_toml(&text, "m.toml").unwrap_or_else(|e| panic!("{e}"));
        accepted(format!("{MINIMAL}[stlb]\nentries = 16777216\n"));
        refused(format!("{MINIMAL}[stlb]\nentries = 1073741824\n"), "stlb.entries");
        refused(format!("{MINIMAL}[stlb]\nentries = 64\nways = 3\n"), "stlb.ways");
        refused(format!("{MINIMAL}[mtlb]\nentries = 16777217\n"), "mtlb.entries");
        refused(format!("{MINIMAL}[ptlb]\nentries = 0\n"), "ptlb.entries");
        let hashed = |b: u64| MINIMAL.replace("kind = \"radix\" ", &format!("kind = \"hashed\"\nbuckets = {b}\n"));
        accepted(hashed(1 << 24));
        refused(hashed((1 << 24) + 1), "page_table.buckets");
        refused(hashed(1 << 32), "page_table.buckets");
        let pwc = |n: u32| MINIMAL.replace("kind = \"radix\" ", &format!("kind = \"radix\"\npwc = [4, {n}]\n"));
        accepted(pwc(1 << 16));
        refused(pwc((1 << 16) + 1), "page_table.pwc");
        let vhpt = |n: u64, mem: u64| {
            format!("name = \"v\"\n[[tlb]]\nname = \"L1\"\nentries = 32\n[page_table]\nkind = \"vhpt-long\"\nvhpt_entries = {n}\n[os]\nmemory_bytes = {mem}\n")
        };
        accepted(vhpt(1 << 26, 1 << 30));
        refused(vhpt(1 << 27, 1 << 30), "page_table.vhpt_entries");
        // 0: four entries per frame, 2^24 frames -> 2^26 entries; one more frame doubles it.
        accepted(vhpt(0, 1 << 36));
        refused(vhpt(0, (1 << 36) + 4096), "page_table.vhpt_entries");
        let tlbs = |n: usize, entries: u32| {
            let mut t = String::from("name = \"t\"\n");
            for i in 0..n {
                t += &format!("[[tlb]]\nname = \"T{i}\"\nentries = {entries}\nways = 4\nlevel = {}\n", i + 1);
            }
            t
        };
        accepted(tlbs(4, 64));
        refused(tlbs(5, 64), "tlb");
        refused(tlbs(17, 64), "tlb");
        accepted(tlbs(2, 1 << 24));
        refused(tlbs(3, 1 << 24), "tlb");
        let caches = |n: usize, size: u64| {
            let mut t = MINIMAL.to_string();
            for i in 0..n {
                t += &format!("[[cache]]\nname = \"C{i}\"\nsize = {size}\nline = 64\nways = 8\nlevel = {}\n", i + 1);
            }
            t
        };
        accepted(caches(8, 32768));
        refused(caches(17, 32768), "cache");
        accepted(caches(2, 1 << 30));
        refused(caches(3, 1 << 30), "cache");
        let partition = |p: &str| format!("{MINIMAL}[shadow]\npartition = {p}\n");
        accepted(partition("[[16384, 1048576]]"));
        refused(partition("[[16384, 1048577]]"), "shadow.partition");
        refused(partition("[[16384, 1099511627776]]"), "shadow.partition");
        refused(partition("[[4611686018427387904, 8]]"), "shadow.partition");
        let global = |n: usize| {
            let ranges: Vec<String> = (0..n).map(|i| format!("\"{}-{}\"", i * 8192, i * 8192 + 4096)).collect();
            format!("{MINIMAL}[os]\nglobal = [{}]\n", ranges.join(", "))
        };
        accepted(global(64));
        refused(global(65), "os.global");
    }

    #[test]
    fn every_preset_is_valid() {
        for (name, _) in PRESETS {
            Config::preset(name).unwrap();
        }
    }
}

#[cfg(test)]
mod line_tests {
    use super::*;

    const TEXT: &str = "name = \"x\"\n\n[[tlb]]\nname = \"L1\"\nentries = 64\n\n[[tlb]]\nname = \"L2\"\nlevel = 2\nentries = 128\nways = 3\n\n[page_table]\nkind = \"radix\"\n";

    #[test]
    fn a_validation_error_names_the_line_of_its_key() {
        assert_eq!(line_of_key(TEXT, "tlb[1].ways"), Some(11));
        assert_eq!(line_of_key(TEXT, "tlb[0].entries"), Some(5));
        assert_eq!(line_of_key(TEXT, "name"), Some(1));
        // A key left at its default: the nearest table on its path that the text holds.
        assert_eq!(line_of_key(TEXT, "page_table.va_bits").map(|l| (13..=14).contains(&l)), Some(true));
        assert_eq!(line_of_key(TEXT, "os.memory_bytes"), None);
        let e = Config::from_toml(TEXT, "mine.toml").unwrap_err().to_string();
        assert!(e.starts_with("mine.toml: line 11: tlb[1].ways:"), "{e}");
    }
}
