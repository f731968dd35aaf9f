//! `xlat reproduce shootdowns`: TLB shootdowns and a shared last-level TLB as cores grow
//! (docs/multicore.md, "Study").
//!
//! One pass per trace runs every design: an x86-64-like TLB hierarchy (128-entry 8-way L1I,
//! 64-entry 4-way L1D, 1,536-entry 12-way STLB, 4-level radix table, tagged) on 1, 2, 4, 8 and
//! 16 cores under each shootdown policy (`linux`, `ideal`, `lazy`), and with the STLB shared by
//! every core (`shared = true`, policy `linux`) on 2 to 16 cores. IPIs are counted per million
//! lookups (page translations) and per second of the cores' time, on a core of [`CLOCK_MHZ`] at
//! one instruction per cycle whose references all hit its caches and whose page faults and
//! system calls take no time (no cited x86 figure): an upper bound of the rate, since cache
//! stalls and kernel work would lengthen the time. Shootdowns cost their cited defaults
//! (`[os.shootdown]`, docs/configuration.md), and their share of the cores' time is reported. Published figures are set beside the measured ones as
//! context: the model was not tuned to any of them.

use super::{ReproError, WorkloadInput};
use crate::config::Config;
use crate::plot::{BarChart, Figure, Line, LineChart, Series};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Core counts of the study.
pub const CORES: [u32; 5] = [1, 2, 4, 8, 16];
/// The study's clock: 4,000 MHz, the maximum turbo clock of the Intel Core i7-6700 (Skylake,
/// whose TLB hierarchy the designs model; Intel's product specification) and the clock the
/// x86-64 preset's memory latency and the shootdown costs' defaults assume (docs/configuration.md).
pub const CLOCK_MHZ: f64 = 4000.0;
/// Shootdown policies of the study.
pub const POLICIES: [&str; 3] = ["linux", "ideal", "lazy"];

/// One design's counters over one trace.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// Workload.
    pub workload: String,
    /// Design name (`c4-linux`, `c4-shared`, ...).
    pub design: String,
    /// Shootdown policy.
    pub policy: String,
    /// Simulated cores.
    pub cores: u32,
    /// The STLB is one structure shared by every core.
    pub shared_llt: bool,
    /// Page lookups.
    pub lookups: u64,
    /// Shootdowns started.
    pub initiated: u64,
    /// IPIs sent.
    pub ipis: u64,
    /// IPIs whose target held an entry of the ranges.
    pub necessary_ipis: u64,
    /// Pages of the ranges shot down.
    pub pages: u64,
    /// Shootdowns that flushed the address space whole.
    pub full_flushes: u64,
    /// Entries the targets invalidated.
    pub entries_invalidated: u64,
    /// Misses in the last-level TLB (the STLB; all cores together).
    pub llt_misses: u64,
    /// IPIs per million lookups.
    pub ipis_per_mlookup: f64,
    /// The cores' cycles together (`time.cycles`: one instruction per cycle, every reference a
    /// cache hit, page faults and kernel events at no cost, shootdowns at their configured cost).
    pub cycles: u64,
    /// IPIs per second of the cores' time at [`CLOCK_MHZ`].
    pub ipis_per_second: f64,
    /// Cycles of shootdowns, initiators' and targets' (`cycles.shootdown`, part of `cycles`).
    pub shootdown_cycles: u64,
    /// shootdown_cycles / cycles; 0 without cycles.
    pub shootdown_share: f64,
    /// (ipis - necessary_ipis) / ipis; 0 without IPIs.
    pub unnecessary_share: f64,
}

/// A shared STLB against private ones on the same cores (policy `linux`).
#[derive(Clone, Debug, Serialize)]
pub struct SharedLlt {
    /// Workload.
    pub workload: String,
    /// Cores.
    pub cores: u32,
    /// STLB misses with private STLBs.
    pub private_misses: u64,
    /// STLB misses with one shared STLB.
    pub shared_misses: u64,
    /// (private - shared) / private: the share of last-level misses the shared STLB eliminates.
    pub eliminated_share: f64,
}

/// The study's results.
#[derive(Clone, Debug, Serialize)]
pub struct Shootdowns {
    /// Workloads, in order.
    pub workloads: Vec<String>,
    /// References simulated per trace at most (`None`: whole traces).
    pub max_refs: Option<u64>,
    /// What IPI rates are counted per.
    pub rate_unit: &'static str,
    /// The designs' clock (MHz), for the rates per second.
    pub clock_mhz: f64,
    /// Every design's counters.
    pub runs: Vec<Run>,
    /// The shared STLB against private ones.
    pub shared_llt: Vec<SharedLlt>,
}

