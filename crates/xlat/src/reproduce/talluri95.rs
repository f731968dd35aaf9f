//! `xlat reproduce talluri95`: workload traces and address-space snapshots of the suite through
//! the page tables and TLB formats the paper compares.
//!
//! talluri95 (Talluri, Hill, Khalidi, SOSP 1995) — see `docs/reproduce.md`:
//! - Figure 9: page-table size of linear (6-level and "1-level"), forward-mapped (7-level),
//!   hashed and clustered tables for single-page-size systems, normalised to hashed;
//! - Figure 10: hashed and clustered sizes with superpage and partial-subblock PTEs;
//! - Figure 11a–d: average cache lines per TLB miss for single-page-size, superpage,
//!   partial-subblock and complete-subblock (prefetching) 64-entry fully associative TLBs;
//! - the TLB miss reductions of superpage and subblock TLBs.

use super::{fmt_list, write_outputs, Claim, Options, ReproError, WorkloadInput};
use crate::config::{Config, ConfigError};
use crate::engine::{self, RunOptions, System};
use crate::plot::{BarChart, Series};
use crate::snapshot::{self, Snapshot, SnapshotError};
use crate::trace::open::open_reader_inline;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The TLB designs of Figure 11, in figure order.
pub const TLBS: [TlbKind; 4] =
    [TlbKind::Single, TlbKind::Superpage, TlbKind::PartialSubblock, TlbKind::CompleteSubblock];

/// The page tables of Figure 11, in legend order.
pub const TABLES: [TableKind; 4] =
    [TableKind::Linear, TableKind::ForwardMapped, TableKind::Hashed, TableKind::Clustered];

/// A TLB design of Figure 11 and the OS support it comes with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TlbKind {
    /// (a) single page size; base-page PTEs.
    Single,
    /// (b) 4 KB / 64 KB superpages; page reservation and promotion, superpage PTEs.
    Superpage,
    /// (c) partial subblocking, subblock factor 16; page reservation, partial-subblock PTEs.
    PartialSubblock,
    /// (d) complete subblocking, subblock factor 16, with subblock prefetch; base-page PTEs.
    CompleteSubblock,
}

impl TlbKind {
    /// Name in files and tables.
    pub fn name(self) -> &'static str {
        match self {
            TlbKind::Single => "single",
            TlbKind::Superpage => "superpage",
            TlbKind::PartialSubblock => "partial-subblock",
            TlbKind::CompleteSubblock => "complete-subblock",
        }
    }

    fn figure(self) -> &'static str {
        match self {
            TlbKind::Single => "11a",
            TlbKind::Superpage => "11b",
            TlbKind::PartialSubblock => "11c",
            TlbKind::CompleteSubblock => "11d",
        }
    }

    fn title(self) -> &'static str {
        match self {
            TlbKind::Single => "Single-page-size TLB",
            TlbKind::Superpage => "4KB/64KB superpage TLB",
            TlbKind::PartialSubblock => "Partial-subblock TLB (subblock factor 16)",
            TlbKind::CompleteSubblock => "Complete-subblock TLB (subblock factor 16, prefetch)",
        }
    }

    /// The `[[tlb]]` keys and `[os]` keys of this design.
    fn toml(self) -> (&'static str, &'static str) {
        match self {
            TlbKind::Single => ("format = \"single\"", ""),
            TlbKind::Superpage => ("format = \"superpage\"", "reservation = true\nsuperpages = \"promote\"\n"),
            TlbKind::PartialSubblock => {
                ("format = \"partial-subblock\"\nsubblock_factor = 16", "reservation = true\npartial_subblock = true\n")
            }
            TlbKind::CompleteSubblock => ("format = \"complete-subblock\"\nsubblock_factor = 16\nprefetch = true", ""),
        }
    }
}

/// A page table of Figures 9–11.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TableKind {
    /// 6-level linear table, 8 of the 64 TLB entries reserved for its upper levels.
    Linear,
    /// 7-level forward-mapped tree.
    ForwardMapped,
    /// Hashed, one table per page size, the 4 KB table searched first.
    Hashed,
    /// Clustered, subblock factor 16.
    Clustered,
}

impl TableKind {
    /// Name in files and tables.
    pub fn name(self) -> &'static str {
        match self {
            TableKind::Linear => "linear",
            TableKind::ForwardMapped => "forward-mapped",
            TableKind::Hashed => "hashed",
            TableKind::Clustered => "clustered",
        }
    }

    /// `[page_table]` keys (the common ones are added by [`design`]).
    fn toml(self) -> &'static str {
        match self {
            // §2 and Table 2 (`1 + r × m`, m the cost of a miss on the translations of the level-1
            // table): a multi-level tree of linear tables whose upper levels are mapped too and
            // live in the 8 reserved entries (§6.1), so a nested miss recurses level by level.
            TableKind::Linear => "kind = \"linear\"\nlevels = 6\nnested_fill = \"every_level\"\n",
            // 52 VPN bits in seven levels: 9-bit nodes below (pb_i = 2^9i, Table 2), the top
            // 7 bits split over two small upper levels.
            TableKind::ForwardMapped => "kind = \"radix\"\nlevels = 7\nbits_per_level = [9, 9, 9, 9, 9, 4, 3]\n",
            TableKind::Hashed => "kind = \"hashed\"\nsuperpage_store = \"multiple\"\nsearch_order = [4096, 65536]\n",
            TableKind::Clustered => "kind = \"clustered\"\nsubblock_factor = 16\n",
        }
    }
}

