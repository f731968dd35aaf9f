//! Tracing a running program: QEMU user mode with xlat's TCG plugin (default), or valgrind's
//! lackey. Either way the records arrive while the program runs and are handed out through a
//! [`TraceReader`] ([`ChannelReader`]), so they can be written to an `.xtr` file (`xlat
//! trace`) or simulated directly (`xlat run -- CMD`). See `docs/tracing.md`.
//!
//! The records of each process are demultiplexed and interleaved by a scheduling quantum
//! ([`stream::Demux`]): each process has its own ASID (in order of appearance, the first is 0)
//! and switches between them are `ContextSwitch` records.

pub mod plugin;
mod qemu;
mod spawn;
pub mod stream;
mod valgrind;

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use crate::trace::{ReaderStats, Record, TraceError, TraceReader, BATCH};

pub use spawn::spawn;
pub use stream::{DemuxStats, DEFAULT_QUANTUM};

/// How the program is traced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `qemu-x86_64` (Debian package `qemu-user`) with xlat's plugin.
    Qemu,
    /// `valgrind --tool=lackey` (Debian package `valgrind`); slower, no map/unmap events.
    Lackey,
}

impl Backend {
    /// Parses a command-line name.
    pub fn from_name(s: &str) -> Option<Backend> {
        match s {
            "qemu" => Some(Backend::Qemu),
            "lackey" => Some(Backend::Lackey),
            _ => None,
        }
    }

    /// Name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Qemu => "qemu",
            Backend::Lackey => "lackey",
        }
    }
}

/// What to trace and how.
#[derive(Clone, Debug)]
pub struct TraceSpec {
    /// The program and its arguments.
    pub command: Vec<OsString>,
    /// Backend.
    pub backend: Backend,
    /// Trace programs started by `execve` too (with QEMU through the exec shim, see
    /// `docs/tracing.md`; with lackey through valgrind's `--trace-children=yes`).
    pub children: bool,
    /// Scheduling quantum in references.
    pub quantum: u64,
    /// Where the program's standard output goes.
    pub stdout: ProgramOutput,
}

/// Where a traced program's standard output goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ProgramOutput {
    /// xlat's own standard output.
    #[default]
    Inherit,
    /// xlat's standard error (when xlat's standard output carries a report).
    Stderr,
    /// A file, created or truncated.
    File(std::path::PathBuf),
}

impl ProgramOutput {
    /// The `Stdio` to give the program.
    pub(crate) fn stdio(&self) -> Result<std::process::Stdio, TracerError> {
        Ok(match self {
            ProgramOutput::Inherit => std::process::Stdio::inherit(),
            ProgramOutput::Stderr => std::io::stderr()
                .as_fd()
                .try_clone_to_owned()
                .map(std::process::Stdio::from)
                .map_err(|e| TracerError::io("cannot duplicate standard error".to_string(), e))?,
            ProgramOutput::File(p) => std::fs::File::create(p)
                .map(std::process::Stdio::from)
                .map_err(|e| TracerError::io(format!("{}: cannot create", p.display()), e))?,
        })
    }
}

/// Tracing could not start.
#[derive(Debug, thiserror::Error)]
pub enum TracerError {
    /// A program xlat needs is not installed.
    #[error("{tool} not found on PATH: install the Debian package {package} (apt-get install {package}){why}")]
    MissingTool {
        /// The command.
        tool: String,
        /// The Debian package providing it.
        package: String,
        /// What it is needed for.
        why: String,
    },
    /// The program to trace cannot be found or run.
    #[error("{0}")]
    Command(String),
    /// The plugin did not compile.
    #[error("cannot build {path} (xlat's QEMU plugin or exec shim): {message}")]
    Build {
        /// The source file.
        path: String,
        /// The compiler's first error lines.
        message: String,
    },
    /// Something else failed (FIFO, temporary directory, spawning).
    #[error("{what}: {error}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        error: std::io::Error,
    },
}

impl TracerError {
    fn io(what: impl Into<String>, error: std::io::Error) -> TracerError {
        TracerError::Io { what: what.into(), error }
    }
}

/// Finds `name` on `PATH` (or checks it if it contains a `/`).
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return is_executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// `tool` from PATH, or a [`TracerError::MissingTool`] naming `package`.
pub fn require_tool(tool: &str, package: &str, why: &str) -> Result<PathBuf, TracerError> {
    find_in_path(tool).ok_or_else(|| TracerError::MissingTool {
        tool: tool.to_string(),
        package: package.to_string(),
        why: if why.is_empty() { String::new() } else { format!("; {why}") },
    })
}

