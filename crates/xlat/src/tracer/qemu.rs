//! The QEMU backend: `qemu-x86_64 -plugin xlat_plugin.so,fifo=PATH -- PROGRAM ARGS`, the FIFO
//! read as the program runs. Under `--children` the exec shim is preloaded into the guest
//! (`-E LD_PRELOAD=...`) and runs every exec'd program under QEMU and the plugin again.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::process::Command;
use std::sync::{Arc, Mutex};

use super::stream::{Demux, StreamDecoder};
use super::{plugin, require_tool, resolve_program, Sink, TempDir, TraceOutcome, TraceSpec, TracerError};
use crate::trace::TraceError;

/// Creates a FIFO at `path`.
fn mkfifo(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    let r = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Asks for a larger pipe buffer (fewer wake-ups); failure is harmless.
fn grow_pipe(f: &File) {
    use std::os::unix::io::AsRawFd;
    // SAFETY: F_SETPIPE_SZ on an open descriptor we own; no pointers involved.
    unsafe {
        libc::fcntl(f.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20);
    }
}

pub(crate) fn start(
    spec: &TraceSpec,
    mut sink: Sink,
    outcome: Arc<Mutex<Option<TraceOutcome>>>,
) -> Result<std::thread::JoinHandle<()>, TracerError> {
    let qemu = require_tool("qemu-x86_64", "qemu-user", "it runs the traced program")?;
    let so = plugin::ensure_built()?;
    let shim = if spec.children { Some(plugin::ensure_shim_built()?) } else { None };
    let program = resolve_program(&spec.command)?;
    let dir = TempDir::new()?;
    let fifo = dir.0.join("stream");
    mkfifo(&fifo).map_err(|e| TracerError::io(format!("{}: cannot create a FIFO", fifo.display()), e))?;
    // Open the reading end without blocking, then hold a writing end ourselves until QEMU has
    // exited: the stream ends when every process that writes to it is gone, not before QEMU
    // opened it.
    let reader = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .map_err(|e| TracerError::io(format!("{}: cannot open", fifo.display()), e))?;
    let keepalive = OpenOptions::new()
        .write(true)
        .open(&fifo)
        .map_err(|e| TracerError::io(format!("{}: cannot open", fifo.display()), e))?;
    set_blocking(&reader);
    grow_pipe(&reader);
    let mut plugin_arg = so.into_os_string();
    plugin_arg.push(",fifo=");
    plugin_arg.push(fifo.as_os_str());
    let mut cmd = Command::new(&qemu);
    cmd.arg("-plugin").arg(&plugin_arg);
    if let Some(shim) = &shim {
        // The shim for the guest only (not for QEMU itself), and what it needs to start QEMU.
        let mut preload = std::ffi::OsString::from("LD_PRELOAD=");
        preload.push(shim.as_os_str());
        cmd.arg("-E").arg(preload);
        cmd.env("XLAT_EXEC_QEMU", &qemu).env("XLAT_EXEC_PLUGIN", &plugin_arg).env("XLAT_EXEC_SHIM", shim);
    }
    let mut child = cmd
        .arg("--")
        .args(&program)
        .stdout(spec.stdout.stdio()?)
        .spawn()
        .map_err(|e| TracerError::io(format!("cannot start {}", qemu.display()), e))?;
    let quantum = spec.quantum;
    let children = spec.children;
    let status_slot: Arc<Mutex<Option<std::process::ExitStatus>>> = Arc::new(Mutex::new(None));
    let slot = status_slot.clone();
    // The waiter: the program's status, then the stream may end.
    let waiter = std::thread::spawn(move || {
        let st = child.wait().ok();
        *slot.lock().expect("status lock") = st;
        drop(keepalive);
    });
    let thread = std::thread::spawn(move || {
        let _dir = dir;
        let name = "qemu plugin stream";
        let mut demux = Demux::new(quantum);
        let mut dec = StreamDecoder::new(name);
        let result = pump(reader, &mut dec, &mut demux, &mut sink, name, children);
        let _ = waiter.join();
        let status = *status_slot.lock().expect("status lock");
        if let Err(e) = result {
            sink.error(e);
        } else if demux.stats().chunks == 0 && !status.is_some_and(|s| s.success()) {
            sink.error(TraceError::Format {
                source_name: name.to_string(),
                message: format!(
                    "qemu-x86_64 ended ({}) before the plugin sent anything (see its message above)",
                    status.map(|s| s.to_string()).unwrap_or_else(|| "status unknown".to_string())
                ),
            });
        }
        *outcome.lock().expect("outcome lock") = Some(TraceOutcome {
            status,
            stats: demux.stats(),
            notes: Vec::new(),
            untraced_execs: demux.untraced_execs().to_vec(),
            objects: demux.objects().to_vec(),
        });
        // Dropping the sink ends the reader.
    });
    Ok(thread)
}

fn set_blocking(f: &File) {
    use std::os::unix::io::AsRawFd;
    // SAFETY: F_GETFL/F_SETFL on an open descriptor we own.
    unsafe {
        let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
}

/// True if process `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses.
        Ok(s) => s.rfind(')').and_then(|i| s[i + 1..].trim_start().chars().next()).is_some_and(|c| c != 'Z'),
        Err(_) => false,
    }
}

/// Reads the FIFO to its end, decoding and scheduling as data comes. With `children`, the end
/// of the stream (no writer left) is final only once no traced process that has not exited is
/// alive: one may be between its `execve` and its new plugin's opening of the FIFO.
fn pump(
    mut reader: File,
    dec: &mut StreamDecoder,
    demux: &mut Demux,
    sink: &mut Sink,
    name: &str,
    children: bool,
) -> Result<(), TraceError> {
    let mut buf = vec![0u8; 1 << 20];
    let mut have = 0usize;
    loop {
        let n = match reader.read(&mut buf[have..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(TraceError::Io { source_name: name.to_string(), error: e }),
        };
        if n == 0 {
            if children && demux.live_pids().into_iter().any(alive) {
                std::thread::sleep(std::time::Duration::from_millis(2));
                continue;
            }
            break;
        }
        have += n;
        let used = dec.decode_into(&buf[..have], demux, sink)?;
        buf.copy_within(used..have, 0);
        have -= used;
        demux.schedule(sink, false);
        if !sink.send_full() {
            return Ok(()); // the consumer stopped (an error on its side)
        }
    }
    if have != 0 {
        return Err(TraceError::Format {
            source_name: name.to_string(),
            message: format!("the plugin stream ends inside a chunk ({have} bytes left)"),
        });
    }
    demux.finish_all();
    demux.schedule(sink, true);
    sink.send_rest();
    Ok(())
}