/// The talluri95 design for a TLB and a page table: the paper's base case (§6.1) — 64-entry
/// fully associative TLB (56 + 8 reserved with a linear table), 4 KB base pages, 64 KB blocks,
/// 4096 buckets, 256-byte lines, 64-bit virtual addresses.
pub fn design(tlb: TlbKind, table: TableKind) -> Result<Config, ConfigError> {
    let (tlb_keys, os_keys) = tlb.toml();
    let reserved = if table == TableKind::Linear { "reserved = 8\n" } else { "" };
    let text = format!(
        "name = \"{}/{}\"\npage_size = 4096\n\
         [[tlb]]\nname = \"TLB\"\nentries = 64\npolicy = \"lru\"\n{tlb_keys}\n{reserved}\
         [page_table]\n{}va_bits = 64\nbuckets = 4096\nline_bytes = 256\naccounting = \"paper\"\n\
         [os]\nframe_allocator = \"buddy\"\nmemory_bytes = 17179869184\nblock_pages = 16\n{os_keys}",
        tlb.name(),
        table.name(),
        table.toml()
    );
    Config::from_toml(&text, &format!("talluri95 design {}/{}", tlb.name(), table.name()))
}

/// Page-table sizes of one address space (Figures 9 and 10), in bytes of PTEs and nodes (bucket
/// arrays excluded, as in Table 2).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Sizes {
    /// Resident base pages in the snapshot.
    pub pages: u64,
    /// Where the pages come from: `snapshot` (the workload's, at peak resident size) or `trace`
    /// (pages resident at the end of the simulated trace, for a program too short to snapshot or
    /// whose snapshot holds fewer bytes than the trace touched).
    pub source: String,
    /// Processes in the snapshot.
    pub processes: u64,
    /// The snapshot's base page size in bytes.
    pub page_size: u64,
    /// Bytes by design name: `linear-6`, `linear-1`, `forward-mapped`, `hashed`, `clustered`,
    /// `hashed-superpage`, `clustered-superpage`, `clustered-partial-subblock`.
    pub bytes: BTreeMap<String, u64>,
}

impl Sizes {
    /// Size of `name` relative to the hashed table.
    pub fn normalised(&self, name: &str) -> Option<f64> {
        let h = *self.bytes.get("hashed")?;
        let b = *self.bytes.get(name)?;
        (h > 0).then(|| b as f64 / h as f64)
    }
}

/// One TLB design × page table cell of Figure 11.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Cell {
    /// TLB misses of this system (56 entries for the linear table).
    pub misses: u64,
    /// Block misses (misses that allocated an entry).
    pub block_misses: u64,
    /// Walks and the cache lines and references they touched.
    pub walks: u64,
    /// Cache lines touched by walks, in the paper's accounting.
    pub cache_lines: u64,
    /// Memory references of walks.
    pub memory_refs: u64,
    /// Nested TLB misses (linear).
    pub nested_misses: u64,
    /// Page faults (first touches: walks that found no mapping).
    pub page_faults: u64,
    /// Cache lines of the walks that found no mapping.
    pub fault_lines: u64,
    /// Walks that found a superpage or partial-subblock PTE, and their cache lines.
    pub superpage_walks: u64,
    /// Cache lines of those walks.
    pub superpage_lines: u64,
    /// Cache lines per miss to a mapped page, normalised by the misses of the 64-entry TLB of
    /// the same design (the paper's normalisation): `(cache_lines - fault_lines) / (misses_64 -
    /// page_faults)`. Page faults are left out: in the paper's trap-driven measurements the miss
    /// handler found every page it walked for, the OS having faulted it in first.
    pub lines_per_miss: f64,
}

/// Everything measured on one workload.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadResult {
    /// Workload name.
    pub name: String,
    /// References simulated.
    pub references: u64,
    /// Lookups (pages touched).
    pub lookups: u64,
    /// Processes (ASIDs) seen in the trace.
    pub processes: u64,
    /// True if the trace was cut at `max_refs`.
    pub truncated: bool,
    /// Sizes from the snapshot (None: no snapshot).
    pub sizes: Option<Sizes>,
    /// Figure 11 cells: `cells[tlb][table]` in [`TLBS`] × [`TABLES`] order.
    pub cells: Vec<Vec<Cell>>,
    /// Misses of a complete-subblock TLB without prefetch (block and subblock misses).
    pub complete_subblock_no_prefetch: Cell,
    /// OS counters of the superpage and partial-subblock runs: (promotions, demotions,
    /// reservation failures).
    pub os: BTreeMap<String, crate::os::OsStats>,
}

impl WorkloadResult {
    /// TLB misses of the 64-entry TLB of `tlb` (the same for every non-linear table).
    pub fn misses(&self, tlb: usize) -> u64 {
        self.cells[tlb][TableKind::Clustered as usize].misses
    }
}

/// A whole reproduction.
#[derive(Clone, Debug, Serialize)]
pub struct Talluri95 {
    /// Per workload.
    pub workloads: Vec<WorkloadResult>,
    /// `max_refs` in effect.
    pub max_refs: Option<u64>,
    /// `os.reservation_failure` of every design.
    pub reservation_failure: f64,
}

