//! A design validated once, completely: [`Design`] is a [`Config`] that passed
//! [`Config::validate`] (every section and every check across sections) together with what the
//! engine derives from it (the TLB structures and the path of each kind of reference, the
//! address range the page table translates, the cost parameters). [`super::System`] is built
//! from a `Design` without any check of its own: every error a design can have is reported
//! here, naming its config key.

use crate::addr::PageSize;
use crate::config::{Config, Serves, TlbFormat};
use crate::cost::{CostParams, RefillCost};
use crate::pt::{Kind as PtKind, ParamError, Walker};
use crate::tlb::{Format, Geometry};

/// The structures one kind of reference goes through, level 1 first (indexes into the design's
/// structures).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Path {
    pub(crate) levels: [u8; crate::limits::MAX_TLB_LEVELS],
    pub(crate) len: u8,
}

impl Path {
    fn of(v: &[usize]) -> Path {
        let mut p = Path::default();
        for (k, &i) in v.iter().enumerate() {
            p.levels[k] = i as u8;
        }
        p.len = v.len() as u8;
        p
    }

    /// The level-1 structure.
    #[inline(always)]
    pub(crate) fn first(&self) -> usize {
        self.levels[0] as usize
    }

    /// The structures, level 1 first.
    #[inline(always)]
    pub(crate) fn levels(&self) -> &[u8] {
        &self.levels[..self.len as usize]
    }
}

/// One TLB structure of a design: what it is and the TLB it is built as.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StructureSpec {
    pub(crate) name: String,
    pub(crate) level: u32,
    /// `None`: a reserved partition holding page-table translations.
    pub(crate) serves: Option<Serves>,
    pub(crate) latency: u64,
    pub(crate) format: TlbFormat,
    pub(crate) prefetch: bool,
    pub(crate) geometry: Geometry,
    pub(crate) tlb_format: Format,
}

/// A validated design and what the engine derives from it.
#[derive(Clone, Debug)]
pub struct Design {
    config: Config,
    pub(crate) page_size: PageSize,
    pub(crate) structures: Vec<StructureSpec>,
    pub(crate) ipath: Path,
    pub(crate) dpath: Path,
    /// The structure that holds page-table translations (a reserved partition of the last data
    /// level, or that level itself).
    pub(crate) pt_tlb: usize,
    /// Subblock prefetch on each path [instruction, data]: the block size in base pages of the
    /// complete-subblock structure that prefetches, or 0.
    pub(crate) prefetch: [usize; 2],
    /// VPNs at or above this are outside the page table's virtual address space.
    pub(crate) vpn_limit: u64,
    /// VPN ranges (inclusive) of the `os.global` regions.
    pub(crate) global: Vec<(u64, u64)>,
    /// Physical frames of `os.memory_bytes`.
    pub(crate) frames: u64,
    /// Entries of the long-format VHPT (`vhpt-long`).
    pub(crate) vhpt_entries: Option<u64>,
    cost: CostParams,
}

