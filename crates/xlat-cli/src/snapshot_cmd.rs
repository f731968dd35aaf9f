//! `xlat snapshot` (record the address spaces of a process tree) and `xlat run --snapshot`
//! (build each design's page table from one). The work is in `xlat::snapshot`.

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use xlat::snapshot::{self, At};

#[derive(Args)]
pub struct SnapshotArgs {
    /// Snapshot this live process (and its descendants) once, now.
    #[arg(long, value_name = "PID", conflicts_with = "command", required_unless_present = "command")]
    pid: Option<u32>,
    /// Where to write the snapshot (`-` for standard output).
    #[arg(long, short = 'o', value_name = "FILE", default_value = "snapshot.xsnap")]
    output: String,
    /// With a command: keep the snapshot at the tree's peak resident size, or the last one
    /// before the command exits.
    #[arg(long, default_value = "peak", value_parser = ["peak", "exit"], conflicts_with = "pid")]
    at: String,
    /// With a command: milliseconds between resident-size samples.
    #[arg(long, value_name = "MS", default_value_t = 5, conflicts_with = "pid", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    interval_ms: u64,
    /// The command to run and watch (after `--`).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// Set by SIGINT/SIGTERM while a command is watched.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: i32) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

extern "C" {
    fn signal(signum: i32, handler: extern "C" fn(i32)) -> usize;
}

const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;

pub fn cmd_snapshot(a: SnapshotArgs) -> Result<()> {
    let (snap, note) = match a.pid {
        Some(pid) => {
            let snap = snapshot::capture_tree(pid, "now")?;
            (snap, String::new())
        }
        None => record_command(&a)?,
    };
    snapshot::write(&snap, &a.output)?;
    let rss_mb = (snap.processes.iter().map(|p| p.rss_pages).sum::<u64>() * snap.page_size) >> 20;
    eprintln!(
        "xlat: snapshot ({}) of {} process{}: {} regions, {} resident pages (VmRSS {} MB){}{}",
        snap.taken_at,
        snap.processes.len(),
        if snap.processes.len() == 1 { "" } else { "es" },
        snap.regions(),
        snap.resident_pages(),
        rss_mb,
        if a.output == "-" { String::new() } else { format!(" written to {}", a.output) },
        note
    );
    Ok(())
}

/// Runs the command, watches its process tree and returns the snapshot kept and a note on how
/// the command ended.
fn record_command(a: &SnapshotArgs) -> Result<(snapshot::Snapshot, String)> {
    let (prog, args) = a.command.split_first().ok_or_else(|| anyhow!("give --pid PID or a command after `--`"))?;
    let at = if a.at == "exit" { At::Exit } else { At::Peak };
    let mut child =
        std::process::Command::new(prog).args(args).spawn().with_context(|| format!("cannot run '{prog}'"))?;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
    }
    let mut status = None;
    let watched = snapshot::watch(child.id(), at, Duration::from_millis(a.interval_ms), || {
        if INTERRUPTED.load(Ordering::SeqCst) {
            return true;
        }
        match child.try_wait() {
            Ok(Some(s)) => {
                status = Some(s);
                true
            }
            Ok(None) => false,
            Err(_) => true,
        }
    });
    let interrupted = status.is_none() && INTERRUPTED.load(Ordering::SeqCst);
    let note = match status {
        Some(s) => match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
            (Some(c), _) => format!("; '{prog}' exited with status {c}"),
            (None, Some(sig)) => format!("; '{prog}' was killed by signal {sig}"),
            _ => format!("; '{prog}' ended ({s})"),
        },
        None if interrupted => format!("; interrupted, '{prog}' (pid {}) left running", child.id()),
        None => String::new(),
    };
    let mut snap = watched.snapshot.ok_or_else(|| {
        anyhow!(
            "no snapshot of '{prog}': it ended before its memory could be captured ({} resident-size samples){}; nothing written",
            watched.samples,
            note.replacen(';', ",", 1)
        )
    })?;
    if interrupted {
        snap.taken_at = "signal".to_string();
    }
    Ok((snap, format!("; {} samples, {} captures{note}", watched.samples, watched.captures)))
}

/// `xlat run --snapshot FILE`: every design's page table built from the snapshot.
pub fn run_snapshot(path: &str, config_files: &[PathBuf], presets: &[String], common: &super::SimArgs) -> Result<()> {
    if common.csv.is_some() {
        bail!("--csv is not available with --snapshot: use --json");
    }
    if common.max_refs.is_some() {
        bail!("--max-refs applies to traces, not to --snapshot");
    }
    let configs = super::load_designs(config_files, presets)?;
    for (i, c) in configs.iter().enumerate() {
        if configs[..i].iter().any(|o| o.name == c.name) {
            bail!("two designs are named '{}': give each config a distinct `name`", c.name);
        }
    }
    let snap = snapshot::read(Path::new(path))?;
    // A design that cannot hold the snapshot fails alone, as in a run over a trace.
    let mut reports = Vec::new();
    let mut failed = Vec::new();
    for c in &configs {
        match snapshot::evaluate(&snap, std::slice::from_ref(c)) {
            Ok(mut r) => reports.append(&mut r),
            Err(e) => failed.push(format!("{path}: {e}")),
        }
    }
    if reports.is_empty() {
        bail!("{}", failed.join("; "));
    }
    if let Some(out) = &common.json {
        let mut doc = snapshot::json(&snap, path, &reports);
        doc["failed"] = serde_json::json!(failed);
        super::write_output(out, &(serde_json::to_string_pretty(&doc)? + "\n"))?;
    }
    if !common.quiet && common.json.as_deref() != Some("-") {
        out!("{}", snapshot::table(&snap, path, &reports));
        for f in &failed {
            outln!("FAILED {f}");
        }
    }
    match failed.len() {
        0 => Ok(()),
        n => bail!("{n} of {} designs failed, the others are reported: {}", configs.len(), failed.join("; ")),
    }
}