/// Runs the talluri95 reproduction over `inputs`. `progress` hears one line per step.
pub fn talluri95(
    inputs: &[WorkloadInput],
    opts: &Options,
    progress: &mut dyn FnMut(&str),
) -> Result<Talluri95, ReproError> {
    if inputs.is_empty() {
        return Err(ReproError::Input("no workloads to run".into()));
    }
    let mut designs = Vec::new();
    for tlb in TLBS {
        for table in TABLES {
            designs.push(design(tlb, table)?);
        }
    }
    let mut no_prefetch = design(TlbKind::CompleteSubblock, TableKind::Clustered)?;
    no_prefetch.tlb[0].prefetch = false;
    no_prefetch.name = "complete-subblock-no-prefetch/clustered".into();
    designs.push(no_prefetch);
    if !(0.0..=1.0).contains(&opts.reservation_failure) {
        return Err(ReproError::Input(format!(
            "--reservation-failure must be in [0, 1], got {}",
            opts.reservation_failure
        )));
    }
    for d in &mut designs {
        d.os.reservation_failure = opts.reservation_failure;
    }
    let mut out = Vec::new();
    for w in inputs {
        let snap_err = |error| ReproError::Snapshot { workload: w.name.clone(), error };
        let mut sizes_of = match &w.snapshot {
            Some(p) => {
                progress(&format!("{}: sizes from the snapshot", w.name));
                let snap = snapshot::read(p).map_err(snap_err)?;
                Some(sizes(&snap, "snapshot", opts.reservation_failure).map_err(snap_err)?)
            }
            None => None,
        };
        progress(&format!("{}: {} designs over the trace", w.name, designs.len()));
        let mut systems: Vec<System> = designs
            .iter()
            .map(System::new)
            .collect::<Result<_, _>>()
            .map_err(|e| ReproError::Input(format!("design: {e}")))?;
        let mut reader = open_reader_inline(&w.trace.to_string_lossy(), None)
            .map_err(|error| ReproError::Trace { workload: w.name.clone(), error })?
            .0;
        let summary = engine::run(&mut *reader, &mut systems, RunOptions { max_refs: opts.max_refs }, |_| {})
            .map_err(|error| ReproError::Sim { workload: w.name.clone(), error })?;
        if let Some(f) = systems.iter_mut().find_map(|s| s.take_failure()) {
            return Err(ReproError::Sim { workload: w.name.clone(), error: f.error.into() });
        }
        let stats: Vec<_> = systems.iter().map(System::stats).collect();
        let cell = |i: usize| {
            let s = &stats[i];
            let t = s.tlb[0];
            Cell {
                misses: t.misses,
                block_misses: t.misses - t.subblock_misses,
                walks: s.walks.count,
                cache_lines: s.walks.cache_lines,
                memory_refs: s.walks.memory_refs,
                nested_misses: s.walks.nested_misses,
                page_faults: s.page_faults,
                fault_lines: s.walks.fault_lines,
                superpage_walks: s.walks.superpage_walks,
                superpage_lines: s.walks.superpage_lines,
                lines_per_miss: 0.0,
            }
        };
        let mut cells = Vec::new();
        for t in 0..TLBS.len() {
            let row: Vec<Cell> = (0..TABLES.len()).map(|p| cell(t * TABLES.len() + p)).collect();
            let base = row[TableKind::Clustered as usize];
            let mapped = base.misses - base.page_faults;
            cells.push(
                row.into_iter()
                    .map(|mut c| {
                        let lines = c.cache_lines - c.fault_lines;
                        c.lines_per_miss = if mapped == 0 { 0.0 } else { lines as f64 / mapped as f64 };
                        c
                    })
                    .collect(),
            );
        }
        let mut os = BTreeMap::new();
        for (t, tlb) in TLBS.iter().enumerate() {
            os.insert(tlb.name().to_string(), stats[t * TABLES.len() + TableKind::Clustered as usize].os);
        }
        let processes = w.processes;
        // The snapshot stands for the address space at its peak. Every page the trace touched is
        // resident at its end, so a snapshot holding fewer bytes than that was sampled before the
        // peak (a short program sampled early, a few pages into its run); the pages resident at
        // the end of the simulated trace then stand in for it, as they do when there is no
        // snapshot (the program ended between two samples).
        let at_end = trace_snapshot(&systems[0]);
        if let Some(why) = missed_peak(sizes_of.as_ref(), &at_end) {
            progress(&format!("{}: {why}; sizes from the pages resident at the end of the trace", w.name));
            sizes_of = Some(sizes(&at_end, "trace", opts.reservation_failure).map_err(snap_err)?);
        }
        out.push(WorkloadResult {
            name: w.name.clone(),
            references: summary.trace.references,
            lookups: summary.trace.lookups,
            processes,
            truncated: summary.truncated_by_limit,
            sizes: sizes_of,
            cells,
            complete_subblock_no_prefetch: cell(designs.len() - 1),
            os,
        });
    }
    Ok(Talluri95 { workloads: out, max_refs: opts.max_refs, reservation_failure: opts.reservation_failure })
}

/// The address spaces a system holds at the end of its run, as a snapshot (one process per ASID,
/// in ASID order).
fn trace_snapshot(sys: &System) -> Snapshot {
    let mut processes: Vec<snapshot::ProcessSnapshot> = Vec::new();
    let mut last = None;
    for (asid, vpn) in sys.os().resident_list() {
        if last != Some(asid) {
            processes.push(snapshot::ProcessSnapshot {
                pid: asid,
                ppid: 0,
                command: format!("asid {asid}"),
                regions: Vec::new(),
                resident: Vec::new(),
                rss_pages: 0,
            });
            last = Some(asid);
        }
        processes.last_mut().expect("pushed").resident.push(vpn);
    }
    Snapshot { processes, taken_at: "exit".into(), page_size: sys.page_size().bytes() }
}

/// Why the workload's snapshot cannot stand for its address space at peak, given the pages
/// resident at the end of its trace: there is none, or it holds fewer bytes than the trace touched
/// (`None`: the snapshot stands).
fn missed_peak(snapshot: Option<&Sizes>, at_end: &Snapshot) -> Option<String> {
    let end_bytes = at_end.resident_pages() * at_end.page_size;
    match snapshot {
        None => Some("no snapshot".to_string()),
        Some(s) if s.pages * s.page_size < end_bytes => Some(format!(
            "the snapshot ({} pages) holds less than the trace touched ({} pages)",
            s.pages,
            at_end.resident_pages()
        )),
        Some(_) => None,
    }
}

