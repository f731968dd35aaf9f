//! `xlat reproduce PAPER`: reproduce a paper's figures on the workload suite. The work is in
//! `xlat::reproduce`; this file picks and builds the workloads and prints the outcome.

use crate::workloads_cmd::{default_dir, MANIFEST, MANIFEST_NAME};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::Instant;
use xlat::reproduce::claim::Claims;
use xlat::reproduce::{self, Options, WorkloadInput};
use xlat::workloads::{self, Manifest, Size};

/// The workloads of `--quick`: small, quick to trace, single- and multi-process.
const QUICK: &[&str] = &["gzip", "sort", "sqlite3", "python-dict", "sparse-heap", "pipeline"];
/// The workloads of gray05's `--quick` (warehouse: DBT-2's TLB pressure).
const QUICK_GRAY05: &[&str] = &["gzip", "sort", "sqlite3", "pipeline", "warehouse"];
/// swanson98's workloads: quick, and full size (cc1 takes half a minute to trace even small).
const QUICK_SWANSON98: &[&str] = &["radix", "em3d", "compress", "sqlite3"];
const SWANSON98: &[&str] = &["radix", "em3d", "compress", "cc1", "sqlite3"];
/// The shootdown study's workloads (threads and processes that unmap, protect and discard).
const SHOOTDOWNS: &[&str] = &["churn", "xz-mt", "shmserve"];
/// References simulated per workload in the shootdown study's `--quick`.
const QUICK_SHOOTDOWN_REFS: u64 = 8_000_000;
/// References simulated per workload in `--quick`.
const QUICK_REFS: u64 = 4_000_000;

#[derive(Args)]
pub struct ReproduceArgs {
    /// The paper: talluri95 (page tables, superpage and subblock TLBs), chapman03 (Itanium
    /// short and long VHPT, TLB-entry sharing), gray05 (hardware walker, long VHPT size),
    /// bala94 (Mach 3.0's kernel TLB misses, PTLB and STLB), swanson98 (superpages through
    /// shadow addresses and a memory-controller TLB).
    /// `all` runs the five and writes a summary (summary.md, summary.json) beside their reports
    /// (one directory each under --out). `shootdowns` is the study of docs/multicore.md (TLB
    /// shootdowns under each policy and a shared last-level TLB as cores grow; not part of `all`).
    #[arg(value_parser = ["talluri95", "chapman03", "gray05", "bala94", "swanson98", "shootdowns", "all"])]
    paper: String,
    /// Output directory for CSV files, charts (SVG, PNG), results.json and report.md
    /// (default: reproduce-PAPER; reproduce-all for `all`).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// A few small workloads (chapman03: a few points of each sweep), the first 4 M references
    /// of each (swanson98: whole small traces): minutes instead of hours (what the test command
    /// runs).
    #[arg(long)]
    quick: bool,
    /// Suite size (default: small with --quick, else full).
    #[arg(long, value_parser = ["small", "full"])]
    size: Option<String>,
    /// Workload cache directory (as for `xlat workloads build`).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Only these workloads (comma-separated names).
    #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
    only: Vec<String>,
    /// Simulate at most N references of each trace.
    #[arg(long, value_name = "N")]
    max_refs: Option<u64>,
    /// With `all`: keep the papers whose DIR/PAPER/results.json an earlier run wrote (their
    /// claims are read from it) and run only the others, e.g. after an interrupted full-size run.
    #[arg(long)]
    resume: bool,
    /// Simulate each pass's designs on up to N threads (default: every core); results do not
    /// depend on N.
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,
    /// Fraction of page reservations that fail as in fragmented memory (0 to 1; default 0).
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    reservation_failure: f64,
}

/// The papers `xlat reproduce all` runs, in order.
const PAPERS: &[&str] = &["talluri95", "chapman03", "gray05", "bala94", "swanson98"];

/// What one reproduction produced.
struct Outcome {
    /// Workloads or runs, and which.
    n: usize,
    what: &'static str,
    claims: Claims,
    files: Vec<PathBuf>,
    warnings: Vec<String>,
}