/// How the traced program ended and what the tracer saw.
#[derive(Clone, Debug, Default)]
pub struct TraceOutcome {
    /// The program's exit status (the status of the backend process, which exits as the
    /// program did); `None` if it could not be waited for.
    pub status: Option<ExitStatus>,
    /// Demultiplexer counts.
    pub stats: DemuxStats,
    /// Messages for the user (e.g. lackey's speed).
    pub notes: Vec<String>,
    /// Programs exec'd by traced processes and not traced (`PID PATH` each; QEMU backend).
    pub untraced_execs: Vec<String>,
    /// The mapped objects `Record::Object` records name (QEMU backend).
    pub objects: Vec<crate::trace::ObjectInfo>,
}

impl TraceOutcome {
    /// Writes what the trace's notes hold as extension records of `writer` (untraced execs,
    /// mapped objects), so that `xlat info` and `xlat run` over the file see them.
    pub fn write_notes<W: std::io::Write>(
        &self,
        writer: &mut crate::trace::xtr::XtrWriter<W>,
    ) -> Result<(), crate::trace::TraceError> {
        use crate::trace::xtr::extension;
        for e in &self.untraced_execs {
            writer.write_extension(extension::UNTRACED_EXEC, e.as_bytes())?;
        }
        for o in &self.objects {
            let mut payload = Vec::new();
            for v in [o.id as u64, o.dev, o.ino] {
                crate::trace::xtr::put_varint_pub(&mut payload, v);
            }
            payload.extend_from_slice(o.path.as_bytes());
            writer.write_extension(extension::OBJECT_INFO, &payload)?;
        }
        Ok(())
    }
}

impl TraceOutcome {
    /// The exit status as text: `0`, `3`, `signal 11`, or `unknown`.
    pub fn status_text(&self) -> String {
        use std::os::unix::process::ExitStatusExt;
        match self.status {
            Some(s) => match (s.code(), s.signal()) {
                (Some(c), _) => c.to_string(),
                (None, Some(sig)) => format!("signal {sig}"),
                _ => "unknown".to_string(),
            },
            None => "unknown".to_string(),
        }
    }
}

/// What passes from the tracer's thread to the reader: batches of records, several at a time
/// (one wake-up of a waiting thread per group, not per batch), or an error.
type Group = Result<Vec<Vec<Record>>, TraceError>;

/// Full batches a [`Sink`] sends at once (64 Ki records).
const GROUP: usize = 16;

/// The records of a running trace, as a [`TraceReader`]. Batches come from the tracer's thread
/// over a bounded channel (handed over without copying when `max` allows); read until it
/// returns 0, then call [`ChannelReader::outcome`].
pub struct ChannelReader {
    rx: Receiver<Group>,
    recycle: SyncSender<Vec<Record>>,
    outcome: Arc<Mutex<Option<TraceOutcome>>>,
    thread: Option<std::thread::JoinHandle<()>>,
    stats: ReaderStats,
    ended: bool,
    /// The batches of the last group received not yet handed out, the next one last.
    group: Vec<Vec<Record>>,
    /// A batch larger than the caller asked for, served over several calls.
    held: Vec<Record>,
    held_pos: usize,
}

impl ChannelReader {
    /// Copies every record the tracer produces into `writer`, batches handed over whole, then
    /// stops the tracer: the copy's result (a write or trace error ends it early) and the
    /// outcome.
    pub fn copy_into(&mut self, writer: &mut dyn crate::trace::TraceWriter) -> (Result<(), TraceError>, TraceOutcome) {
        let mut buf = Vec::with_capacity(crate::trace::BATCH);
        let copied = (|| {
            while self.read_batch(&mut buf, usize::MAX)? > 0 {
                writer.write(&buf)?;
            }
            Ok(())
        })();
        (copied, self.outcome())
    }

    /// The outcome, once the reader returned 0 (the program and all its processes ended).
    /// Records not read by then are discarded (the tracer stops, and the program with it).
    pub fn outcome(&mut self) -> TraceOutcome {
        // Disconnect first, so that a tracer blocked on a full channel ends.
        let (_, closed) = std::sync::mpsc::sync_channel(1);
        drop(std::mem::replace(&mut self.rx, closed));
        self.ended = true;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.outcome.lock().map(|o| o.clone().unwrap_or_default()).unwrap_or_default()
    }
}

