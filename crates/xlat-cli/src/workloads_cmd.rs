//! `xlat workloads build|list`: the reproducible suite of real programs (`workloads/`). The
//! work is in `xlat::workloads`.

use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use std::time::Instant;
use xlat::workloads::{self, Manifest, Size};

/// The manifest built into the binary (`workloads/manifest.toml`).
pub(crate) const MANIFEST: &str = include_str!("../../../workloads/manifest.toml");
pub(crate) const MANIFEST_NAME: &str = "workloads/manifest.toml (built in)";

#[derive(Args)]
pub struct WorkloadsArgs {
    #[command(subcommand)]
    command: WorkloadsCommand,
}

#[derive(Subcommand)]
enum WorkloadsCommand {
    /// Generate the inputs, trace and snapshot each workload into the cache directory.
    Build(BuildArgs),
    /// Show the workloads with their reference counts and footprints (if built).
    List(CommonArgs),
    /// Print the path of one of the suite's own C programs (workloads/src), compiling it with cc
    /// first if needed, to run it by hand: `xlat trace -- "$(xlat workloads program extreme)" ...`.
    Program(ProgramArgs),
}

#[derive(Args)]
struct ProgramArgs {
    /// The program (workloads/src/NAME.c).
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(workloads::PROGRAMS.iter().map(|(n, _)| *n)))]
    name: String,
}

#[derive(Args)]
struct CommonArgs {
    /// Suite size.
    #[arg(long, default_value = "small", value_parser = ["small", "full"])]
    size: String,
    /// Cache directory (default: $XDG_CACHE_HOME/xlat/workloads/SIZE if XDG_CACHE_HOME is set,
    /// else target/workloads/SIZE).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// A manifest file instead of the built-in workloads/manifest.toml.
    #[arg(long, value_name = "FILE")]
    manifest: Option<PathBuf>,
    /// Only these workloads (comma-separated names).
    #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
    only: Vec<String>,
}

#[derive(Args)]
struct BuildArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Skip (with a warning) workloads whose programs are not installed, instead of failing.
    #[arg(long)]
    skip_missing: bool,
    /// Rebuild even workloads that are up to date.
    #[arg(long)]
    force: bool,
    /// Traces only, no snapshots.
    #[arg(long)]
    no_snapshot: bool,
}

pub fn cmd_workloads(a: WorkloadsArgs) -> Result<()> {
    match a.command {
        WorkloadsCommand::Build(b) => build(b),
        WorkloadsCommand::List(c) => list(c),
        WorkloadsCommand::Program(p) => {
            let path = workloads::program(&p.name).map_err(|e| anyhow!(e))?;
            outln!("{}", path.display());
            Ok(())
        }
    }
}

fn setup(c: &CommonArgs) -> Result<(Manifest, Size, PathBuf)> {
    let manifest = match &c.manifest {
        Some(p) => Manifest::load(p)?,
        None => Manifest::parse(MANIFEST, MANIFEST_NAME)?,
    };
    let size = Size::from_name(&c.size).ok_or_else(|| anyhow!("--size must be small or full"))?;
    let dir = match &c.dir {
        Some(d) => d.clone(),
        None => default_dir(size),
    };
    Ok((manifest, size, dir))
}

/// `$XDG_CACHE_HOME/xlat/workloads/SIZE`, else `target/workloads/SIZE`.
pub(crate) fn default_dir(size: Size) -> PathBuf {
    match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(x) => Path::new(&x).join("xlat/workloads").join(size.name()),
        None => Path::new("target/workloads").join(size.name()),
    }
}

fn build(a: BuildArgs) -> Result<()> {
    let (manifest, size, dir) = setup(&a.common)?;
    let selected = manifest.select(&a.common.only).map_err(|e| anyhow!(e))?;
    // Every missing program is reported before anything is built.
    let mut todo = Vec::new();
    for w in selected {
        match w.missing() {
            Some(e) if a.skip_missing => eprintln!("xlat: warning: skipped: {e}"),
            Some(e) => return Err(e.into()),
            None => todo.push(w),
        }
    }
    let started = Instant::now();
    let (mut built, mut skipped) = (0, 0);
    for w in todo {
        if !a.force {
            if let Some(s) = workloads::up_to_date(w, size, &dir) {
                eprintln!("{}: up to date ({} references), skipped", w.name, s.references);
                skipped += 1;
                continue;
            }
        }
        eprintln!("{}: building ({}, {} backend)...", w.name, size.name(), w.backend);
        let t = Instant::now();
        let s = workloads::build(w, size, &dir, !a.no_snapshot)?;
        if s.references == 0 {
            bail!("workload '{}': the trace holds no references (program exit status {})", w.name, s.exit_status);
        }
        eprintln!(
            "{}: {} references, {} pages ({} KB), {} process{}, exit status {} in {:.1} s",
            w.name,
            s.references,
            s.distinct_pages,
            s.footprint_bytes >> 10,
            s.processes,
            if s.processes == 1 { "" } else { "es" },
            s.exit_status,
            t.elapsed().as_secs_f64()
        );
        if s.exit_status != "0" {
            eprintln!(
                "xlat: warning: {}: the program exited with status {} (see {})",
                w.name,
                s.exit_status,
                dir.join(format!("{}.out", w.name)).display()
            );
        }
        built += 1;
    }
    eprintln!(
        "workloads ({}): {built} built, {skipped} up to date in {:.1} s; files in {}",
        size.name(),
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    Ok(())
}

fn list(c: CommonArgs) -> Result<()> {
    let (manifest, size, dir) = setup(&c)?;
    let selected = manifest.select(&c.only).map_err(|e| anyhow!(e))?;
    outln!("workloads ({}) in {}", size.name(), dir.display());
    outln!(
        "{:<12} {:<16} {:<7} {:>5} {:>12} {:>11} {:>11} {:>10} {:>10} {:>9} {:>10} {:>6}",
        "name",
        "package",
        "backend",
        "procs",
        "references",
        "ifetch",
        "load",
        "store",
        "modify",
        "pages",
        "footprint",
        "exit"
    );
    for w in selected {
        let head = format!("{:<12} {:<16} {:<7}", w.name, w.package, w.backend);
        match (workloads::up_to_date(w, size, &dir), workloads::read_sidecar(&dir, &w.name)) {
            (Some(s), _) => {
                let k = |n: &str| s.by_kind.get(n).copied().unwrap_or(0);
                outln!(
                    "{head} {:>5} {:>12} {:>11} {:>11} {:>10} {:>10} {:>9} {:>10} {:>6}",
                    s.processes,
                    s.references,
                    k("ifetch"),
                    k("load"),
                    k("store"),
                    k("modify"),
                    s.distinct_pages,
                    format!("{}K", s.footprint_bytes >> 10),
                    s.exit_status
                );
            }
            (None, Some(_)) => outln!("{head} stale (the manifest entry changed): run `xlat workloads build`"),
            (None, None) => outln!("{head} not built"),
        }
    }
    Ok(())
}