/// Figure 9 and 10 sizes of a snapshot: each table built through its design's OS model.
fn sizes(snap: &Snapshot, source: &str, reservation_failure: f64) -> Result<Sizes, SnapshotError> {
    let cfg = |tlb, table| {
        design(tlb, table).map_err(|e| SnapshotError::Param {
            config: format!("{}/{}", tlb.name(), table.name()),
            error: crate::pt::ParamError::new("design", e.to_string()),
        })
    };
    let mut configs = vec![
        ("linear-6", cfg(TlbKind::Single, TableKind::Linear)?),
        ("forward-mapped", cfg(TlbKind::Single, TableKind::ForwardMapped)?),
        ("hashed", cfg(TlbKind::Single, TableKind::Hashed)?),
        ("clustered", cfg(TlbKind::Single, TableKind::Clustered)?),
        ("hashed-superpage", cfg(TlbKind::Superpage, TableKind::Hashed)?),
        ("clustered-superpage", cfg(TlbKind::Superpage, TableKind::Clustered)?),
        ("clustered-partial-subblock", cfg(TlbKind::PartialSubblock, TableKind::Clustered)?),
    ];
    for (_, c) in &mut configs {
        c.tlb[0].reserved = 0;
        c.os.reservation_failure = reservation_failure;
    }
    let only: Vec<Config> = configs.iter().map(|(_, c)| c.clone()).collect();
    let reports = snapshot::evaluate(snap, &only)?;
    let mut bytes = BTreeMap::new();
    for ((name, _), r) in configs.iter().zip(&reports) {
        bytes.insert(name.to_string(), r.size.table_bytes);
    }
    // "1-level" linear: intermediate nodes take no space, so one page per 512-page region in use.
    let shift = 12u32.saturating_sub(snap.page_size.trailing_zeros());
    let mut leaf_pages = 0u64;
    for p in &snap.processes {
        let mut last = u64::MAX;
        for &v in &p.resident {
            let region = (v >> shift.min(63)) >> 9;
            if region != last {
                leaf_pages += 1;
                last = region;
            }
        }
    }
    bytes.insert("linear-1".to_string(), leaf_pages * 4096);
    Ok(Sizes {
        pages: snap.resident_pages(),
        source: source.into(),
        processes: snap.processes.len() as u64,
        page_size: snap.page_size,
        bytes,
    })
}

/// Fewest misses to mapped pages for a workload's cache-lines-per-miss to enter a claim.
pub const MIN_MISSES: u64 = 100;

impl Talluri95 {
    fn with_sizes(&self) -> impl Iterator<Item = (&WorkloadResult, &Sizes)> {
        self.workloads.iter().filter_map(|w| w.sizes.as_ref().map(|s| (w, s)))
    }

    /// Lines per miss of `table` under `tlb`, per workload, for the workloads where that TLB takes
    /// at least [`MIN_MISSES`] misses to mapped pages (fewer make the average noise).
    pub fn lines(&self, tlb: TlbKind, table: TableKind) -> Vec<(String, f64)> {
        self.workloads
            .iter()
            .filter(|w| {
                let c = &w.cells[tlb as usize][TableKind::Clustered as usize];
                c.misses - c.page_faults >= MIN_MISSES
            })
            .map(|w| (w.name.clone(), w.cells[tlb as usize][table as usize].lines_per_miss))
            .collect()
    }

    /// The workloads [`Talluri95::lines`] leaves out under each of `tlbs`, said for a claim's
    /// note: "" if none.
    pub fn left_out(&self, tlbs: &[TlbKind]) -> String {
        let mut out = Vec::new();
        for &tlb in tlbs {
            for w in &self.workloads {
                let c = &w.cells[tlb as usize][TableKind::Clustered as usize];
                let mapped = c.misses - c.page_faults;
                if mapped < MIN_MISSES {
                    out.push(format!("{} ({} TLB: {mapped})", w.name, tlb.name()));
                }
            }
        }
        if out.is_empty() {
            return String::new();
        }
        format!("left out, fewer than {MIN_MISSES} misses to mapped pages: {}", out.join(", "))
    }