pub fn cmd_reproduce(a: ReproduceArgs) -> Result<()> {
    if !(0.0..=1.0).contains(&a.reservation_failure) {
        bail!("--reservation-failure must be in [0, 1], got {}", a.reservation_failure);
    }
    let size = match a.size.as_deref() {
        Some(s) => Size::from_name(s).ok_or_else(|| anyhow!("--size must be small or full"))?,
        None if a.quick => Size::Small,
        None => Size::Full,
    };
    let dir = a.dir.clone().unwrap_or_else(|| default_dir(size));
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from(format!("reproduce-{}", a.paper)));
    reproduce::set_jobs(
        a.jobs.map(|j| j as usize).unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
    );
    let started = Instant::now();
    if a.paper == "shootdowns" {
        if a.resume {
            bail!("--resume keeps the papers of an earlier `reproduce all`; it needs `all`");
        }
        let inputs = suite_inputs("shootdowns", &a, size, &dir)?;
        let max_refs = a.max_refs.or(a.quick.then_some(QUICK_SHOOTDOWN_REFS));
        let res = reproduce::shootdowns::shootdowns(&inputs, max_refs, &mut |m| eprintln!("{m}"))?;
        let (files, warnings) = res.write(&out)?;
        for w in &warnings {
            eprintln!("xlat: warning: {w}");
        }
        outln!(
            "shootdowns: {} workloads, {} designs each in {:.1} s; report: {}",
            res.workloads.len(),
            res.runs.len() / res.workloads.len().max(1),
            started.elapsed().as_secs_f64(),
            out.join("report.md").display()
        );
        out!("{}", res.tables());
        outln!("files: {}", files.len());
        return Ok(());
    }
    if a.paper != "all" {
        if a.resume {
            bail!("--resume keeps the papers of an earlier `reproduce all`; it needs `all`");
        }
        let o = run_paper(&a.paper, &a, size, &dir, &out)?;
        return report(&a.paper, &o, started, &out);
    }
    if !a.only.is_empty() {
        bail!("--only names workloads of one paper; it cannot be used with `reproduce all`");
    }
    let mut rows = Vec::new();
    for paper in PAPERS {
        let t = Instant::now();
        let results = out.join(paper).join("results.json");
        if a.resume && results.is_file() {
            let claims = read_claims(&results)?;
            outln!("{paper}: kept from {}; {}", results.display(), claims.totals().sentence());
            rows.push((paper.to_string(), claims.totals()));
            continue;
        }
        let o = run_paper(paper, &a, size, &dir, &out.join(paper))?;
        report(paper, &o, t, &out.join(paper))?;
        rows.push((paper.to_string(), o.claims.totals()));
    }
    let summary = reproduce::summary::Summary {
        size: size.name().to_string(),
        quick: a.quick,
        max_refs: a.max_refs,
        papers: rows,
    };
    let files = summary.write(&out).map_err(|e| anyhow!(e))?;
    outln!("all: {} papers in {:.1} s; summary: {}", PAPERS.len(), started.elapsed().as_secs_f64(), files[0].display());
    out!("{}", summary.table());
    Ok(())
}

/// The claims of a `results.json` an earlier run wrote.
fn read_claims(path: &Path) -> Result<Claims> {
    let text = std::fs::read_to_string(path).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    // results.json's top level holds `tolerance` and `claims` beside the paper's results.
    serde_json::from_str(&text)
        .map_err(|e| anyhow!("{}: {e} (written by an older xlat? run without --resume)", path.display()))
}