fn div(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// "LO to HI" of `v` with `decimals` decimals, each followed by `unit`; "not measured" if
/// empty.
fn span(v: &[f64], decimals: usize, unit: &str) -> String {
    if v.is_empty() {
        return "not measured".to_string();
    }
    let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    format!("{lo:.decimals$}{unit} to {hi:.decimals$}{unit}")
}

/// The TOML of one design of the study.
fn design_toml(name: &str, cores: u32, policy: &str, shared: bool) -> String {
    format!(
        "name = \"{name}\"\npage_size = 4096\nasid = \"tagged\"\n\
         [[tlb]]\nname = \"L1I\"\nentries = 128\nways = 8\nserves = \"instruction\"\nlevel = 1\n\
         [[tlb]]\nname = \"L1D\"\nentries = 64\nways = 4\nserves = \"data\"\nlevel = 1\n\
         [[tlb]]\nname = \"STLB\"\nentries = 1536\nways = 12\nserves = \"unified\"\nlevel = 2\nshared = {shared}\n\
         [page_table]\nkind = \"radix\"\nlevels = 4\nbits_per_level = 9\nva_bits = 48\n\
         [cores]\ncount = {cores}\n[os.shootdown]\npolicy = \"{policy}\"\n\
         [time]\ncpi = 1.0\nclock_mhz = {CLOCK_MHZ}\n[memory]\nlatency = 0\n"
    )
}

/// One design of the study: name, cores, policy, shared STLB, config.
pub type StudyDesign = (String, u32, String, bool, Config);

/// The designs of the study.
pub fn designs() -> Result<Vec<StudyDesign>, ReproError> {
    let mut v = Vec::new();
    for &n in &CORES {
        for p in POLICIES {
            // One core sends no shootdown to anyone: one design stands for the three policies.
            if n == 1 && p != "linux" {
                continue;
            }
            let name = format!("c{n}-{p}");
            v.push((
                name.clone(),
                n,
                p.to_string(),
                false,
                Config::from_toml(&design_toml(&name, n, p, false), &name)?,
            ));
        }
        if n > 1 {
            let name = format!("c{n}-shared");
            v.push((
                name.clone(),
                n,
                "linux".to_string(),
                true,
                Config::from_toml(&design_toml(&name, n, "linux", true), &name)?,
            ));
        }
    }
    Ok(v)
}

/// Runs the study over `inputs` (each trace once for all designs, at most `max_refs` references).
pub fn shootdowns(
    inputs: &[WorkloadInput],
    max_refs: Option<u64>,
    progress: &mut dyn FnMut(String),
) -> Result<Shootdowns, ReproError> {
    if inputs.is_empty() {
        return Err(ReproError::Input("no workloads (churn, xz-mt, shmserve)".to_string()));
    }
    let designs = designs()?;
    let configs: Vec<Config> = designs.iter().map(|d| d.4.clone()).collect();
    let mut runs = Vec::new();
    for w in inputs {
        progress(format!("{}: {} designs, one pass...", w.name, configs.len()));
        let systems = super::run_designs(&w.name, &w.trace, &configs, max_refs)?;
        for ((name, cores, policy, shared, _), s) in designs.iter().zip(&systems) {
            let st = s.stats();
            let sd = st.shootdowns.unwrap_or_default();
            let llt = st.tlb.last().map_or(0, |t| t.misses);
            let cycles = st.time.map_or(0, |t| t.cycles);
            let shootdown_cycles = st.time.map_or(0, |t| t.shootdown);
            runs.push(Run {
                workload: w.name.clone(),
                design: name.clone(),
                policy: policy.clone(),
                cores: *cores,
                shared_llt: *shared,
                lookups: st.lookups,
                initiated: sd.initiated,
                ipis: sd.ipis,
                necessary_ipis: sd.necessary_ipis,
                pages: sd.pages,
                full_flushes: sd.full_flushes,
                entries_invalidated: sd.entries_invalidated,
                llt_misses: llt,
                ipis_per_mlookup: div(sd.ipis, st.lookups) * 1e6,
                cycles,
                ipis_per_second: div(sd.ipis, cycles) * CLOCK_MHZ * 1e6,
                shootdown_cycles,
                shootdown_share: div(shootdown_cycles, cycles),
                unnecessary_share: div(sd.ipis - sd.necessary_ipis, sd.ipis),
            });
        }
    }
    let mut shared_llt = Vec::new();
    for w in inputs {
        for &n in CORES.iter().filter(|&&n| n > 1) {
            let find =
                |d: String| runs.iter().find(|r| r.workload == w.name && r.design == d).map_or(0, |r| r.llt_misses);
            let (p, s) = (find(format!("c{n}-linux")), find(format!("c{n}-shared")));
            shared_llt.push(SharedLlt {
                workload: w.name.clone(),
                cores: n,
                private_misses: p,
                shared_misses: s,
                eliminated_share: if p == 0 { 0.0 } else { (p as f64 - s as f64) / p as f64 },
            });
        }
    }
    Ok(Shootdowns {
        workloads: inputs.iter().map(|w| w.name.clone()).collect(),
        max_refs,
        rate_unit: "per million lookups",
        clock_mhz: CLOCK_MHZ,
        runs,
        shared_llt,
    })
}

/// The published figures the study's measurements echo: (source, published, what xlat
/// measures beside it, where the workloads differ).
const ECHOES: &[(&str, &str, &str, &str)] = &[
    (
        "Linux's batched TLB flushing during reclaim (Mel Gorman's series \"mm: Batch TLB flushing during \
         reclaim\", cover letter and commit 5b74283ab251, Linux 4.3)",
        "interrupts cut from about 900 K/s to 60 K/s on a 4-socket machine (15x) by flushing many unmapped \
         pages with one IPI",
        "pages per shootdown under `linux`: the IPI rounds that batching the pages of one call saves over one \
         round per page; and IPIs per second",
        "the kernel figure is kswapd's page reclaim under memory pressure; here the batches are the pages of \
         one munmap, mprotect or madvise call, and nothing is reclaimed",
    ),
    (
        "ABIS (Amit, USENIX ATC'17, \"Optimizing the TLB Shootdown Algorithm with Page Access Tracking\")",
        "up to 98% of TLB invalidations avoided as unnecessary",
        "the unnecessary share (ipis - necessary_ipis) / ipis under `linux`",
        "ABIS measured Linux on a real machine with its own benchmarks; here the share is of IPIs to cores \
         whose TLBs held no entry of the range, in a serialized trace of three small programs",
    ),
    (
        "LATR (Kumar et al., ASPLOS'18, \"LATR: Lazy Translation Coherence\")",
        "munmap latency 70.8% lower on a 2-socket machine",
        "IPIs under `lazy` against `linux` (lazy sends none; its targets invalidate at their next switch or \
         tick), and the share of the cores' time in shootdowns under each",
        "LATR measured munmap's latency on a real kernel; here system calls are untimed, so the shootdown \
         cycles (at costs derived from other machines' measurements) are compared, not a call's latency",
    ),
    (
        "Bhattacharjee, Lustig and Martonosi, HPCA'11, \"Shared Last-Level TLBs for Chip Multiprocessors\" \
         (abstract)",
        "a shared last-level TLB eliminates 7-79% of system-wide misses of parallel workloads, on average 27% \
         more than private per-core L2 TLBs",
        "(private - shared) / private STLB misses",
        "the paper's threads run at once on a CMP; here the trace runs one thread at a time, so a shared STLB \
         sees the one-core miss stream and gains only what private copies lose to duplication and migration",
    ),
];

impl Shootdowns {
    fn run(&self, w: &str, d: &str) -> Option<&Run> {
        self.runs.iter().find(|r| r.workload == w && r.design == d)
    }

    /// A table of one cell per workload, policy and core count above 1 (`cell` of its run).
    fn by_cores(&self, policies: &[&str], cell: impl Fn(&Run) -> String) -> String {
        let several = || CORES.iter().filter(|&&n| n > 1);
        let mut s = String::from("| workload | policy |");
        for n in several() {
            s += &format!(" {n} |");
        }
        s += "\n|---|---|";
        s += &"---:|".repeat(CORES.len() - 1);
        s += "\n";
        for w in &self.workloads {
            for p in policies {
                s += &format!("| {w} | {p} |");
                for n in several() {
                    match self.run(w, &format!("c{n}-{p}")) {
                        Some(r) => s += &format!(" {} |", cell(r)),
                        None => s += " |",
                    }
                }
                s += "\n";
            }
        }
        s
    }

    /// The tables of the report (and of docs/multicore.md's "Study"): IPIs per million lookups,
    /// the unnecessary share, pages per shootdown and the shared STLB.
    pub fn tables(&self) -> String {
        let mut s = String::new();
        s += "IPIs per million lookups (unnecessary share of the IPIs):\n\n| workload | policy |";
        for n in CORES {
            s += &format!(" {n} |");
        }
        s += "\n|---|---|";
        s += &"---:|".repeat(CORES.len());
        s += "\n";
        for w in &self.workloads {
            for p in POLICIES {
                s += &format!("| {w} | {p} |");
                for n in CORES {
                    let d = if n == 1 { "c1-linux".to_string() } else { format!("c{n}-{p}") };
                    match self.run(w, &d) {
                        Some(r) if r.ipis > 0 => {
                            s += &format!(" {:.1} ({:.0}%) |", r.ipis_per_mlookup, 100.0 * r.unnecessary_share)
                        }
                        Some(_) => s += " 0 |",
                        None => s += " |",
                    }
                }
                s += "\n";
            }
        }
        s += &format!(
            "\nIPIs per second of the cores' time ({:.1} GHz, one instruction per cycle, every reference a \
             cache hit, page faults and system calls untimed: an upper bound):\n\n",
            CLOCK_MHZ / 1000.0
        );
        s += &self.by_cores(&["linux", "ideal"], |r| format!("{:.0}", r.ipis_per_second));
        s += "\nShare of the cores' time in shootdowns (initiators' and targets' cycles at the cited default \
              costs, over the same time as above):\n\n";
        s += &self.by_cores(&POLICIES, |r| format!("{:.2}%", 100.0 * r.shootdown_share));
        s += "\nShootdowns under `linux` (pages per shootdown; full flushes above 33 pages):\n\n\
              | workload | cores | shootdowns | pages | pages per shootdown | full flushes | IPIs | necessary IPIs |\n\
              |---|---:|---:|---:|---:|---:|---:|---:|\n";
        for w in &self.workloads {
            for n in CORES.iter().filter(|&&n| n > 1) {
                if let Some(r) = self.run(w, &format!("c{n}-linux")) {
                    s += &format!(
                        "| {w} | {n} | {} | {} | {:.1} | {} | {} | {} |\n",
                        r.initiated,
                        r.pages,
                        div(r.pages, r.initiated),
                        r.full_flushes,
                        r.ipis,
                        r.necessary_ipis
                    );
                }
            }
        }
        s += "\nA shared STLB against private ones (`linux`; STLB misses of all cores):\n\n\
              | workload | cores | private | shared | eliminated |\n|---|---:|---:|---:|---:|\n";
        for x in &self.shared_llt {
            s += &format!(
                "| {} | {} | {} | {} | {:.1}% |\n",
                x.workload,
                x.cores,
                x.private_misses,
                x.shared_misses,
                100.0 * x.eliminated_share
            );
        }
        s
    }

    /// The published figures beside the measured ones.
    pub fn comparisons(&self) -> String {
        let lin: Vec<&Run> = self.runs.iter().filter(|r| r.policy == "linux" && !r.shared_llt && r.cores > 1).collect();
        let range = |v: Vec<f64>| span(&v, 1, "");
        let pages = range(lin.iter().filter(|r| r.initiated > 0).map(|r| div(r.pages, r.initiated)).collect());
        let per_second = range(lin.iter().filter(|r| r.ipis > 0).map(|r| r.ipis_per_second / 1000.0).collect());
        let unnecessary =
            range(lin.iter().filter(|r| r.ipis > 0).map(|r| 100.0 * r.unnecessary_share).collect::<Vec<_>>());
        let (li, la) = self.runs.iter().fold((0, 0), |(li, la), r| match (r.policy.as_str(), r.shared_llt) {
            ("linux", false) => (li + r.ipis, la),
            ("lazy", false) => (li, la + r.ipis),
            _ => (li, la),
        });
        let elim = range(self.shared_llt.iter().map(|x| 100.0 * x.eliminated_share).collect());
        let share = |p: &str| {
            let v: Vec<f64> = self
                .runs
                .iter()
                .filter(|r| r.policy == p && !r.shared_llt && r.cores > 1)
                .map(|r| 100.0 * r.shootdown_share)
                .collect();
            span(&v, 2, "%")
        };
        let measured = [
            format!(
                "{pages} pages per shootdown (per workload and core count with shootdowns); {per_second} K IPIs \
                 per second of the cores' time"
            ),
            format!("{unnecessary}% of IPIs unnecessary (where IPIs were sent)"),
            format!(
                "{li} IPIs under linux, {la} under lazy, over all workloads and core counts; {} of the cores' time \
                 in shootdowns under linux, {} under lazy",
                share("linux"),
                share("lazy")
            ),
            format!("{elim}% of STLB misses eliminated"),
        ];
        let mut s = String::from(
            "| published | figure | xlat measures | measured | where the workloads differ |\n|---|---|---|---|---|\n",
        );
        for ((src, fig, what, differ), m) in ECHOES.iter().zip(measured) {
            s += &format!("| {src} | {fig} | {what} | {m} | {differ} |\n");
        }
        s
    }

    /// The report's figures.
    pub fn figures(&self) -> Vec<(String, Figure)> {
        let mut v = Vec::new();
        let mut lines = Vec::new();
        for w in &self.workloads {
            for p in ["linux", "ideal"] {
                let points = CORES
                    .iter()
                    .filter_map(|&n| {
                        let d = if n == 1 { "c1-linux".to_string() } else { format!("c{n}-{p}") };
                        self.run(w, &d).map(|r| (n as f64, r.ipis_per_mlookup))
                    })
                    .collect();
                lines.push(Line { name: format!("{w} {p}"), points });
            }
        }
        v.push((
            "ipis".to_string(),
            Figure::Lines(LineChart {
                title: "IPIs per million lookups as cores grow (lazy sends none)".to_string(),
                x_label: "cores".to_string(),
                y_label: "IPIs per million lookups".to_string(),
                lines,
                log_y: false,
                reference: None,
            }),
        ));
        let cats: Vec<String> = CORES.iter().filter(|&&n| n > 1).map(|n| n.to_string()).collect();
        let series = self
            .workloads
            .iter()
            .map(|w| Series {
                name: w.clone(),
                values: CORES
                    .iter()
                    .filter(|&&n| n > 1)
                    .map(|&n| self.run(w, &format!("c{n}-linux")).filter(|r| r.ipis > 0).map(|r| r.unnecessary_share))
                    .collect(),
            })
            .collect();
        v.push((
            "unnecessary".to_string(),
            Figure::Bars(BarChart {
                title: "Unnecessary share of IPIs under linux".to_string(),
                x_label: "cores".to_string(),
                y_label: "(ipis - necessary) / ipis".to_string(),
                categories: cats.clone(),
                series,
                y_max: Some(1.0),
                reference: Some((0.98, "ABIS: up to 98%".to_string())),
            }),
        ));
        let series = self
            .workloads
            .iter()
            .map(|w| Series {
                name: w.clone(),
                values: self.shared_llt.iter().filter(|x| &x.workload == w).map(|x| Some(x.eliminated_share)).collect(),
            })
            .collect();
        v.push((
            "shared-stlb".to_string(),
            Figure::Bars(BarChart {
                title: "STLB misses a shared STLB eliminates".to_string(),
                x_label: "cores".to_string(),
                y_label: "(private - shared) / private".to_string(),
                categories: cats,
                series,
                y_max: None,
                reference: None,
            }),
        ));
        v
    }

    /// The report: how it was made, the tables and the comparisons.
    pub fn markdown(&self) -> String {
        let refs = self.max_refs.map_or("whole traces".to_string(), |n| format!("at most {n} references per trace"));
        format!(
            "# TLB shootdowns and a shared STLB as cores grow\n\n\
             Workloads: {} ({refs}). Designs: 128-entry 8-way L1I, 64-entry 4-way L1D, 1,536-entry 12-way \
             STLB, 4-level radix table, tagged entries, on 1 to 16 cores (round-robin scheduler, 6 ASIDs per \
             core) under the `linux`, `ideal` and `lazy` shootdown policies, and with the STLB shared by every \
             core. IPI rates are per million lookups and per second of the cores' time at {:.1} GHz, one \
             instruction per cycle with every reference a cache hit and page faults and system calls \
             untimed (an upper bound of the rate: a microbenchmark such as churn spends most of its real \
             time in the kernel); shootdowns cost `[os.shootdown]`'s cited defaults. docs/multicore.md says \
             what each policy does.\n\n\
             ## Tables\n\n<!-- study:tables -->\n{}<!-- /study:tables -->\n\n\
             ## Beside published figures\n\n\
             Context, not claims: the model was not tuned to any of these, and its workloads are not the \
             papers'.\n\n{}",
            self.workloads.join(", "),
            self.clock_mhz / 1000.0,
            self.tables(),
            self.comparisons()
        )
    }

    /// Writes the figures, `results.json` and `report.md` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(Vec<PathBuf>, Vec<String>), ReproError> {
        let value = serde_json::json!({ "study": "shootdowns", "results": self });
        super::write_outputs(dir, self.figures(), &value, &self.markdown())
    }
}
