//! `xlat trace`: run a program under a tracer and write its references as `.xtr`; and the
//! online form of `xlat run -- CMD`, which simulates the same records without a file.

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use std::ffi::OsString;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use xlat::trace::open::{create_output, Compression};
use xlat::trace::xtr::{XtrOptions, XtrWriter};
use xlat::trace::{self, ReaderStats, Record, TraceError, TraceReader, TraceWriter};
use xlat::tracer::{self, Backend, ChannelReader, ProgramOutput, TraceOutcome, TraceSpec};

#[derive(Args)]
pub struct TraceArgs {
    /// Output trace (`.xtr`, zstd-compressed; `.xtr.gz`/`.xtr.xz`/`.xtr.lz4` for other compression).
    /// Default: the program's name with `.xtr`.
    #[arg(long, short = 'o', value_name = "OUT.xtr")]
    output: Option<String>,
    #[command(flatten)]
    pub tracer: TracerArgs,
    /// No progress line on standard error.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// The program and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// How a program is traced (shared by `xlat trace` and `xlat run -- CMD`).
#[derive(Args, Clone)]
pub struct TracerArgs {
    /// Tracing backend: QEMU user mode with xlat's plugin, or valgrind's lackey (slower).
    #[arg(long, default_value = "qemu", value_parser = ["qemu", "lackey"])]
    backend: String,
    /// Also trace programs started with execve (each exec'd image gets its own ASID). On by
    /// default when the command is a script (`#!`), whose interpreter would otherwise be all
    /// that is traced.
    #[arg(long, conflicts_with = "no_children")]
    children: bool,
    /// Trace only the command's own image, even when it is a script.
    #[arg(long)]
    no_children: bool,
    /// Scheduling quantum: references a process issues before the next one runs.
    #[arg(long, value_name = "N", default_value_t = tracer::DEFAULT_QUANTUM)]
    quantum: u64,
}

impl TracerArgs {
    fn spec(&self, command: &[OsString]) -> Result<TraceSpec> {
        let backend = Backend::from_name(&self.backend).ok_or_else(|| anyhow!("unknown backend '{}'", self.backend))?;
        if self.quantum == 0 {
            bail!("--quantum must be at least 1 reference");
        }
        let children = self.children || (!self.no_children && is_script(&command[0]));
        if children && !self.children {
            eprintln!(
                "xlat: note: {} is a script (#!): following the programs it execs, as with --children (--no-children traces the interpreter alone)",
                command[0].to_string_lossy()
            );
        }
        Ok(TraceSpec {
            command: command.to_vec(),
            backend,
            children,
            quantum: self.quantum,
            stdout: ProgramOutput::Inherit,
        })
    }
}

/// One line on standard error per program a traced process exec'd without it being traced.
fn warn_untraced(outcome: &TraceOutcome) {
    for e in &outcome.untraced_execs {
        let (pid, path) = e.split_once(' ').unwrap_or(("?", e));
        eprintln!(
            "xlat: warning: process {pid} exec'd {path}, which is not traced (--children follows exec'd programs)"
        );
    }
}

/// True if `program`, found as `execvp` would find it, is a `#!` script (a shell script, or a
/// shim such as pyenv's `python3`).
fn is_script(program: &std::ffi::OsStr) -> bool {
    use std::io::Read;
    let path = std::path::Path::new(program);
    let found = if program.to_string_lossy().contains('/') {
        Some(path.to_path_buf())
    } else {
        std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p).map(|d| d.join(path)).find(|c| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::metadata(c).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
        })
    };
    let mut magic = [0u8; 2];
    found
        .and_then(|f| std::fs::File::open(f).ok())
        .is_some_and(|mut f| f.read_exact(&mut magic).is_ok() && &magic == b"#!")
}

fn start(spec: &TraceSpec) -> Result<ChannelReader> {
    let reader = tracer::spawn(spec)?;
    if spec.backend == Backend::Lackey {
        eprintln!(
            "xlat: note: the lackey backend is slower (about 2-5 M references/s, valgrind's own speed) and reports no map/unmap/fork events"
        );
    }
    Ok(reader)
}

fn describe_counts(by_kind: &[u64; 4], events: u64, outcome: &TraceOutcome) -> String {
    let refs: u64 = by_kind.iter().sum();
    format!(
        "{refs} references (ifetch {}, load {}, store {}, modify {}), {events} events, {} process{}",
        by_kind[0],
        by_kind[1],
        by_kind[2],
        by_kind[3],
        outcome.stats.processes,
        if outcome.stats.processes == 1 { "" } else { "es" }
    )
}