impl TraceReader for ChannelReader {
    fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, TraceError> {
        out.clear();
        let max = max.max(1);
        if self.held_pos >= self.held.len() {
            if self.group.is_empty() && !self.ended {
                match self.rx.recv() {
                    Ok(Ok(mut group)) => {
                        group.reverse();
                        self.group = group;
                    }
                    Ok(Err(e)) => {
                        self.ended = true;
                        return Err(e);
                    }
                    Err(_) => self.ended = true,
                }
            }
            match self.group.pop() {
                Some(mut batch) if batch.len() <= max => {
                    // The common case: hand the batch over without copying.
                    std::mem::swap(out, &mut batch);
                    let _ = self.recycle.try_send(batch);
                    self.stats.records += out.len() as u64;
                    return Ok(out.len());
                }
                Some(batch) => {
                    self.held = batch;
                    self.held_pos = 0;
                }
                None => {}
            }
        }
        let n = (self.held.len() - self.held_pos).min(max);
        out.extend_from_slice(&self.held[self.held_pos..self.held_pos + n]);
        self.held_pos += n;
        self.stats.records += n as u64;
        Ok(n)
    }

    fn stats(&self) -> ReaderStats {
        self.stats
    }

    /// The tracer's thread, which decodes the backend's stream into batches, and the traced
    /// program itself.
    fn busy_threads(&self) -> usize {
        2
    }
}

/// The sending side used by the backends: batches of [`BATCH`] records (the last one shorter),
/// the size a simulation's reader asks for, which [`ChannelReader::read_batch`] then hands over
/// without copying; sent in groups of up to [`GROUP`].
pub(crate) struct Sink {
    tx: SyncSender<Group>,
    recycle: Receiver<Vec<Record>>,
    /// Records of the batch being filled (fewer than [`BATCH`] between calls).
    buf: Vec<Record>,
    /// Full batches not sent yet.
    ready: Vec<Vec<Record>>,
    /// The reader went away: records are dropped.
    closed: bool,
}

impl Sink {
    fn new(tx: SyncSender<Group>, recycle: Receiver<Vec<Record>>) -> Sink {
        Sink { tx, recycle, buf: Vec::with_capacity(BATCH), ready: Vec::with_capacity(GROUP), closed: false }
    }

    /// Moves the batch being filled to the ready ones if it is full, and sends them if they
    /// make a group.
    fn batch_full(&mut self) {
        if self.buf.len() == BATCH {
            let mut next = self.recycle.try_recv().unwrap_or_else(|_| Vec::with_capacity(BATCH));
            next.clear();
            self.ready.push(std::mem::replace(&mut self.buf, next));
            if self.ready.len() >= GROUP {
                self.send_full();
            }
        }
    }

    /// Sends the full batches made so far (not the one being filled); false if the reader
    /// went away (now or before).
    pub fn send_full(&mut self) -> bool {
        if !self.ready.is_empty() && !self.closed {
            let group = std::mem::replace(&mut self.ready, Vec::with_capacity(GROUP));
            self.closed = self.tx.send(Ok(group)).is_err();
        }
        !self.closed
    }

    /// Sends everything left.
    pub fn send_rest(&mut self) -> bool {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            self.ready.push(rest);
        }
        self.send_full()
    }

    /// Sends an error (the reader reports it), after the batches made so far.
    pub fn error(&mut self, e: TraceError) {
        if self.send_rest() {
            let _ = self.tx.send(Err(e));
        }
    }
}

impl stream::Emit for Sink {
    /// Buffers `records`, a batch at a time.
    fn emit(&mut self, mut records: &[Record]) {
        while !records.is_empty() && !self.closed {
            let take = (BATCH - self.buf.len()).min(records.len());
            self.buf.extend_from_slice(&records[..take]);
            records = &records[take..];
            self.batch_full();
        }
    }
}

/// The two ends of the channel from a tracer's thread to its reader.
fn channel() -> (Sink, ChannelReader) {
    // Up to 4 groups (256 Ki records, 6 MiB) between the tracer and the reader.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Group>(4);
    let (rtx, rrx) = std::sync::mpsc::sync_channel::<Vec<Record>>(8 * GROUP);
    let reader = ChannelReader {
        rx,
        recycle: rtx,
        outcome: Arc::new(Mutex::new(None)),
        thread: None,
        stats: ReaderStats::default(),
        ended: false,
        group: Vec::new(),
        held: Vec::new(),
        held_pos: 0,
    };
    (Sink::new(tx, rrx), reader)
}