/// Runs one paper's reproduction and writes its files into `out`.
fn run_paper(paper: &str, a: &ReproduceArgs, size: Size, dir: &Path, out: &Path) -> Result<Outcome> {
    let outcome = |n: usize, what, claims, (files, warnings): (Vec<PathBuf>, Vec<String>)| Outcome {
        n,
        what,
        claims,
        files,
        warnings,
    };
    if paper == "chapman03" {
        let plan = reproduce::chapman03::Plan::new(a.quick);
        let res = reproduce::chapman03::chapman03(plan, &dir.join("chapman03"), &mut |m| eprintln!("{m}"))?;
        let claims = res.claims();
        return Ok(outcome(res.runs.len(), "runs", claims, res.write(out)?));
    }
    if paper == "bala94" {
        let plan = reproduce::bala94::Plan::new(a.quick);
        let res = reproduce::bala94::bala94(&plan, &dir.join("bala94"), &mut |m| eprintln!("{m}"))?;
        let claims = res.claims();
        return Ok(outcome(res.workloads.len(), "workloads", claims, res.write(out)?));
    }
    let inputs = suite_inputs(paper, a, size, dir)?;
    let opts = Options {
        // swanson98's programs remap their data after setting it up: whole traces.
        max_refs: a.max_refs.or(if a.quick && paper != "swanson98" { Some(QUICK_REFS) } else { None }),
        reservation_failure: a.reservation_failure,
    };
    if paper == "swanson98" {
        let res = reproduce::swanson98::swanson98(&inputs, &opts, !a.quick, &mut |m| eprintln!("{m}"))?;
        let claims = res.claims();
        return Ok(outcome(res.workloads.len(), "workloads", claims, res.write(out)?));
    }
    if paper == "gray05" {
        let res = reproduce::gray05::gray05(&inputs, &opts, &mut |m| eprintln!("{m}"))?;
        let claims = res.claims();
        return Ok(outcome(res.workloads.len(), "workloads", claims, res.write(out)?));
    }
    let res = reproduce::talluri95(&inputs, &opts, &mut |m| eprintln!("{m}"))?;
    let claims = res.claims();
    Ok(outcome(res.workloads.len(), "workloads", claims, res.write(out)?))
}

/// The suite workloads `paper` runs on, built first where they are missing.
fn suite_inputs(paper: &str, a: &ReproduceArgs, size: Size, dir: &Path) -> Result<Vec<WorkloadInput>> {
    let manifest = Manifest::parse(MANIFEST, MANIFEST_NAME)?;
    let only: Vec<String> = if !a.only.is_empty() {
        a.only.clone()
    } else if a.quick && paper == "gray05" {
        QUICK_GRAY05.iter().map(|s| s.to_string()).collect()
    } else if paper == "shootdowns" {
        SHOOTDOWNS.iter().map(|s| s.to_string()).collect()
    } else if paper == "swanson98" {
        (if a.quick { QUICK_SWANSON98 } else { SWANSON98 }).iter().map(|s| s.to_string()).collect()
    } else if a.quick {
        QUICK.iter().map(|s| s.to_string()).collect()
    } else {
        Vec::new()
    };
    let selected = manifest.select(&only).map_err(|e| anyhow!(e))?;
    let mut inputs = Vec::new();
    for w in selected {
        if let Some(e) = w.missing() {
            if a.only.is_empty() {
                eprintln!("xlat: warning: skipped: {e}");
                continue;
            }
            return Err(e.into());
        }
        let sidecar = match workloads::up_to_date(w, size, dir) {
            Some(s) => s,
            None => {
                eprintln!("{}: building ({}, {} backend)...", w.name, size.name(), w.backend);
                workloads::build(w, size, dir, true)?
            }
        };
        if sidecar.references == 0 {
            bail!("workload '{}': the trace holds no references (exit status {})", w.name, sidecar.exit_status);
        }
        let snap = workloads::snapshot_path(dir, &w.name);
        inputs.push(WorkloadInput {
            name: w.name.clone(),
            trace: workloads::trace_path(dir, &w.name),
            snapshot: snap.is_file().then_some(snap),
            processes: sidecar.processes,
        });
    }
    Ok(inputs)
}

/// Prints a reproduction's outcome: one line, then one per claim.
fn report(paper: &str, o: &Outcome, started: Instant, out: &Path) -> Result<()> {
    for w in &o.warnings {
        eprintln!("xlat: warning: {w}");
    }
    let t = o.claims.totals();
    outln!(
        "{paper}: {} {} in {:.1} s; {}; report: {}",
        o.n,
        o.what,
        started.elapsed().as_secs_f64(),
        t.sentence(),
        out.join("report.md").display()
    );
    for c in &o.claims.claims {
        outln!("  [{}] {}: {}", c.verdict.name(), c.paper, c.measured_text());
    }
    outln!("files: {}", o.files.len());
    Ok(())
}
