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

use super::{claim, write_outputs, Options, ReproError, WorkloadInput};
use crate::config::{Config, ConfigError};
use crate::engine::{RunOptions, System};
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
        let summary = super::simulate(&mut *reader, &mut systems, RunOptions { max_refs: opts.max_refs })
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

/// The relative tolerance of every numeric claim: ±10% of the paper's bounds.
const TOLERANCE: f64 = 0.10;

/// Bytes of a clustered PTE of subblock factor 16 (`8s + 16`, Table 2).
const CLUSTERED_PTE: f64 = 144.0;

/// Bytes of a superpage or partial-subblock PTE (and of a hashed PTE), Table 2.
const SMALL_PTE: f64 = 24.0;

/// What results.json's `results` holds: every measurement, and the workloads each claim left out.
#[derive(Serialize)]
struct Results<'a> {
    #[serde(flatten)]
    results: &'a Talluri95,
    /// By claim id: the workloads its numbers leave out, and why.
    left_out: BTreeMap<String, String>,
}

/// Fewest misses to mapped pages for a workload's cache-lines-per-miss to enter a claim.
pub const MIN_MISSES: u64 = 100;

impl Talluri95 {
    fn with_sizes(&self) -> impl Iterator<Item = (&WorkloadResult, &Sizes)> {
        self.workloads.iter().filter_map(|w| w.sizes.as_ref().filter(|s| s.pages > 0).map(|s| (w, s)))
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

    /// Misses to mapped pages of the 64-entry TLB of `tlb` (first touches left out).
    fn mapped(w: &WorkloadResult, tlb: TlbKind) -> u64 {
        let c = &w.cells[tlb as usize][TableKind::Clustered as usize];
        c.misses - c.page_faults
    }

    /// Each claim of the paper as data, judged on the measurements.
    pub fn claims(&self) -> claim::Claims {
        claim::Claims { tolerance: TOLERANCE, claims: self.claims_left_out().into_iter().map(|(c, _)| c).collect() }
    }

    /// Each claim with the workloads its numbers leave out, and why, in words ("" if none).
    pub fn claims_left_out(&self) -> Vec<(claim::Claim, String)> {
        let t = TOLERANCE;
        let mut out: Vec<(claim::Claim, String)> = Vec::new();
        let mut push = |c: claim::Claim, left: String| out.push((c, left));
        let joined = |v: Vec<String>| v.join(", ");

        // Figures 9 and 10: sizes of the workloads that could be sized.
        let sized: Vec<_> = self.with_sizes().collect();
        let no_size: Vec<String> = self
            .workloads
            .iter()
            .filter_map(|w| match &w.sizes {
                None => Some(w.name.clone()),
                Some(s) if s.pages == 0 => Some(format!("{} (its address space held no pages when sized)", w.name)),
                Some(_) => None,
            })
            .collect();
        let size_left = if no_size.is_empty() {
            String::new()
        } else {
            format!("left out, no address space to size: {}", no_size.join(", "))
        };
        let size_unmeasured = "no workload could be sized (no snapshot and no trace)";
        // Resident pages per 64 KB block in use: the single-page-size clustered table holds one
        // 144-byte PTE per block.
        let per_block = |s: &Sizes| s.pages as f64 / (s.bytes["clustered"] as f64 / CLUSTERED_PTE);
        let blocks_text = |ws: &[&(&WorkloadResult, &Sizes)]| {
            joined(ws.iter().map(|(w, s)| format!("{} {:.1}", w.name, per_block(s))).collect())
        };
        let mut c = claim::Claim::new(
            "talluri95.f9.clustered-vs-hashed",
            "talluri95 §6.3, Figure 9",
            "clustered page tables use less memory than hashed page tables (sparse address spaces, e.g. gcc, compress)",
            claim::Expect::order(&["clustered", "hashed"]),
        );
        for (w, s) in &sized {
            c = c.measure_series(&w.name, None, "clustered", s.bytes["clustered"] as f64).measure_series(
                &w.name,
                None,
                "hashed",
                s.bytes["hashed"] as f64,
            );
        }
        let bigger: Vec<_> = sized.iter().filter(|(_, s)| s.bytes["clustered"] >= s.bytes["hashed"]).collect();
        let why = format!(
            "a 144-byte clustered PTE breaks even with six 24-byte hashed PTEs (Table 2): these workloads hold fewer \
             resident pages per 64 KB block in use: {}",
            blocks_text(&bigger)
        );
        push(c.judge(t, &why, size_unmeasured), size_left.clone());

        let mut c = claim::Claim::new(
            "talluri95.f9.clustered-vs-best",
            "talluri95 §1, §6.3, Figure 9",
            "clustered page tables use less memory than the best conventional page table for all the workloads \
             (linear for dense, hashed for sparse address spaces)",
            claim::Expect::order(&["clustered", "best-conventional"]),
        );
        let best = |s: &Sizes| {
            ["linear-6", "forward-mapped", "hashed"]
                .into_iter()
                .map(|n| (n, s.bytes[n]))
                .min_by_key(|x| x.1)
                .expect("3")
        };
        for (w, s) in &sized {
            c = c.measure_series(&w.name, None, "clustered", s.bytes["clustered"] as f64).measure_series(
                &w.name,
                None,
                "best-conventional",
                best(s).1 as f64,
            );
        }
        let why = format!(
            "where resident pages are spread thinly but evenly over a large region, a 64 KB block holds few pages and \
             the clustered PTE's 144 bytes cost more per page than a tree's leaf node: {}",
            joined(
                sized
                    .iter()
                    .filter(|(_, s)| s.bytes["clustered"] >= best(s).1)
                    .map(|(w, s)| {
                        let (name, b) = best(s);
                        format!(
                            "{} has {:.1} resident pages per block in use, {:.0} bytes per page clustered against {:.0} \
                             for {name}",
                            w.name,
                            per_block(s),
                            s.bytes["clustered"] as f64 / s.pages as f64,
                            b as f64 / s.pages as f64
                        )
                    })
                    .collect()
            )
        );
        push(c.judge(t, &why, size_unmeasured), size_left.clone());

        let mut c = claim::Claim::new(
            "talluri95.f10.clustered-half-of-hashed",
            "talluri95 §1, §7, Figure 10",
            "clustered page tables use 50% of the memory required by hashed page tables (size reductions of 50% or \
             more over the unoptimised hashed table)",
            claim::Expect::at_most(0.5),
        );
        for (w, s) in &sized {
            c = c.measure(&w.name, s.normalised("clustered").unwrap_or(f64::NAN));
        }
        let why = format!(
            "clustered / hashed = 6 / (resident pages per 64 KB block in use), so at most 0.5 needs 12 or more; \
             measured pages per block: {}",
            blocks_text(&sized.iter().collect::<Vec<_>>())
        );
        push(c.judge(t, &why, size_unmeasured), size_left.clone());

        // Superpage / partial-subblock PTEs: a 24-byte PTE stands for a whole block's 144 bytes, so
        // the reduction is 5/6 of the share of blocks they map (Table 2's fss).
        let shrink = |name: &str| -> Vec<(String, f64, f64)> {
            sized
                .iter()
                .map(|(w, s)| {
                    let (full, small) = (s.bytes["clustered"] as f64, s.bytes[name] as f64);
                    let fss = (full - small) / (full / CLUSTERED_PTE * (CLUSTERED_PTE - SMALL_PTE));
                    (w.name.clone(), 100.0 * (1.0 - small / full), fss)
                })
                .collect()
        };
        for (id, name, what, hi) in [
            ("talluri95.f10.superpage-shrink", "clustered-superpage", "superpage", 75.0),
            ("talluri95.f10.partial-subblock-shrink", "clustered-partial-subblock", "partial-subblock", 80.0),
        ] {
            let v = shrink(name);
            let mut c = claim::Claim::new(
                id,
                "talluri95 §6.3, Figure 10",
                &format!(
                    "{what} PTEs reduce clustered page table memory usage by up to {hi:.0}% (per cent of the size)"
                ),
                claim::Expect::range(0.0, hi),
            );
            for (w, r, _) in &v {
                c = c.measure(w, *r);
            }
            let why = format!(
                "the reduction is 83.3% (a 24-byte PTE for a 144-byte one) times the share of 64 KB blocks in use that \
                 the {what} PTEs map; that share, measured: {}; the paper's largest reduction ({hi:.0}%) means a share \
                 of {:.2}",
                joined(v.iter().map(|(w, _, f)| format!("{w} {f:.2}")).collect()),
                hi / 100.0 * CLUSTERED_PTE / (CLUSTERED_PTE - SMALL_PTE)
            );
            push(c.judge(t, &why, size_unmeasured), size_left.clone());
        }

        let mut c = claim::Claim::new(
            "talluri95.f10.hashed-superpage-shrink",
            "talluri95 §6.3, Figure 10",
            "superpage PTEs similarly make the hashed page table smaller",
            claim::Expect::order(&["hashed-superpage", "hashed"]),
        );
        for (w, s) in &sized {
            c = c.measure_series(&w.name, None, "hashed-superpage", s.bytes["hashed-superpage"] as f64).measure_series(
                &w.name,
                None,
                "hashed",
                s.bytes["hashed"] as f64,
            );
        }
        let why = format!(
            "no 64 KB block of these workloads is fully resident, so none is promoted to a superpage: {}",
            joined(
                sized
                    .iter()
                    .filter(|(_, s)| s.bytes["hashed-superpage"] >= s.bytes["hashed"])
                    .map(|(w, _)| w.name.clone())
                    .collect()
            )
        );
        push(c.judge(t, &why, size_unmeasured), size_left);

        // Figure 11: cache lines per miss to a mapped page, over the workloads with enough misses.
        let figs = |tlbs: &[TlbKind]| tlbs.iter().map(|t| t.figure()).collect::<Vec<_>>().join(", ");
        let lines_claim =
            |id: &str, source: &str, paper: &str, expect: claim::Expect, table: TableKind, tlbs: &[TlbKind]| {
                let mut c = claim::Claim::new(id, source, paper, expect);
                for &tlb in tlbs {
                    for (w, v) in self.lines(tlb, table) {
                        c = if tlbs.len() > 1 { c.measure_at(&w, tlb.figure(), v) } else { c.measure(&w, v) };
                    }
                }
                let unmeasured = format!(
                    "no workload takes {MIN_MISSES} misses to mapped pages under the {} TLB{} (Figure {})",
                    tlbs.iter().map(|t| t.name()).collect::<Vec<_>>().join(" / "),
                    if tlbs.len() > 1 { "s" } else { "" },
                    figs(tlbs)
                );
                (c, unmeasured, self.left_out(tlbs))
            };
        let all = TLBS;
        let (c, un, left) = lines_claim(
            "talluri95.f11.forward-mapped-seven",
            "talluri95 §2.2, §6.1, Figure 11a, 11b",
            "forward-mapped page tables take seven memory accesses (one cache line per level of the 64-bit tree) on \
             every TLB miss, unchanged with superpages",
            claim::Expect::about(7.0, 0.0),
            TableKind::ForwardMapped,
            &all,
        );
        let odd: Vec<String> = self
            .workloads
            .iter()
            .flat_map(|w| {
                all.iter().filter_map(move |&t| {
                    let f = &w.cells[t as usize][TableKind::ForwardMapped as usize];
                    let walks = f.walks.saturating_sub(f.page_faults);
                    (Self::mapped(w, t) >= MIN_MISSES && walks > 0).then(|| {
                        format!(
                            "{} {} {:.2}",
                            w.name,
                            t.figure(),
                            (f.cache_lines - f.fault_lines) as f64 / walks as f64
                        )
                    })
                })
            })
            .collect();
        let why = format!("lines per walk of the 7-level tree, measured: {}", joined(odd));
        push(c.judge(t, &why, &un), left);

        // Figure 11b: a miss to a superpage PTE searches the 4 KB table first, then the 64 KB one.
        let mut c = claim::Claim::new(
            "talluri95.f11b.hashed-superpage-miss",
            "talluri95 §6.1, §6.3, Figure 11b",
            "hashed page tables take longer to access superpage PTEs: the 4 KB page table is searched first, then \
             the 64 KB one (two searches, at least two cache lines per miss to a superpage PTE)",
            claim::Expect::at_least(2.0),
        );
        let mut few = Vec::new();
        let mut clustered_sp = Vec::new();
        for w in &self.workloads {
            let h = &w.cells[TlbKind::Superpage as usize][TableKind::Hashed as usize];
            let cl = &w.cells[TlbKind::Superpage as usize][TableKind::Clustered as usize];
            if h.superpage_walks < MIN_MISSES {
                few.push(format!("{} ({})", w.name, h.superpage_walks));
                continue;
            }
            c = c.measure(&w.name, h.superpage_lines as f64 / h.superpage_walks as f64);
            clustered_sp.push(format!(
                "{} {:.2}",
                w.name,
                cl.superpage_lines as f64 / cl.superpage_walks.max(1) as f64
            ));
        }
        let few = if few.is_empty() {
            String::new()
        } else {
            format!("left out, fewer than {MIN_MISSES} misses to superpage PTEs: {}", few.join(", "))
        };
        let why = format!(
            "a search that ends in the 4 KB table's bucket node for a superpage's page still costs that node's line; \
             the clustered table's lines per miss to a superpage PTE, measured: {}",
            clustered_sp.join(", ")
        );
        push(
            c.judge(t, &why, &format!("no workload takes {MIN_MISSES} misses to superpage PTEs ({few})")),
            few.clone(),
        );

        let near = "close to 1.0 taken as 1 ± 0.5 cache lines";
        let chains = |table: TableKind, tlbs: &[TlbKind]| {
            let mut v = Vec::new();
            for w in &self.workloads {
                for &tlb in tlbs {
                    let c = &w.cells[tlb as usize][table as usize];
                    let walks = c.walks.saturating_sub(c.page_faults);
                    if Self::mapped(w, tlb) >= MIN_MISSES && walks > 0 {
                        v.push(format!(
                            "{} {} {:.2} lines and {:.2} memory references per walk",
                            w.name,
                            tlb.figure(),
                            (c.cache_lines - c.fault_lines) as f64 / walks as f64,
                            c.memory_refs as f64 / c.walks.max(1) as f64
                        ));
                    }
                }
            }
            v.join("; ")
        };
        let abc = [TlbKind::Single, TlbKind::Superpage, TlbKind::PartialSubblock];
        let (c, un, left) = lines_claim(
            "talluri95.f11.clustered-near-one",
            "talluri95 §6.3, Figure 11a–c",
            &format!(
                "clustered page tables stay close to 1.0 cache line per TLB miss with single-page-size, superpage and \
                 partial-subblock TLBs ({near})"
            ),
            claim::Expect::about(1.0, 0.5),
            TableKind::Clustered,
            &abc,
        );
        let why = format!("long hash chains: {}", chains(TableKind::Clustered, &abc));
        push(c.judge(t, &why, &un), left);

        // Figure 11d: subblock prefetch searches the table once per base page of the block.
        let d = [TlbKind::CompleteSubblock];
        let (c, un, left) = lines_claim(
            "talluri95.f11d.hashed-prefetch",
            "talluri95 §4.4, §6.3, Figure 11d",
            "with subblock prefetch, hashed page tables perform terribly due to the high cost of multiple probes \
             (sixteen: at least sixteen cache lines per miss)",
            claim::Expect::at_least(16.0),
            TableKind::Hashed,
            &d,
        );
        let why = format!("probes per prefetching miss: {}", chains(TableKind::Hashed, &d));
        push(c.judge(t, &why, &un), left);
        let (c, un, left) = lines_claim(
            "talluri95.f11d.clustered-near-one",
            "talluri95 §6.3, Figure 11d",
            &format!(
                "with subblock prefetch, clustered page tables continue to be close to 1.0 cache line per miss, \
                 the mappings of a block being in one node ({near})"
            ),
            claim::Expect::about(1.0, 0.5),
            TableKind::Clustered,
            &d,
        );
        let why = format!("long hash chains: {}", chains(TableKind::Clustered, &d));
        push(c.judge(t, &why, &un), left);
        let (c, un, left) = lines_claim(
            "talluri95.f11d.linear-near-one",
            "talluri95 §6.1, §6.3, Figure 11d",
            &format!(
                "with subblock prefetch, linear page tables continue to be close to 1.0 cache line per miss, the 8 \
                 reserved TLB entries holding the upper levels ({near})"
            ),
            claim::Expect::about(1.0, 0.5),
            TableKind::Linear,
            &d,
        );
        let why = format!(
            "the metric charges the linear table for its 8 reserved entries (paper §6.1), and 64-bit programs spread \
             over more 2 MB regions than 8 entries map, so walks take nested misses up the 6-level tree, which the \
             paper's 32-bit workloads never did; misses with 56 entries / with 64, and nested misses per walk: {}",
            joined(
                self.workloads
                    .iter()
                    .filter(|w| Self::mapped(w, TlbKind::CompleteSubblock) >= MIN_MISSES)
                    .map(|w| {
                        let l = &w.cells[TlbKind::CompleteSubblock as usize][TableKind::Linear as usize];
                        format!(
                            "{} {:.2}, {:.2}",
                            w.name,
                            l.misses as f64 / w.misses(TlbKind::CompleteSubblock as usize).max(1) as f64,
                            l.nested_misses as f64 / l.walks.max(1) as f64
                        )
                    })
                    .collect()
            )
        );
        push(c.judge(t, &why, &un), left);

        // TLB miss reductions, of misses to mapped pages (a first touch misses in every TLB).
        let floor = |base: &dyn Fn(&WorkloadResult) -> u64, what: &str| -> (Vec<&WorkloadResult>, String) {
            let (kept, out): (Vec<&WorkloadResult>, Vec<&WorkloadResult>) =
                self.workloads.iter().partition(|w| base(w) >= MIN_MISSES);
            let left = if out.is_empty() {
                String::new()
            } else {
                format!(
                    "left out, fewer than {MIN_MISSES} misses to mapped pages under the {what}: {}",
                    joined(out.iter().map(|w| format!("{} ({})", w.name, base(w))).collect())
                )
            };
            (kept, left)
        };
        let (kept, left) = floor(&|w| Self::mapped(w, TlbKind::Single), "single-page-size TLB");
        for (id, tlb, source) in [
            ("talluri95.s6.superpage-tlb-misses", TlbKind::Superpage, "talluri95 §1, §4, §6.3 [Tall95]"),
            ("talluri95.s4.partial-subblock-tlb-misses", TlbKind::PartialSubblock, "talluri95 §1, §4 [Tall95]"),
            ("talluri95.s4.complete-subblock-tlb-misses", TlbKind::CompleteSubblock, "talluri95 §1, §4 [Tall95]"),
        ] {
            let mut c = claim::Claim::new(
                id,
                source,
                &format!(
                    "a {} TLB reduces the number of TLB misses by 50% to 99% (per cent of a single-page-size TLB's \
                     misses to mapped pages)",
                    tlb.name()
                ),
                claim::Expect::range(50.0, 99.0),
            );
            let mut facts = Vec::new();
            for w in &kept {
                let (base, m) = (Self::mapped(w, TlbKind::Single), Self::mapped(w, tlb));
                c = c.measure(&w.name, 100.0 * (1.0 - m as f64 / base as f64));
                let os = w.os.get(tlb.name()).copied().unwrap_or_default();
                let held = match tlb {
                    TlbKind::Superpage => format!(", superpages at the end: {}", os.superpages),
                    TlbKind::PartialSubblock => {
                        format!(", partial-subblock PTEs at the end: {}", os.partial_subblock_ptes)
                    }
                    _ => String::new(),
                };
                facts.push(format!("{} {base} → {m} misses{held}", w.name));
            }
            let why = format!(
                "a superpage needs all 16 pages of its 64 KB block resident and properly placed, a subblock entry \
                 only the block's pages in use; misses to mapped pages, single-page-size TLB → this TLB: {}",
                joined(facts)
            );
            let un = format!("no workload takes {MIN_MISSES} misses to mapped pages under the single-page-size TLB");
            push(c.judge(t, &why, &un), left.clone());
        }
        let no_pf =
            |w: &WorkloadResult| w.complete_subblock_no_prefetch.misses - w.complete_subblock_no_prefetch.page_faults;
        let (kept, left) = floor(&no_pf, "complete-subblock TLB without prefetch");
        let mut c = claim::Claim::new(
            "talluri95.s4.4.prefetch-misses",
            "talluri95 §4.4 [Tall95]",
            "subblock prefetching (each block miss loads every mapping of its block) reduces the number of TLB \
             misses of a complete-subblock TLB by 50% or more (per cent of its misses to mapped pages without prefetch)",
            claim::Expect::at_least(50.0),
        );
        let mut facts = Vec::new();
        for w in &kept {
            let (base, cs) = (no_pf(w), &w.complete_subblock_no_prefetch);
            c = c.measure(&w.name, 100.0 * (1.0 - Self::mapped(w, TlbKind::CompleteSubblock) as f64 / base as f64));
            facts.push(format!(
                "{} {} block and {} subblock misses",
                w.name,
                cs.block_misses,
                cs.misses - cs.block_misses
            ));
        }
        let why = format!("prefetch removes only subblock misses; without prefetch, measured: {}", joined(facts));
        push(
            c.judge(t, &why, &format!("no workload takes {MIN_MISSES} misses to mapped pages without prefetch")),
            left,
        );
        out
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
        let listed = self.claims_left_out();
        let claims = claim::Claims { tolerance: TOLERANCE, claims: listed.iter().map(|(c, _)| c.clone()).collect() };
        md.push_str(&claims.markdown());
        let left: Vec<_> = listed.iter().filter(|(_, l)| !l.is_empty()).collect();
        if !left.is_empty() {
            let _ = writeln!(md, "\n### Workloads left out of a claim's numbers\n");
            for (c, l) in left {
                let _ = writeln!(md, "- `{}`: {l}", c.id);
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
        let left_out: BTreeMap<String, String> =
            self.claims_left_out().into_iter().filter(|(_, l)| !l.is_empty()).map(|(c, l)| (c.id, l)).collect();
        let results = Results { results: self, left_out };
        let value = super::results_json("talluri95", &results, &self.claims());
        write_outputs(dir, self.figures(), &value, &self.markdown())
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

    fn workload(name: &str, misses: u64) -> WorkloadResult {
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
    }

    fn find<'a>(claims: &'a [(claim::Claim, String)], id: &str) -> &'a (claim::Claim, String) {
        claims.iter().find(|(c, _)| c.id == id).unwrap_or_else(|| panic!("no claim {id}"))
    }

    fn values(c: &claim::Claim) -> Vec<(String, f64)> {
        c.measured.iter().map(|m| (m.workload.clone(), m.value)).collect()
    }

    #[test]
    fn a_claim_says_which_workloads_it_left_out_and_why() {
        let r = Talluri95 {
            workloads: vec![workload("big", MIN_MISSES), workload("small", MIN_MISSES - 1)],
            max_refs: None,
            reservation_failure: 0.0,
        };
        assert_eq!(r.lines(TlbKind::Single, TableKind::ForwardMapped), vec![("big".to_string(), 7.0)]);
        let claims = r.claims_left_out();
        let (claim, left) = find(&claims, "talluri95.f11.forward-mapped-seven");
        // One value per TLB of Figure 11, all from "big".
        assert_eq!(values(claim), vec![("big".to_string(), 7.0); 4]);
        assert_eq!(claim.verdict, claim::Verdict::Agrees);
        assert!(left.contains("small (single TLB: 99)"), "{left}");
        assert!(!left.contains("big"), "{left}");
        // Nothing sized: the size claims are not measured and say why.
        let (size, left) = find(&claims, "talluri95.f9.clustered-vs-hashed");
        assert_eq!(size.verdict, claim::Verdict::NotMeasured);
        assert!(!size.why.is_empty() && left.contains("big, small"), "{left}");
        let report = r.markdown();
        assert!(
            report.contains("`talluri95.f11.forward-mapped-seven`: left out")
                && report.contains("small (single TLB: 99)")
        );
        assert!(!r.left_out(&[TlbKind::Single]).is_empty());
        let all_big = Talluri95 { workloads: vec![workload("big", MIN_MISSES)], ..r };
        assert_eq!(all_big.left_out(&[TlbKind::Single]), "");
        assert_eq!(find(&all_big.claims_left_out(), "talluri95.f11.forward-mapped-seven").1, "");
    }

    #[test]
    fn the_claims_measure_the_papers_quantities_from_raw_counters() {
        let mut w = workload("w", 0);
        // Misses and first touches per TLB (every table of a TLB alike): misses to mapped pages
        // 1000 (single), 100 (superpage), 10 (partial-subblock), 5 (complete-subblock).
        for (t, misses) in [
            (TlbKind::Single, 1010),
            (TlbKind::Superpage, 110),
            (TlbKind::PartialSubblock, 20),
            (TlbKind::CompleteSubblock, 15),
        ] {
            for c in &mut w.cells[t as usize] {
                (c.misses, c.page_faults) = (misses, 10);
            }
        }
        // Without prefetch, 400 misses to mapped pages.
        w.complete_subblock_no_prefetch = Cell { misses: 410, page_faults: 10, block_misses: 150, ..Cell::default() };
        // 100 misses of the superpage TLB found a superpage PTE: 250 lines hashed.
        let h = &mut w.cells[TlbKind::Superpage as usize][TableKind::Hashed as usize];
        (h.superpage_walks, h.superpage_lines) = (100, 250);
        // 64 pages in 4 blocks of 16: 4 clustered PTEs (576 bytes), 64 hashed PTEs (1536); 2 of the
        // 4 blocks promoted (2 × 24 + 2 × 144 = 336), all 4 partial-subblock PTEs (96).
        let bytes = [
            ("clustered", 576),
            ("hashed", 1536),
            ("linear-6", 6 * 4096),
            ("forward-mapped", 7 * 4096),
            ("clustered-superpage", 336),
            ("clustered-partial-subblock", 96),
            ("hashed-superpage", 2 * 24 + 32 * 24),
        ];
        w.sizes = Some(Sizes {
            pages: 64,
            source: "snapshot".into(),
            processes: 1,
            page_size: 4096,
            bytes: bytes.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        });
        let r = Talluri95 { workloads: vec![w], max_refs: None, reservation_failure: 0.0 };
        let claims = r.claims_left_out();
        let one = |id: &str| {
            let v = values(&find(&claims, id).0);
            assert_eq!(v.len(), 1, "{id}: {v:?}");
            v[0].1
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(one("talluri95.f10.clustered-half-of-hashed"), 0.375));
        assert!(close(one("talluri95.f10.superpage-shrink"), 100.0 * (1.0 - 336.0 / 576.0)));
        assert!(close(one("talluri95.f10.partial-subblock-shrink"), 100.0 * (1.0 - 96.0 / 576.0)));
        assert!(close(one("talluri95.f11b.hashed-superpage-miss"), 2.5));
        assert!(close(one("talluri95.s6.superpage-tlb-misses"), 90.0));
        assert!(close(one("talluri95.s4.partial-subblock-tlb-misses"), 99.0));
        assert!(close(one("talluri95.s4.complete-subblock-tlb-misses"), 99.5));
        assert!(close(one("talluri95.s4.4.prefetch-misses"), 100.0 * (1.0 - 5.0 / 400.0)));
        let sp = &find(&claims, "talluri95.f10.superpage-shrink").0;
        assert_eq!(sp.verdict, claim::Verdict::Agrees);
        // A workload whose address space held no pages when sized (a program that exited before
        // it could be snapshotted) is left out of the size claims and named, not counted as 0 < 0.
        let mut empty = r.workloads[0].clone();
        empty.name = "empty".into();
        empty.sizes.as_mut().unwrap().pages = 0;
        empty.sizes.as_mut().unwrap().bytes.values_mut().for_each(|b| *b = 0);
        let r2 = Talluri95 { workloads: vec![r.workloads[0].clone(), empty], ..r };
        let claims2 = r2.claims_left_out();
        let (c, left) = find(&claims2, "talluri95.f9.clustered-vs-hashed");
        assert!(c.measured.iter().all(|m| m.workload == "w"), "{:?}", c.measured);
        assert!(left.contains("empty (its address space held no pages when sized)"), "{left}");
        let best = &find(&claims, "talluri95.f9.clustered-vs-best").0;
        assert_eq!(best.measured.iter().map(|m| m.value).collect::<Vec<_>>(), vec![576.0, 1536.0]);
        assert_eq!(best.verdict, claim::Verdict::Agrees);
        // 99.5% lies inside 99% + 10%; the superpage TLB's 90% too.
        assert_eq!(find(&claims, "talluri95.s4.complete-subblock-tlb-misses").0.verdict, claim::Verdict::Agrees);
        assert_eq!(r.claims().claims.len(), claims.len());
        assert!(claims.len() >= 12);
    }
}