    /// Each claim of the paper, evaluated on the measurements.
    pub fn claims(&self) -> Vec<Claim> {
        let with = |note: &str, left: String| match (note.is_empty(), left.is_empty()) {
            (_, true) => note.to_string(),
            (true, false) => left,
            (false, false) => format!("{note}; {left}"),
        };
        let mut claims = Vec::new();
        // Figure 9: clustered smaller than hashed, and than the best conventional table.
        let sized: Vec<_> = self.with_sizes().collect();
        if !sized.is_empty() {
            let rel: Vec<(String, f64)> =
                sized.iter().map(|(w, s)| (w.name.clone(), s.normalised("clustered").unwrap_or(f64::NAN))).collect();
            claims.push(Claim {
                source: "§6.3, Figure 9",
                paper: "clustered page tables use less memory than hashed page tables for every workload",
                measured: format!("clustered / hashed: {}", fmt_list(&rel, 2)),
                holds: rel.iter().all(|(_, v)| *v < 1.0),
                note: String::new(),
            });
            let mut worst = Vec::new();
            let mut holds = true;
            for (w, s) in &sized {
                let c = s.bytes["clustered"];
                let best = ["linear-6", "forward-mapped", "hashed"]
                    .iter()
                    .map(|n| (*n, s.bytes[*n]))
                    .min_by_key(|(_, b)| *b)
                    .expect("three tables");
                holds &= c < best.1;
                worst.push((format!("{} (best conventional: {})", w.name, best.0), c as f64 / best.1 as f64));
            }
            claims.push(Claim {
                source: "§1, §6.3, Figure 9",
                paper: "clustered page tables use less memory than the best conventional page table \
                        (linear for dense, hashed for sparse address spaces)",
                measured: format!("clustered / best conventional: {}", fmt_list(&worst, 2)),
                holds,
                note: String::new(),
            });
            // Figure 10: superpage and partial-subblock PTEs shrink clustered tables.
            let red = |name: &str| -> Vec<(String, f64)> {
                sized
                    .iter()
                    .map(|(w, s)| (w.name.clone(), 100.0 * (1.0 - s.bytes[name] as f64 / s.bytes["clustered"] as f64)))
                    .collect()
            };
            let sp = red("clustered-superpage");
            let psb = red("clustered-partial-subblock");
            let max = |v: &[(String, f64)]| v.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
            claims.push(Claim {
                source: "§6.3, Figure 10",
                paper: "superpage PTEs reduce clustered page table size by up to 75%",
                measured: format!("reduction (%): {}; largest {:.0}%", fmt_list(&sp, 0), max(&sp)),
                holds: max(&sp) > 0.0 && sp.iter().all(|x| x.1 >= 0.0),
                note: "holds if every workload shrinks and some shrink; the size of the largest reduction depends on \
                       how many page blocks are fully resident"
                    .into(),
            });
            claims.push(Claim {
                source: "§6.3, Figure 10",
                paper: "partial-subblock PTEs reduce clustered page table size by up to 80%, more than superpages",
                measured: format!("reduction (%): {}; largest {:.0}%", fmt_list(&psb, 0), max(&psb)),
                holds: psb.iter().zip(&sp).all(|(p, s)| p.1 >= s.1) && max(&psb) > 0.0,
                note: String::new(),
            });
        }
        // Figure 11a: forward-mapped about one line per level.
        let fm = self.lines(TlbKind::Single, TableKind::ForwardMapped);
        if !fm.is_empty() {
            claims.push(Claim {
                source: "§6.1, Figure 11a",
                paper: "forward-mapped page tables access one cache line per tree level (7 for 64-bit)",
                measured: format!("lines per miss: {}", fmt_list(&fm, 2)),
                holds: fm.iter().all(|(_, v)| (*v - 7.0).abs() < 0.05),
                note: self.left_out(&[TlbKind::Single]),
            });
        }
        // Figure 11b: hashed worse with superpages, clustered stays near one line.
        let h_a = self.lines(TlbKind::Single, TableKind::Hashed);
        let h_b = self.lines(TlbKind::Superpage, TableKind::Hashed);
        let c_b = self.lines(TlbKind::Superpage, TableKind::Clustered);
        if !h_b.is_empty() {
            // Workloads in both lists, by name (each list leaves out its own).
            let pairs: Vec<(String, f64)> =
                h_a.iter().filter_map(|a| h_b.iter().find(|b| b.0 == a.0).map(|b| (a.0.clone(), b.1 - a.1))).collect();
            let mut few = Vec::new();
            // The mechanism, per miss: misses served by a superpage PTE against those served by
            // a base page, in the superpage-TLB run (workloads with at least 100 of the former).
            let mut split = Vec::new();
            for w in &self.workloads {
                let h = &w.cells[TlbKind::Superpage as usize][TableKind::Hashed as usize];
                let c = &w.cells[TlbKind::Superpage as usize][TableKind::Clustered as usize];
                if h.superpage_walks < 100 {
                    few.push(format!("{} ({})", w.name, h.superpage_walks));
                    continue;
                }
                let base_walks = h.walks - h.page_faults - h.superpage_walks;
                let base_lines = h.cache_lines - h.fault_lines - h.superpage_lines;
                let per = |l: u64, n: u64| if n == 0 { 0.0 } else { l as f64 / n as f64 };
                split.push((
                    w.name.clone(),
                    per(h.superpage_lines, h.superpage_walks),
                    per(base_lines, base_walks),
                    per(c.superpage_lines, c.superpage_walks),
                ));
            }
            claims.push(Claim {
                source: "§6.3, Figure 11b",
                paper: "hashed page tables take longer with superpage PTEs (the 4 KB table is searched first)",
                measured: format!(
                    "hashed lines per miss to a superpage PTE vs to a base page: {}; clustered per superpage miss: {}; \
                     overall hashed lines per miss, superpage TLB minus single: {}",
                    split
                        .iter()
                        .map(|(n, s, b, _)| format!("{n} {s:.2} vs {b:.2}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    split.iter().map(|(n, _, _, c)| format!("{n} {c:.2}")).collect::<Vec<_>>().join(", "),
                    fmt_list(&pairs, 2)
                ),
                holds: !split.is_empty() && split.iter().all(|(_, s, b, c)| *s > *b && *s > *c),
                note: with(
                    &with(
                        "how much the average grows depends on the share of misses that go to superpages",
                        if few.is_empty() {
                            String::new()
                        } else {
                            format!("left out of the split, fewer than 100 superpage walks: {}", few.join(", "))
                        },
                    ),
                    self.left_out(&[TlbKind::Single, TlbKind::Superpage]),
                ),
            });
            claims.push(Claim {
                source: "§6.3, Figure 11b",
                paper: "clustered page tables stay close to 1.0 cache line per TLB miss with superpage PTEs",
                measured: format!("clustered lines per miss: {}", fmt_list(&c_b, 2)),
                holds: c_b.iter().all(|(_, v)| *v <= 1.5),
                note: with("close taken as at most 1.5", self.left_out(&[TlbKind::Superpage])),
            });
        }
        // Figure 11d: hashed prefetch needs about s probes; clustered and linear stay near 1.
        let h_d = self.lines(TlbKind::CompleteSubblock, TableKind::Hashed);
        let c_d = self.lines(TlbKind::CompleteSubblock, TableKind::Clustered);
        if !h_d.is_empty() {
            claims.push(Claim {
                source: "§4.4, §6.3, Figure 11d",
                paper: "subblock prefetch costs hashed page tables multiple probes (sixteen), clustered about one line",
                measured: format!("hashed lines per miss: {}; clustered: {}", fmt_list(&h_d, 1), fmt_list(&c_d, 2)),
                holds: h_d.iter().zip(&c_d).all(|(h, c)| h.1 > 4.0 * c.1) && c_d.iter().all(|(_, v)| *v <= 1.5),
                note: with(
                    "each base page of the block is a separate search of every table, mapped or not; \
                     an empty bucket still costs the line of its hash node",
                    self.left_out(&[TlbKind::CompleteSubblock]),
                ),
            });
        }
        // Figure 11d and §6.1: linear tables near one line too (the paper's 8 reserved entries held
        // every upper-level translation: "we never take a nested trap").
        let l_d = self.lines(TlbKind::CompleteSubblock, TableKind::Linear);
        if !l_d.is_empty() {
            let linear_cells: Vec<(&WorkloadResult, &Cell)> = self
                .workloads
                .iter()
                .filter(|w| l_d.iter().any(|(n, _)| *n == w.name))
                .map(|w| (w, &w.cells[TlbKind::CompleteSubblock as usize][TableKind::Linear as usize]))
                .collect();
            let nested: Vec<(String, f64)> = linear_cells
                .iter()
                .map(|(w, c)| (w.name.clone(), c.nested_misses as f64 / c.walks.max(1) as f64))
                .collect();
            let more: Vec<(String, f64)> = linear_cells
                .iter()
                .map(|(w, c)| (w.name.clone(), c.misses as f64 / w.misses(TlbKind::CompleteSubblock as usize) as f64))
                .collect();
            claims.push(Claim {
                source: "§6.1, §6.3, Figure 11d",
                paper: "linear page tables stay close to 1.0 cache line per miss (the reserved entries hold the upper levels)",
                measured: format!(
                    "linear lines per miss: {}; misses with 56 entries / with 64: {}; nested misses per walk: {}",
                    fmt_list(&l_d, 2),
                    fmt_list(&more, 2),
                    fmt_list(&nested, 2)
                ),
                holds: l_d.iter().all(|(_, v)| *v <= 1.5),
                note: with("close taken as at most 1.5", self.left_out(&[TlbKind::CompleteSubblock])),
            });
        }
        // TLB miss reductions, of all misses and of misses to pages already mapped (the first
        // touch of a page misses in every TLB: short traces are dominated by such misses).
        let reduction = |t: TlbKind, warm: bool| -> Vec<(String, f64)> {
            self.workloads
                .iter()
                .filter(|w| w.misses(0) > 0)
                .map(|w| {
                    let m = |k: usize| {
                        let c = &w.cells[k][TableKind::Clustered as usize];
                        if warm {
                            c.misses - c.page_faults
                        } else {
                            c.misses
                        }
                    };
                    let base = m(0).max(1) as f64;
                    (w.name.clone(), 100.0 * (1.0 - m(t as usize) as f64 / base))
                })
                .collect()
        };
        for t in [TlbKind::Superpage, TlbKind::PartialSubblock, TlbKind::CompleteSubblock] {
            let warm = reduction(t, true);
            if warm.is_empty() {
                continue;
            }
            let all = reduction(t, false);
            let range = |v: &[(String, f64)]| {
                v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), (_, x)| (lo.min(*x), hi.max(*x)))
            };
            let (lo, hi) = range(&warm);
            let (alo, ahi) = range(&all);
            claims.push(Claim {
                source: "§1, §4, [Tall95]",
                paper: "superpage and subblock TLBs reduce TLB misses by 50% to 99%",
                measured: format!(
                    "{} TLB, misses to mapped pages: {} (range {lo:.0}%..{hi:.0}%); all misses incl. first touches: \
                     {alo:.0}%..{ahi:.0}%",
                    t.name(),
                    fmt_list(&warm, 0)
                ),
                holds: lo >= 50.0 - 1e-9,
                note: "first touches miss in every TLB and are left out of the claim's numbers".into(),
            });
        }
        claims
    }