pub fn cmd_trace(a: TraceArgs) -> Result<()> {
    let spec = a.tracer.spec(&a.command)?;
    let output = match &a.output {
        Some(o) => o.clone(),
        None => {
            let prog = std::path::Path::new(&a.command[0]);
            format!("{}.xtr", prog.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or("trace".into()))
        }
    };
    if output == "-" {
        bail!("-o -: the traced program's output goes to standard output; write the trace to a file");
    }
    if trace::open::format_from_name(&output).is_some_and(|f| f != trace::Format::Xtr) {
        bail!("{output}: xlat trace writes xtr (name it OUT.xtr; `xlat convert` makes other formats)");
    }
    let compression = match Compression::from_name(&output) {
        Compression::None => Compression::Zstd,
        c => c,
    };
    let command_text: Vec<String> = a.command.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    let opts = XtrOptions {
        // Compressed on its own thread (below), so encoding and compression overlap.
        compression: Compression::None,
        metadata: vec![
            ("command".to_string(), command_text.join(" ")),
            ("backend".to_string(), spec.backend.name().to_string()),
            ("quantum".to_string(), spec.quantum.to_string()),
        ],
        ..XtrOptions::default()
    };
    // Written next to the output and renamed at the end: a failed trace leaves nothing.
    let out = xlat::output::Output::start(&output, "");
    let partial = out.path().to_string_lossy().into_owned();
    let written = Arc::new(AtomicU64::new(0));
    let file: Box<dyn Write + Send> = Box::new(CountingWrite { inner: create_output(&partial)?, n: written.clone() });
    let (sink, compressor) = compress_on_thread(file, compression, &output)?;
    let mut writer = XtrWriter::with_options(sink, &output, opts)?;
    let started = Instant::now();
    let mut reader = match start(&spec) {
        Ok(r) => r,
        Err(e) => {
            drop(writer);
            return Err(e);
        }
    };
    let bar = super::term::progress(a.quiet, "{spinner} {elapsed} {human_pos} records traced, {msg} written");
    let (copied, outcome) = reader.copy_into(&mut Counted {
        inner: &mut writer,
        bar: bar.as_ref(),
        written: &written,
        throttle: super::term::Throttle::new(),
        records: 0,
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let result: Result<()> = copied.map_err(Into::into);
    warn_untraced(&outcome);
    let result = result.and_then(|()| {
        // The trace says what it lacks (`xlat info` shows it).
        outcome.write_notes(&mut writer)?;
        drop(writer.finish_into_inner()?);
        compressor.join().map_err(|_| anyhow!("{output}: the compression thread failed"))??;
        Ok(())
    });
    result?;
    out.commit().with_context(|| format!("{output}: cannot write"))?;
    let (by_kind, events) = (outcome.stats.by_kind, outcome.stats.events);
    let seconds = started.elapsed().as_secs_f64();
    let refs: u64 = by_kind.iter().sum();
    for n in &outcome.notes {
        eprintln!("xlat: note: {n}");
    }
    eprintln!(
        "traced {} in {seconds:.2} s ({:.1} M references/s); program exit status {}; wrote {output}",
        describe_counts(&by_kind, events, &outcome),
        refs as f64 / seconds.max(1e-9) / 1e6,
        outcome.status_text(),
    );
    Ok(())
}

/// The records a writer is given, on a progress line with the bytes written to the file so far.
struct Counted<'a> {
    inner: &'a mut dyn TraceWriter,
    bar: Option<&'a indicatif::ProgressBar>,
    written: &'a AtomicU64,
    throttle: super::term::Throttle,
    records: u64,
}

impl TraceWriter for Counted<'_> {
    fn write(&mut self, records: &[Record]) -> Result<(), TraceError> {
        self.inner.write(records)?;
        self.records += records.len() as u64;
        if let Some(b) = self.bar {
            b.set_position(self.records);
            if self.throttle.due() {
                b.set_message(indicatif::HumanBytes(self.written.load(Ordering::Relaxed)).to_string());
            }
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(), TraceError> {
        Ok(())
    }
}

/// A file that counts the bytes written to it.
struct CountingWrite {
    inner: Box<dyn Write + Send>,
    n: Arc<AtomicU64>,
}

impl Write for CountingWrite {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let k = self.inner.write(data)?;
        self.n.fetch_add(k as u64, Ordering::Relaxed);
        Ok(k)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Bytes sent to a compressing thread in blocks.
struct ToThread {
    tx: Option<std::sync::mpsc::SyncSender<Vec<u8>>>,
    buf: Vec<u8>,
}

const BLOCK: usize = 1 << 18;

impl std::io::Write for ToThread {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= BLOCK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl ToThread {
    fn send(&mut self) -> std::io::Result<()> {
        let full = std::mem::replace(&mut self.buf, Vec::with_capacity(BLOCK + 4096));
        match &self.tx {
            Some(tx) if tx.send(full).is_ok() => Ok(()),
            _ => Err(std::io::Error::other("the compression thread stopped")),
        }
    }
}

impl Drop for ToThread {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            let _ = self.send();
        }
        self.tx = None;
    }
}

type Compressor = std::thread::JoinHandle<Result<()>>;

/// A byte sink whose data a background thread compresses into `file`.
fn compress_on_thread(
    file: Box<dyn std::io::Write + Send>,
    compression: Compression,
    name: &str,
) -> Result<(Box<dyn std::io::Write + Send>, Compressor)> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(8);
    let mut out =
        trace::open::CompressedWriter::new(file, compression).with_context(|| format!("{name}: cannot write"))?;
    let name = name.to_string();
    let handle = std::thread::spawn(move || -> Result<()> {
        for block in rx {
            out.write_all(&block).with_context(|| format!("{name}: cannot write"))?;
        }
        out.finish().and_then(|mut f| f.flush()).with_context(|| format!("{name}: cannot write"))?;
        Ok(())
    });
    Ok((Box::new(ToThread { tx: Some(tx), buf: Vec::with_capacity(BLOCK + 4096) }), handle))
}

/// A reader that also writes every record it hands out to an xtr file (`xlat run --tee`).
struct Tee<'a> {
    inner: &'a mut ChannelReader,
    writer: Option<XtrWriter<Box<dyn std::io::Write + Send>>>,
    error: Option<TraceError>,
}