/// Resolves the program to run: a path, or a name looked up on PATH. QEMU user mode runs ELF
/// files only, so a `#!` script becomes its interpreter (and optional argument) plus the
/// script's path.
pub(crate) fn resolve_program(command: &[OsString]) -> Result<Vec<OsString>, TracerError> {
    let name = command[0].to_string_lossy().into_owned();
    let path = find_in_path(&name).ok_or_else(|| {
        TracerError::Command(if name.contains('/') {
            format!("{name}: no such executable file")
        } else {
            format!("{name}: command not found on PATH")
        })
    })?;
    let mut head = [0u8; 256];
    let n = {
        use std::io::Read;
        let mut f = std::fs::File::open(&path).map_err(|e| TracerError::io(name.clone(), e))?;
        f.read(&mut head).map_err(|e| TracerError::io(name.clone(), e))?
    };
    let mut out: Vec<OsString> = Vec::new();
    if head[..n].starts_with(b"#!") {
        let line_end = head[..n].iter().position(|&b| b == b'\n').unwrap_or(n);
        let line = String::from_utf8_lossy(&head[2..line_end]).trim().to_string();
        let mut parts = line.splitn(2, [' ', '\t']);
        let interp = parts.next().unwrap_or_default().to_string();
        if interp.is_empty() {
            return Err(TracerError::Command(format!("{name}: empty #! line")));
        }
        out.push(interp.into());
        if let Some(arg) = parts.next().map(str::trim).filter(|a| !a.is_empty()) {
            out.push(arg.into());
        }
        out.push(path.into_os_string());
    } else {
        out.push(path.into_os_string());
    }
    out.extend(command[1..].iter().cloned());
    Ok(out)
}

/// A fresh private directory for FIFOs and logs, removed by [`TempDir`]'s drop.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> Result<TempDir, TracerError> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let base = std::env::temp_dir();
        for _ in 0..100 {
            let p = base.join(format!(
                "xlat-trace-{}-{}-{:x}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed),
                nanos & 0xffff_ffff
            ));
            match std::fs::create_dir(&p) {
                Ok(()) => return Ok(TempDir(p)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(TracerError::io(format!("{}: cannot create", p.display()), e)),
            }
        }
        Err(TracerError::io("temporary directory", std::io::Error::other("no free name")))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::stream::Emit;
    use super::*;
    use crate::trace::Kind;

    /// Records emitted in pieces of any size reach the reader whole and in order, in batches of
    /// at most `max` and [`BATCH`] records (handed over whole when the reader takes a batch's
    /// worth), and an error comes after every record emitted before it.
    #[test]
    fn records_reach_the_reader_whole_and_in_order_in_batches() {
        let records: Vec<Record> = (0..150_000u64)
            .map(|i| {
                if i % 997 == 0 {
                    Record::Marker { id: i }
                } else {
                    Record::Access { kind: Kind::Load, size: 4, addr: 8 * i }
                }
            })
            .collect();
        for (piece, max, fail) in [
            (1, BATCH, false),
            (3, BATCH, true),
            (5_000, BATCH, false),
            (70_000, usize::MAX, true),
            (7, 1, false),
            (4_096, 1_000, true),
        ] {
            let (mut sink, mut reader) = channel();
            // A run counts the tracer's thread and the traced program against its cores.
            assert_eq!(reader.busy_threads(), 2);
            let sent = records.clone();
            let tracer = std::thread::spawn(move || {
                for (k, p) in sent.chunks(piece).enumerate() {
                    sink.emit(p);
                    // The backends send what is full after each read of their input.
                    if k % 5 == 0 && !sink.send_full() {
                        return;
                    }
                }
                if fail {
                    sink.error(TraceError::Format { source_name: "t".into(), message: "stopped".into() });
                } else {
                    sink.send_rest();
                }
            });
            let (mut got, mut out, mut whole) = (Vec::new(), Vec::new(), 0);
            let end = loop {
                match reader.read_batch(&mut out, max) {
                    Ok(0) => break None,
                    Ok(n) => {
                        assert!(n == out.len() && n <= max.min(BATCH), "{n} records for at most {max}");
                        whole += (n == BATCH) as usize;
                        got.extend_from_slice(&out);
                    }
                    Err(e) => break Some(e.to_string()),
                }
            };
            tracer.join().unwrap();
            assert!(got == records, "pieces of {piece}, at most {max}: {} records of {}", got.len(), records.len());
            assert_eq!(end.is_some_and(|e| e.contains("stopped")), fail);
            if max >= BATCH {
                assert_eq!(whole, records.len() / BATCH);
            }
            assert_eq!(reader.stats().records, records.len() as u64);
        }
    }
}