    fn chart_sizes(&self, fig10: bool) -> BarChart {
        let sized: Vec<_> = self.with_sizes().collect();
        let names: &[(&str, &str)] = if fig10 {
            &[
                ("hashed-superpage", "hashed, superpage PTEs"),
                ("clustered", "clustered"),
                ("clustered-superpage", "clustered, superpage PTEs"),
                ("clustered-partial-subblock", "clustered, partial-subblock PTEs"),
            ]
        } else {
            &[
                ("linear-6", "linear 6-level"),
                ("linear-1", "linear 1-level"),
                ("forward-mapped", "forward-mapped 7-level"),
                ("clustered", "clustered"),
            ]
        };
        BarChart {
            title: if fig10 {
                "Figure 10: hashed and clustered sizes with superpage / partial-subblock PTEs (4 KB pages, 64 KB blocks)"
                    .into()
            } else {
                "Figure 9: page-table size, single page size (4 KB)".into()
            },
            x_label: "workload".into(),
            y_label: "size / hashed page table size".into(),
            categories: sized.iter().map(|(w, _)| w.name.clone()).collect(),
            series: names
                .iter()
                .map(|(key, label)| Series {
                    name: label.to_string(),
                    values: sized.iter().map(|(_, s)| s.normalised(key)).collect(),
                })
                .collect(),
            y_max: if fig10 { None } else { Some(5.0) },
            reference: Some((1.0, "hashed".into())),
        }
    }

    fn chart_lines(&self, tlb: TlbKind) -> BarChart {
        let ws: Vec<_> = self.workloads.iter().filter(|w| w.misses(tlb as usize) > 0).collect();
        BarChart {
            title: format!("Figure {}: average cache lines per TLB miss, {}", tlb.figure(), tlb.title()),
            x_label: "workload".into(),
            y_label: "cache lines per TLB miss".into(),
            categories: ws.iter().map(|w| w.name.clone()).collect(),
            series: TABLES
                .iter()
                .map(|t| Series {
                    name: t.name().into(),
                    values: ws.iter().map(|w| Some(w.cells[tlb as usize][*t as usize].lines_per_miss)).collect(),
                })
                .collect(),
            y_max: None,
            reference: None,
        }
    }

