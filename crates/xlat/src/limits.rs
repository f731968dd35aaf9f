//! The bounds of every size, count and cost a design may ask for, checked when a config is
//! validated (docs/configuration.md, "Bounds").
//!
//! Sizes are bounded so that the largest design xlat accepts allocates its fixed tables (TLBs,
//! caches, hash buckets, VHPT, frame bitmaps) in a few GiB; costs so that a cycle total over any
//! trace xlat can read stays far from 2^64 (and the totals saturate rather than wrap if it
//! does not). A value past its bound is a one-line error naming the key and the bound.

use crate::pt::ParamError;

/// Most entries of one TLB structure (`[[tlb]]`, `[stlb]`, `[ptlb]`, `[mtlb]`).
pub const MAX_TLB_ENTRIES: u32 = 1 << 24;

/// Most entries of all of a design's TLB structures together.
pub const MAX_TOTAL_TLB_ENTRIES: u64 = 1 << 25;

/// Most `[[tlb]]` structures of one design.
pub const MAX_TLBS: usize = 16;

/// Most TLB levels on the path of one kind of reference.
pub const MAX_TLB_LEVELS: usize = 4;

/// Most `[[cache]]` levels of one design.
pub const MAX_CACHES: usize = 16;

/// Most lines of one cache level (`[[cache]]`, `[cost.cache]`).
pub const MAX_CACHE_LINES: u64 = 1 << 24;

/// Most lines of all of a design's cache levels together.
pub const MAX_TOTAL_CACHE_LINES: u64 = 1 << 25;

/// Most hash buckets of a hashed or clustered table (`page_table.buckets`).
pub const MAX_BUCKETS: u64 = 1 << 24;

/// Most entries of a long-format VHPT (`page_table.vhpt_entries`, or 4 x the page frames).
pub const MAX_VHPT_ENTRIES: u64 = 1 << 26;

/// Most entries of one page-walk cache (`page_table.pwc`).
pub const MAX_PWC_ENTRIES: u32 = 1 << 16;

/// Most physical frames (`os.memory_bytes / page_size`): 16 TiB of 4 KB frames.
pub const MAX_FRAMES: u64 = 1 << 32;

/// Most regions of the shadow range (`shadow.partition`, the counts added up).
pub const MAX_SHADOW_REGIONS: u64 = 1 << 20;

/// Most global ranges (`os.global`).
pub const MAX_GLOBAL_RANGES: usize = 64;

/// Most bytes of kernel text, and of kernel data, referenced per kernel event
/// (`os.kernel_text_bytes`, `os.kernel_data_bytes`): 1 MiB.
pub const MAX_KERNEL_FOOTPRINT: u64 = 1 << 20;

/// Most cycles of any one cost or latency key (a lookup, a walk step, a trap, a page fault, a
/// memory access): 2^32, more than a second of any modelled machine.
pub const MAX_CYCLES: u64 = 1 << 32;

/// Largest `time.cpi`.
pub const MAX_CPI: f64 = 1000.0;
/// Largest `time.clock_mhz`: 1 THz, far above any modelled core.
pub const MAX_CLOCK_MHZ: f64 = 1e6;
/// Bound of `time.mshrs` (misses outstanding at once in the `overlap` core).
pub const MAX_MSHRS: u32 = 1024;
/// Bound of `time.window` (instructions).
pub const MAX_WINDOW: u64 = 1 << 32;

/// One row of the bounds table in docs/configuration.md.
pub struct Bound {
    /// The key or keys (a `*` stands for any name).
    pub key: &'static str,
    /// The bound, as the docs write it.
    pub bound: &'static str,
}