impl Design {
    /// Validates `config` completely and derives the design from it; errors name the key.
    pub fn new(config: &Config) -> Result<Design, ParamError> {
        config.validate()?;
        let page_size = PageSize::from_bytes(config.page_size).expect("validated");
        let mut structures: Vec<StructureSpec> = config
            .tlb
            .iter()
            .map(|t| {
                let main = t.entries - t.reserved;
                StructureSpec {
                    name: t.name.clone(),
                    level: t.level,
                    serves: Some(t.serves),
                    latency: t.latency,
                    format: t.format,
                    prefetch: t.prefetch,
                    geometry: Geometry { entries: main, ways: t.ways.unwrap_or(main), policy: t.policy, seed: t.seed },
                    tlb_format: match t.format {
                        TlbFormat::Single => Format::Single,
                        TlbFormat::Superpage => Format::Superpage,
                        TlbFormat::PartialSubblock => Format::PartialSubblock { block_pages: t.subblock_factor },
                        TlbFormat::CompleteSubblock => Format::CompleteSubblock { block_pages: t.subblock_factor },
                    },
                }
            })
            .collect();
        let path_for = |wants: Serves| {
            let mut idx: Vec<usize> = (0..structures.len())
                .filter(|&i| matches!(structures[i].serves, Some(s) if s == Serves::Unified || s == wants))
                .collect();
            idx.sort_by_key(|&i| structures[i].level);
            idx
        };
        let (ipath, dpath) = (path_for(Serves::Instruction), path_for(Serves::Data));
        // Page-table translations live in the reserved partition of the last data level if it
        // has one, else they compete in that level's main entries; other levels' reserved
        // entries only shrink their main partitions.
        let last_d = *dpath.last().expect("validated: a level-1 data TLB exists");
        let t = &config.tlb[last_d];
        let pt_tlb = if t.reserved > 0 {
            structures.push(StructureSpec {
                name: format!("{}.reserved", t.name),
                level: t.level,
                serves: None,
                latency: 0,
                format: TlbFormat::Single,
                prefetch: false,
                geometry: Geometry { entries: t.reserved, ways: t.reserved, policy: t.reserved_policy, seed: t.seed },
                tlb_format: Format::Single,
            });
            structures.len() - 1
        } else {
            last_d
        };
        // A path prefetches subblocks if one of its complete-subblock structures does.
        let prefetch_of = |v: &[usize]| {
            v.iter()
                .filter(|&&i| i < config.tlb.len() && config.tlb[i].prefetch)
                .map(|&i| config.tlb[i].subblock_factor as usize)
                .max()
                .unwrap_or(0)
        };
        let prefetch = [prefetch_of(&ipath), prefetch_of(&dpath)];
        let frames = config.os.memory_bytes / config.page_size;
        let vhpt_entries = (config.page_table.kind == PtKind::VhptLong).then(|| match config.page_table.vhpt_entries {
            0 => (4 * frames).max(1).next_power_of_two(),
            n => n,
        });
        let (va_bits, _) = config.page_table.translated_va_bits();
        let vpn_limit = if va_bits >= 64 { u64::MAX } else { (1u64 << va_bits) >> page_size.shift() };
        let global = config
            .os
            .global_ranges()?
            .into_iter()
            .map(|(lo, hi)| (lo >> page_size.shift(), hi >> page_size.shift()))
            .collect();
        let cost = cost_params(config, &structures, ipath[0], dpath[0]);
        Ok(Design {
            config: config.clone(),
            page_size,
            structures,
            ipath: Path::of(&ipath),
            dpath: Path::of(&dpath),
            pt_tlb,
            prefetch,
            vpn_limit,
            global,
            frames,
            vhpt_entries,
            cost,
        })
    }

    /// The config it was made from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The design's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// What the cycle model needs besides the statistics.
    pub fn cost(&self) -> &CostParams {
        &self.cost
    }
}

/// The cost parameters of a design with these structures (`firsts`: the level-1 structures of
/// instruction fetches and data references).
fn cost_params(config: &Config, structures: &[StructureSpec], ifirst: usize, dfirst: usize) -> CostParams {
    let mach = config.os.personality == crate::os::mach3::Personality::Mach3;
    let vhpt = matches!(config.page_table.kind, PtKind::VhptShort | PtKind::VhptLong);
    let refill = match (mach, vhpt, config.page_table.walker == Walker::Hardware, config.cost.refill) {
        (true, ..) => RefillCost::Handlers,
        (false, true, true, _) => RefillCost::VhptWalker,
        (false, true, false, _) => RefillCost::Traps,
        (false, false, _, crate::cost::Refill::Hardware) => RefillCost::Walker,
        (false, false, _, crate::cost::Refill::Software) => RefillCost::Traps,
    };
    CostParams {
        cost: config.cost.clone(),
        // Level-1 TLB lookups are pipelined with the instruction; deeper levels add time.
        tlb_latency: structures
            .iter()
            .enumerate()
            .map(|(i, s)| (s.latency, s.level > 1 && i != ifirst && i != dfirst))
            .collect(),
        refill,
        stlb: config.stlb.as_ref().filter(|_| !mach).map(|c| (c.hit_cycles, c.miss_cycles)),
        itanium: config.itanium.as_ref().map(|i| [i.purge_cycles, i.key_fault_cycles, i.pkr_reload_cycles]),
        cpi: config.timed().then(|| config.time.as_ref().map_or(1.0, |t| t.cpi)),
        clock_mhz: config.time.as_ref().and_then(|t| t.clock_mhz),
        kernel: crate::cost::KernelCosts::of(&config.os),
    }
}