    fn chart_misses(&self) -> BarChart {
        let ws: Vec<_> = self.workloads.iter().filter(|w| w.misses(0) > 0).collect();
        let mut series: Vec<Series> = [TlbKind::Superpage, TlbKind::PartialSubblock, TlbKind::CompleteSubblock]
            .iter()
            .map(|t| Series {
                name: format!("{} TLB", t.name()),
                values: ws
                    .iter()
                    .map(|w| Some(100.0 * (1.0 - w.misses(*t as usize) as f64 / w.misses(0) as f64)))
                    .collect(),
            })
            .collect();
        series.push(Series {
            name: "complete-subblock TLB, no prefetch".into(),
            values: ws
                .iter()
                .map(|w| Some(100.0 * (1.0 - w.complete_subblock_no_prefetch.misses as f64 / w.misses(0) as f64)))
                .collect(),
        });
        BarChart {
            title: "TLB misses removed relative to a single-page-size 64-entry TLB".into(),
            x_label: "workload".into(),
            y_label: "% of misses removed".into(),
            categories: ws.iter().map(|w| w.name.clone()).collect(),
            series,
            y_max: None,
            reference: None,
        }
    }

    /// Every figure: (file stem, chart).
    pub fn figures(&self) -> Vec<(String, BarChart)> {
        let mut v = vec![("figure9".to_string(), self.chart_sizes(false)), ("figure10".into(), self.chart_sizes(true))];
        for t in TLBS {
            v.push((format!("figure{}", t.figure()), self.chart_lines(t)));
        }
        v.push(("tlb-misses".into(), self.chart_misses()));
        v
    }

    /// The Markdown report.
    pub fn markdown(&self) -> String {
        let mut md = String::new();
        let _ = writeln!(md, "# talluri95 reproduced: clustered page tables, superpages and subblocking\n");
        let _ = writeln!(
            md,
            "Designs (§6.1): 64-entry fully associative LRU TLB (56 entries + 8 reserved for a linear table's upper \
             levels), 4 KB base pages, 64 KB superpages / page blocks (subblock factor 16), 4096 hash buckets, \
             256-byte cache lines with every PTE probed starting a line, 64-bit virtual addresses (6-level linear, \
             7-level forward-mapped tree), hashed tables with one table per page size (4 KB searched first), page \
             reservation with promotion (superpage TLB) or partial-subblock PTEs (partial-subblock TLB), subblock \
             prefetch for the complete-subblock TLB. Sizes come from each workload's address-space snapshot at peak \
             resident size; cache lines per miss from simulating its trace{}.\n",
            match self.max_refs {
                Some(n) => format!(" (first {n} references of each)"),
                None => String::new(),
            }
        );
        if self.reservation_failure > 0.0 {
            let _ = writeln!(
                md,
                "Fragmented memory: {:.0}% of page reservations fail (`os.reservation_failure`); those blocks get \
                 frames one by one and can be neither superpages nor partial-subblock PTEs.\n",
                100.0 * self.reservation_failure
            );
        }
        let _ = writeln!(md, "| workload | references | processes | pages sized (source) | misses (single) |");
        let _ = writeln!(md, "|---|---:|---:|---:|---:|");
        for w in &self.workloads {
            let _ = writeln!(
                md,
                "| {} | {}{} | {} | {} | {} |",
                w.name,
                w.references,
                if w.truncated { " (cut)" } else { "" },
                w.processes,
                w.sizes.as_ref().map(|s| format!("{} ({})", s.pages, s.source)).unwrap_or_else(|| "-".into()),
                w.misses(0)
            );
        }
        let _ = writeln!(md, "\n## Claims\n");
        let _ = writeln!(md, "| where | the paper says | xlat measured | agrees |");
        let _ = writeln!(md, "|---|---|---|---|");
        let claims = self.claims();
        for c in &claims {
            let _ = writeln!(
                md,
                "| {} | {} | {}{} | {} |",
                c.source,
                c.paper,
                c.measured,
                if c.note.is_empty() { String::new() } else { format!(" ({})", c.note) },
                if c.holds { "yes" } else { "**no**" }
            );
        }
        let disagree: Vec<_> = claims.iter().filter(|c| !c.holds).collect();
        if !disagree.is_empty() {
            let _ = writeln!(md, "\n## Where xlat disagrees, and why\n");
            for c in disagree {
                let _ = writeln!(md, "- **{}** ({}): {}", c.paper, c.source, explain(c));
            }
        }
        for (stem, chart) in self.figures() {
            let _ = writeln!(md, "\n## {}\n\n![{}]({stem}.svg)\n", chart.title, chart.title);
            md.push_str(&chart.markdown(2));
        }
        md
    }

    /// Writes `figureN.csv/.svg/.png`, `tlb-misses.*`, `results.json` and `report.md` into
    /// `dir`; returns the files written. A PNG that cannot be drawn (no font) is reported in the
    /// returned warnings, not as an error: the SVG and CSV carry the same data.
    pub fn write(&self, dir: &Path) -> Result<(Vec<PathBuf>, Vec<String>), ReproError> {
        let value = serde_json::json!({ "paper": "talluri95", "results": self, "claims": self.claims() });
        write_outputs(dir, self.figures(), &value, &self.markdown())
    }
}