/// Every bound, as docs/configuration.md lists them (a test compares the two).
pub const TABLE: &[Bound] = &[
    Bound { key: "tlb[].entries, stlb.entries, ptlb.entries, mtlb.entries", bound: "2^24 each" },
    Bound { key: "entries of all TLB structures of a design", bound: "2^25" },
    Bound { key: "[[tlb]] structures", bound: "16" },
    Bound { key: "TLB levels serving one kind of reference", bound: "4" },
    Bound { key: "[[cache]] levels", bound: "16" },
    Bound { key: "lines of one cache (cache[].size / line, cost.cache.size_bytes / line_bytes)", bound: "2^24" },
    Bound { key: "lines of all [[cache]] levels of a design", bound: "2^25" },
    Bound { key: "page_table.buckets (and page_table.os.buckets)", bound: "2^24" },
    Bound { key: "page_table.vhpt_entries (and 4 x the page frames when 0)", bound: "2^26" },
    Bound { key: "page_table.pwc[] (each)", bound: "2^16" },
    Bound { key: "os.memory_bytes / page_size", bound: "2^32 frames" },
    Bound { key: "os.global", bound: "64 ranges" },
    Bound { key: "os.kernel_text_bytes, os.kernel_data_bytes", bound: "2^20 bytes each" },
    Bound { key: "mach3.max_tasks", bound: "508 (the 2 MB user page tables kseg2 holds)" },
    Bound {
        key: "mach3.*_bytes, mach3.touch_stride, mach3.copy_stride, mach3.trap_words, mach3.l1u_instructions",
        bound: "2^20",
    },
    Bound { key: "memory.pa_bits", bound: "52 (a shadow range of at most 2^28 pages)" },
    Bound { key: "shadow.partition (the counts added up)", bound: "2^20 regions" },
    Bound { key: "every cycle cost and latency (*_cycles, latency, mach3 trap paths)", bound: "2^32" },
    Bound { key: "time.cpi", bound: "1000" },
    Bound { key: "time.mshrs", bound: "1024" },
    Bound { key: "time.window", bound: "2^32 instructions" },
    Bound { key: "mach3.clock_ratio", bound: "1000" },
    Bound { key: "cores.count", bound: "256" },
    Bound { key: "cores.quantum", bound: "2^40 references" },
    Bound { key: "cores.asids_per_core", bound: "4096 (0: unlimited)" },
    Bound { key: "os.shootdown.flush_ceiling", bound: "2^40 pages" },
];

/// Checks one cycle cost or latency.
pub fn cycles(key: impl Into<String>, v: u64) -> Result<(), ParamError> {
    if v > MAX_CYCLES {
        return Err(ParamError::new(key, format!("must be at most 2^32 = {MAX_CYCLES} cycles, got {v}")));
    }
    Ok(())
}

/// Checks every key of a list of cycle costs.
pub fn all_cycles<'a>(keys: impl IntoIterator<Item = (&'a str, u64)>) -> Result<(), ParamError> {
    keys.into_iter().try_for_each(|(k, v)| cycles(k, v))
}

/// `count x cost` cycles, saturating: a cycle total reads 2^64 - 1 rather than wrap.
#[inline]
pub fn times(count: u64, cost: u64) -> u64 {
    count.saturating_mul(cost)
}

/// The saturating sum of cycle totals: never less than any of its parts.
pub fn sum(parts: impl IntoIterator<Item = u64>) -> u64 {
    parts.into_iter().fold(0, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/configuration.md's table lists exactly these bounds.
    #[test]
    fn the_docs_list_every_bound() {
        let docs = include_str!("../../../docs/configuration.md");
        let start = docs.find("## Bounds").expect("docs/configuration.md has a Bounds section");
        let rows: Vec<(String, String)> = docs[start..]
            .lines()
            .skip_while(|l| !l.starts_with("| key"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
                (cells[0].trim_matches('`').to_string(), cells[1].to_string())
            })
            .collect();
        let want: Vec<(String, String)> = TABLE.iter().map(|b| (b.key.to_string(), b.bound.to_string())).collect();
        assert_eq!(rows, want);
    }

    #[test]
    fn totals_saturate() {
        assert_eq!(times(u64::MAX / 2, 3), u64::MAX);
        assert_eq!(sum([u64::MAX - 1, 5, 7]), u64::MAX);
        assert_eq!(sum([1, 2, 3]), 6);
        assert!(cycles("cost.trap_cycles", MAX_CYCLES).is_ok());
        let e = cycles("cost.trap_cycles", MAX_CYCLES + 1).unwrap_err().to_string();
        assert_eq!(e, "cost.trap_cycles: must be at most 2^32 = 4294967296 cycles, got 4294967297");
    }
}
