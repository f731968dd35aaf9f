//! Paper reproductions: `xlat reproduce talluri95 | chapman03 | gray05 | bala94 | swanson98 | all`
//! (docs/reproduce.md), and the study `xlat reproduce shootdowns` (docs/multicore.md).
//!
//! A reproduction runs real programs through the designs a paper compares, writes one CSV file and
//! one chart (SVG and PNG) per figure, a JSON file with every number, and a Markdown report that
//! puts each claim of the paper beside xlat's measurement. Claims are data ([`claim`]): the
//! paper's own numbers, values computed from the measured counters, and a verdict anyone can
//! recompute; where xlat disagrees, the claim says why. This module holds what the reproductions
//! share; each paper is a file of its own, and [`summary`] counts the five.

pub mod bala94;
pub mod chapman03;
pub mod claim;
pub mod gray05;
pub mod shootdowns;
pub mod summary;
pub mod swanson98;
pub mod talluri95;

pub use claim::{Claim, Claims, Expect, Measured, Totals, Verdict};
pub use talluri95::*;

use crate::config::{Config, ConfigError};
use crate::engine::{self, RunOptions, SimError, System};
use crate::plot::Figure;
use crate::snapshot::SnapshotError;
use crate::trace::TraceError;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// A reproduction that could not be completed.
#[derive(Debug, thiserror::Error)]
pub enum ReproError {
    /// A design could not be built.
    #[error("reproduce: {0}")]
    Config(#[from] ConfigError),
    /// A trace could not be read or simulated.
    #[error("reproduce: workload '{workload}': {error}")]
    Sim {
        /// Which workload.
        workload: String,
        /// What went wrong.
        error: SimError,
    },
    /// A trace could not be opened.
    #[error("reproduce: workload '{workload}': {error}")]
    Trace {
        /// Which workload.
        workload: String,
        /// What went wrong.
        error: TraceError,
    },
    /// A snapshot could not be read or evaluated.
    #[error("reproduce: workload '{workload}': {error}")]
    Snapshot {
        /// Which workload.
        workload: String,
        /// What went wrong.
        error: SnapshotError,
    },
    /// An output file could not be written.
    #[error("reproduce: {path}: {message}")]
    Output {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// Nothing to reproduce.
    #[error("reproduce: {0}")]
    Input(String),
}

/// One workload given to a reproduction.
#[derive(Clone, Debug)]
pub struct WorkloadInput {
    /// Name in tables and charts.
    pub name: String,
    /// Its trace (`.xtr` or any format xlat reads).
    pub trace: PathBuf,
    /// Its address-space snapshot, if one was taken.
    pub snapshot: Option<PathBuf>,
    /// Processes in the trace.
    pub processes: u64,
}

/// Options of a reproduction.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Simulate at most this many references of each trace (`None`: whole traces).
    pub max_refs: Option<u64>,
    /// `os.reservation_failure` of every design: the fraction of page reservations that fail as
    /// in fragmented memory (0: none).
    pub reservation_failure: f64,
}

/// The `results.json` of a reproduction: the paper, its results, and its claims with their
/// tolerance and totals.
pub fn results_json(paper: &str, results: &impl Serialize, claims: &claim::Claims) -> serde_json::Value {
    let mut v = serde_json::json!({ "paper": paper, "results": results });
    if let (Some(o), serde_json::Value::Object(c)) = (v.as_object_mut(), claims.json()) {
        o.extend(c);
    }
    v
}

/// Writes a reproduction's figures (`STEM.csv`, `.svg`, `.png`), `results.json` and
/// `report.md` into `dir`; returns the files written and warnings (a PNG that could not be
/// drawn, e.g. without fonts).
pub(crate) fn write_outputs(
    dir: &Path,
    figures: Vec<(String, impl Into<Figure>)>,
    results: &serde_json::Value,
    markdown: &str,
) -> Result<(Vec<PathBuf>, Vec<String>), ReproError> {
    let err = |p: &Path, m: String| ReproError::Output { path: p.display().to_string(), message: m };
    std::fs::create_dir_all(dir).map_err(|e| err(dir, e.to_string()))?;
    let mut files = Vec::new();
    let mut warnings = Vec::new();
    for (stem, chart) in figures {
        let chart: Figure = chart.into();
        let csv = dir.join(format!("{stem}.csv"));
        std::fs::write(&csv, chart.csv()).map_err(|e| err(&csv, e.to_string()))?;
        files.push(csv);
        let svg = dir.join(format!("{stem}.svg"));
        chart.write_svg(&svg).map_err(|e| err(&svg, e.to_string()))?;
        files.push(svg);
        let png = dir.join(format!("{stem}.png"));
        match chart.write_png(&png) {
            Ok(()) => files.push(png),
            Err(e) => warnings.push(format!("{}: {e}", png.display())),
        }
    }
    let json = dir.join("results.json");
    std::fs::write(&json, serde_json::to_string_pretty(results).expect("serialisable") + "\n")
        .map_err(|e| err(&json, e.to_string()))?;
    files.push(json);
    let md = dir.join("report.md");
    std::fs::write(&md, markdown).map_err(|e| err(&md, e.to_string()))?;
    files.push(md);
    Ok((files, warnings))
}

/// Simulation threads a reproduction spreads each pass's designs over (`xlat reproduce --jobs`).
static JOBS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

/// Sets the simulation threads of every later reproduction in this process (at least 1; the
/// results do not depend on it: every design sees the same references in the same order).
pub fn set_jobs(n: usize) {
    JOBS.store(n.max(1), std::sync::atomic::Ordering::Relaxed);
}

/// Simulates `systems` over `reader` on the threads [`set_jobs`] gave.
pub(crate) fn simulate(
    reader: &mut dyn crate::trace::TraceReader,
    systems: &mut [System],
    opts: RunOptions,
) -> Result<engine::RunSummary, SimError> {
    engine::run_jobs(reader, systems, opts, JOBS.load(std::sync::atomic::Ordering::Relaxed), |_| {})
}

/// Runs `configs` over `trace` in one pass (at most `max_refs` references); a design that
/// fails fails the reproduction.
pub(crate) fn run_designs(
    workload: &str,
    trace: &Path,
    configs: &[Config],
    max_refs: Option<u64>,
) -> Result<Vec<System>, ReproError> {
    let mut systems: Vec<System> = configs
        .iter()
        .map(System::new)
        .collect::<Result<_, _>>()
        .map_err(|e| ReproError::Input(format!("design: {e}")))?;
    let mut reader = crate::trace::open::open_reader_inline(&trace.to_string_lossy(), None)
        .map_err(|error| ReproError::Trace { workload: workload.to_string(), error })?
        .0;
    simulate(&mut *reader, &mut systems, RunOptions { max_refs })
        .map_err(|error| ReproError::Sim { workload: workload.to_string(), error })?;
    if let Some(f) = systems.iter_mut().find_map(|s| s.take_failure()) {
        return Err(ReproError::Sim { workload: workload.to_string(), error: f.error.into() });
    }
    Ok(systems)
}

/// Traces `argv` (QEMU user mode, docs/tracing.md; with `children`, the programs it execs too)
/// into `cache/NAME.xtr`, unless a trace of that name is there already (the name must say
/// everything that makes it differ). The program's output goes to `cache/NAME.out`.
pub(crate) fn trace_program(cache: &Path, name: &str, argv: &[String], children: bool) -> Result<PathBuf, ReproError> {
    use crate::trace::TraceWriter;
    let path = cache.join(format!("{name}.xtr"));
    if path.is_file() {
        return Ok(path);
    }
    let err = |m: String| ReproError::Input(format!("tracing {name}: {m}"));
    std::fs::create_dir_all(cache).map_err(|e| err(format!("{}: {e}", cache.display())))?;
    let spec = crate::tracer::TraceSpec {
        command: argv.iter().map(Into::into).collect(),
        backend: crate::tracer::Backend::Qemu,
        children,
        quantum: crate::tracer::DEFAULT_QUANTUM,
        stdout: crate::tracer::ProgramOutput::File(cache.join(format!("{name}.out"))),
    };
    let partial = cache.join(format!("{name}.xtr.partial"));
    let opts = crate::trace::xtr::XtrOptions {
        metadata: vec![("command".to_string(), argv.join(" ")), ("backend".to_string(), "qemu".to_string())],
        ..crate::trace::xtr::XtrOptions::default()
    };
    let out = crate::trace::open::create_output(&partial.to_string_lossy()).map_err(|e| err(e.to_string()))?;
    let mut writer = crate::trace::xtr::XtrWriter::with_options(out, &path.to_string_lossy(), opts)
        .map_err(|e| err(e.to_string()))?;
    let mut reader = crate::tracer::spawn(&spec).map_err(|e| err(e.to_string()))?;
    let (copied, outcome) = reader.copy_into(&mut writer);
    copied.map_err(|e| err(e.to_string()))?;
    outcome.write_notes(&mut writer).map_err(|e| err(e.to_string()))?;
    Box::new(writer).finish().map_err(|e| err(e.to_string()))?;
    if outcome.status_text() != "0" {
        let _ = std::fs::remove_file(&partial);
        return Err(err(format!("the program exited with status {}", outcome.status_text())));
    }
    std::fs::rename(&partial, &path).map_err(|e| err(format!("{}: {e}", path.display())))?;
    Ok(path)
}

/// A preset with some keys changed (`edit` gets the parsed config).
pub(crate) fn preset_with(name: &str, new_name: &str, edit: impl FnOnce(&mut Config)) -> Result<Config, ReproError> {
    let mut c = Config::preset(name)?;
    c.name = new_name.to_string();
    edit(&mut c);
    c.validate().map_err(|e| ReproError::Input(format!("design {new_name}: {e}")))?;
    Ok(c)
}