impl TraceReader for Tee<'_> {
    fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, TraceError> {
        let n = self.inner.read_batch(out, max)?;
        if let Some(w) = &mut self.writer {
            if let Err(e) = w.write(out) {
                self.error = Some(e);
                self.writer = None;
            }
        }
        Ok(n)
    }

    fn stats(&self) -> ReaderStats {
        self.inner.stats()
    }

    fn busy_threads(&self) -> usize {
        self.inner.busy_threads()
    }
}

/// `xlat run [--config|--preset] -- CMD ARGS`: simulates the records as the program runs.
pub fn run_online(
    config_files: &[std::path::PathBuf],
    presets: &[String],
    tracer_args: &TracerArgs,
    command: &[OsString],
    tee: Option<&str>,
    common: &super::SimArgs,
) -> Result<()> {
    let configs = super::load_designs(config_files, presets)?;
    let mut spec = tracer_args.spec(command)?;
    if common.json.as_deref() == Some("-") || common.csv.as_deref() == Some("-") {
        // The report owns standard output: the program's goes to standard error.
        spec.stdout = ProgramOutput::Stderr;
    }
    let writer = match tee {
        Some(path) => Some(XtrWriter::new(create_output(path)?, path)?),
        None => None,
    };
    let mut reader = start(&spec)?;
    let name = format!("{} (traced with {})", command[0].to_string_lossy(), spec.backend.name());
    let mut tee_reader = Tee { inner: &mut reader, writer, error: None };
    let result = super::simulate(&configs, &mut tee_reader, &name, "online", common);
    let (writer, error) = (tee_reader.writer.take(), tee_reader.error.take());
    let outcome = reader.outcome();
    warn_untraced(&outcome);
    result?;
    if let Some(e) = error {
        return Err(e.into());
    }
    if let Some(w) = writer {
        w.finish_into_inner()?.flush().context("cannot write the --tee trace")?;
    }
    if !common.quiet {
        let stopped = common.max_refs.is_some() && !outcome.status.is_some_and(|s| s.success());
        eprintln!(
            "traced {} process{} with {}; program exit status {}{}",
            outcome.stats.processes,
            if outcome.stats.processes == 1 { "" } else { "es" },
            spec.backend.name(),
            outcome.status_text(),
            if stopped { " (stopped at --max-refs)" } else { "" }
        );
    }
    Ok(())
}