/// Why a claim does not hold on these workloads (the known reasons).
fn explain(c: &Claim) -> &'static str {
    let p = c.paper;
    if p.contains("best conventional") {
        "where resident pages are spread thinly but evenly over a large region (sparse-heap writes one page in \
         eight of a large array), a 64 KB block holds about two pages, so a 144-byte clustered PTE costs about \
         72 bytes per page while a forward-mapped leaf node (4 KB for 512 pages, 64 of them resident) costs 64: \
         the tree is smaller. Clustered tables win where blocks are well filled or regions are few, which is \
         what the paper's workloads were"
    } else if p.contains("less memory than hashed") {
        "a clustered PTE costs 8s + 16 = 144 bytes and breaks even with six 24-byte hashed PTEs: an address space \
         whose 64 KB blocks hold fewer than six resident pages on average is smaller under a hashed table"
    } else if p.contains("50% to 99%") && c.measured.starts_with("superpage") {
        "promotion needs all 16 base pages of a 64 KB block resident and properly placed; many blocks of \
         these programs (stack, library data, partly used heap) never fill, so most misses stay on base \
         pages, while the partial- and complete-subblock TLBs, which need no full block, do remove most \
         misses here; the paper's workloads were large-array programs whose blocks fill"
    } else if p.contains("50% to 99%") {
        "short traces are dominated by first touches, which no TLB format removes; see the measured values"
    } else if p.contains("superpage PTEs reduce") || p.contains("partial-subblock PTEs reduce") {
        "few page blocks are fully resident (superpages) or properly placed at snapshot time in these workloads"
    } else if p.contains("take longer with superpage") {
        "a miss to a superpage PTE costs the hashed table more than a miss to a base page (see the measured \
         values); where it does not, or where the average barely moves, few misses go to superpages, and \
         promotion moved many PTEs out of the 4 KB table searched first, shortening its chains for the rest"
    } else if p.contains("linear page tables stay close") {
        "the metric charges the linear table for the 8 entries it reserves: where a program's hot pages \
         just exceed 56 TLB entries, the 56-entry TLB misses several times as often as the 64-entry one \
         (see the ratio), and each of those misses costs a line; the x86-64 programs also spread over \
         more 2 MB regions than 8 reserved entries map, so some walks take nested misses up the 6-level \
         tree, which the paper's 32-bit workloads never did"
    } else if p.contains("one cache line per tree level") {
        "the walk is cut short by superpages at intermediate nodes or runs through page-walk caches"
    } else {
        "see the measured values; the paper's workloads were 32-bit SPARC programs of 1995"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Kind, Record};

    #[test]
    fn a_trace_stands_in_for_a_missing_snapshot() {
        let mut sys = System::new(&design(TlbKind::Single, TableKind::Clustered).unwrap()).unwrap();
        let access = |addr| Record::Access { kind: Kind::Load, size: 8, addr };
        let recs = [
            access(0x1000),
            access(0x5000),
            Record::Fork { child: 3 },
            Record::ContextSwitch { asid: 3 },
            access(0x9000),
            Record::Unmap { start: 0x5000, len: 4096 },
        ];
        sys.process(&recs).unwrap();
        let snap = trace_snapshot(&sys);
        let pages: Vec<(u32, Vec<u64>)> = snap.processes.iter().map(|p| (p.pid, p.resident.clone())).collect();
        // The child got the parent's two pages, touched a third and unmapped one.
        assert_eq!(pages, vec![(0, vec![1, 5]), (3, vec![1, 9])]);
        let s = sizes(&snap, "trace", 0.0).unwrap();
        assert_eq!((s.pages, s.processes, s.source.as_str()), (4, 2, "trace"));
        // One 64 KB block in use per process: two clustered PTEs of 144 bytes; four hashed PTEs.
        assert_eq!(s.bytes["clustered"], 2 * 144);
        assert_eq!(s.bytes["hashed"], 4 * 24);
    }

    #[test]
    fn a_snapshot_smaller_than_the_trace_gives_way_to_it() {
        let snap = |pages: &[u64], page_size| Snapshot {
            processes: vec![snapshot::ProcessSnapshot {
                pid: 1,
                ppid: 0,
                command: "p".into(),
                regions: Vec::new(),
                resident: pages.to_vec(),
                rss_pages: pages.len() as u64,
            }],
            taken_at: "peak".into(),
            page_size,
        };
        let at_end = snap(&[1, 2, 3, 4], 4096);
        let sized = |pages: &[u64], page_size| sizes(&snap(pages, page_size), "snapshot", 0.0).unwrap();
        assert_eq!(missed_peak(None, &at_end).as_deref(), Some("no snapshot"));
        let early = missed_peak(Some(&sized(&[1, 2, 3], 4096)), &at_end).expect("3 pages < 4");
        assert!(early.contains("(3 pages)") && early.contains("(4 pages)"), "{early}");
        assert_eq!(missed_peak(Some(&sized(&[1, 2, 3, 4], 4096)), &at_end), None, "as many bytes stand");
        assert_eq!(missed_peak(Some(&sized(&[7, 8, 9, 10, 11], 4096)), &at_end), None);
        // Bytes, not pages, are compared: two 8 KB pages hold as much as four of 4 KB.
        assert_eq!(missed_peak(Some(&sized(&[1, 2], 8192)), &at_end), None);
    }

    #[test]
    fn a_claim_says_which_workloads_it_left_out_and_why() {
        let workload = |name: &str, misses: u64| {
            let cell = Cell { misses, lines_per_miss: 7.0, ..Cell::default() };
            WorkloadResult {
                name: name.into(),
                references: 0,
                lookups: 0,
                processes: 1,
                truncated: false,
                sizes: None,
                cells: vec![vec![cell; TABLES.len()]; TLBS.len()],
                complete_subblock_no_prefetch: Cell::default(),
                os: BTreeMap::new(),
            }
        };
        let r = Talluri95 {
            workloads: vec![workload("big", MIN_MISSES), workload("small", MIN_MISSES - 1)],
            max_refs: None,
            reservation_failure: 0.0,
        };
        assert_eq!(r.lines(TlbKind::Single, TableKind::ForwardMapped), vec![("big".to_string(), 7.0)]);
        let claim = r.claims().into_iter().find(|c| c.source == "§6.1, Figure 11a").expect("Figure 11a");
        assert!(claim.note.contains("small (single TLB: 99)"), "{}", claim.note);
        assert!(!claim.note.contains("big"), "{}", claim.note);
        assert!(!r.left_out(&[TlbKind::Single]).is_empty());
        let all_big = Talluri95 { workloads: vec![workload("big", MIN_MISSES)], ..r };
        assert_eq!(all_big.left_out(&[TlbKind::Single]), "");
    }
}
