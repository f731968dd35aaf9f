//! The lackey backend: `valgrind --tool=lackey --trace-mem=yes --log-file=DIR/t.%p`, each
//! process's log file followed as it grows and parsed with the lackey parser. Lackey reports no
//! system calls, so there are no map, unmap or fork events; processes exit when their log
//! stops growing after the process is gone.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::stream::Demux;
use super::{find_in_path, require_tool, Sink, TempDir, TraceOutcome, TraceSpec, TracerError};
use crate::trace::lackey::parse_line;
use crate::trace::{Record, TraceError};

/// One process's log file being followed.
struct Follow {
    file: File,
    pid: u32,
    asid: u32,
    /// An incomplete last line.
    partial: Vec<u8>,
    line: u64,
    finished: bool,
    path: PathBuf,
    /// Bytes read so far.
    pos: u64,
}

fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses: "Z" is a zombie (finished).
        Ok(s) => s.rsplit_once(')').map(|(_, rest)| !rest.trim_start().starts_with('Z')).unwrap_or(true),
        Err(_) => false,
    }
}

pub(crate) fn start(
    spec: &TraceSpec,
    mut sink: Sink,
    outcome: Arc<Mutex<Option<TraceOutcome>>>,
) -> Result<std::thread::JoinHandle<()>, TracerError> {
    let valgrind = require_tool("valgrind", "valgrind", "the lackey backend runs the program under it")?;
    let name = spec.command[0].to_string_lossy().into_owned();
    if find_in_path(&name).is_none() {
        return Err(TracerError::Command(format!("{name}: command not found")));
    }
    let dir = TempDir::new()?;
    let mut cmd = Command::new(&valgrind);
    cmd.arg("--tool=lackey").arg("--trace-mem=yes").arg(format!("--log-file={}/t.%p", dir.0.display()));
    if spec.children {
        cmd.arg("--trace-children=yes");
    }
    let mut child = cmd
        .args(&spec.command)
        .stdout(spec.stdout.stdio()?)
        .spawn()
        .map_err(|e| TracerError::io(format!("cannot start {}", valgrind.display()), e))?;
    let done = Arc::new(AtomicBool::new(false));
    let status_slot = Arc::new(Mutex::new(None));
    let (d2, s2) = (done.clone(), status_slot.clone());
    let waiter = std::thread::spawn(move || {
        let st = child.wait().ok();
        *s2.lock().expect("status lock") = st;
        d2.store(true, Ordering::Release);
    });
    let quantum = spec.quantum;
    let thread = std::thread::spawn(move || {
        let mut demux = Demux::new(quantum);
        let r = follow_all(&dir, &done, &mut demux, &mut sink);
        let _ = waiter.join();
        if let Err(e) = r {
            sink.error(e);
        }
        let status = *status_slot.lock().expect("status lock");
        *outcome.lock().expect("outcome lock") = Some(TraceOutcome {
            status,
            stats: demux.stats(),
            notes: Vec::new(),
            untraced_execs: Vec::new(),
            objects: Vec::new(),
        });
        drop(dir);
    });
    Ok(thread)
}

fn follow_all(dir: &TempDir, done: &AtomicBool, demux: &mut Demux, sink: &mut Sink) -> Result<(), TraceError> {
    let mut files: HashMap<u32, Follow> = HashMap::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        // Read `done` before the last sweep: everything written before the exit is then read.
        let last = done.load(Ordering::Acquire);
        if let Ok(entries) = std::fs::read_dir(&dir.0) {
            for e in entries.flatten() {
                let fname = e.file_name().to_string_lossy().into_owned();
                let Some(pid) = fname.strip_prefix("t.").and_then(|p| p.parse::<u32>().ok()) else { continue };
                if files.contains_key(&pid) {
                    continue;
                }
                if let Ok(file) = File::open(e.path()) {
                    let asid = demux.asid(pid);
                    files.insert(
                        pid,
                        Follow {
                            file,
                            pid,
                            asid,
                            partial: Vec::new(),
                            line: 0,
                            finished: false,
                            path: e.path(),
                            pos: 0,
                        },
                    );
                }
            }
        }
        let mut progress = false;
        let mut pids: Vec<u32> = files.keys().copied().collect();
        pids.sort_by_key(|p| files[p].asid);
        for pid in pids {
            let f = files.get_mut(&pid).expect("known pid");
            if f.finished {
                continue;
            }
            let gone = last || !alive(f.pid);
            // Under --trace-children, valgrind truncates and rewrites a process's log when the
            // process execs: a log shorter than what was read is a new program image.
            if f.file.metadata().map(|m| m.len() < f.pos).unwrap_or(false) {
                use std::io::Seek;
                f.file.rewind().map_err(|e| TraceError::Io { source_name: f.path.display().to_string(), error: e })?;
                f.pos = 0;
                f.line = 0;
                f.partial.clear();
                f.asid = demux.replace_image(f.pid);
            }
            loop {
                let n = f
                    .file
                    .read(&mut buf)
                    .map_err(|e| TraceError::Io { source_name: f.path.display().to_string(), error: e })?;
                if n == 0 {
                    break;
                }
                progress = true;
                f.pos += n as u64;
                feed(f, &buf[..n], demux)?;
                demux.schedule(sink, false);
                if !sink.send_full() {
                    return Ok(());
                }
            }
            if gone {
                if !f.partial.is_empty() {
                    let rest = std::mem::take(&mut f.partial);
                    f.line += 1;
                    parse_into(f, &rest, demux)?;
                }
                f.finished = true;
                demux.push(f.asid, Record::Exit { asid: f.asid });
            }
        }
        demux.schedule(sink, false);
        if !sink.send_full() {
            return Ok(());
        }
        if last {
            break;
        }
        if !progress {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    demux.finish_all();
    demux.schedule(sink, true);
    sink.send_rest();
    Ok(())
}

fn feed(f: &mut Follow, data: &[u8], demux: &mut Demux) -> Result<(), TraceError> {
    let mut start = 0;
    if !f.partial.is_empty() {
        match data.iter().position(|&b| b == b'\n') {
            Some(i) => {
                let mut line = std::mem::take(&mut f.partial);
                line.extend_from_slice(&data[..i]);
                f.line += 1;
                parse_into(f, &line, demux)?;
                start = i + 1;
            }
            None => {
                f.partial.extend_from_slice(data);
                return Ok(());
            }
        }
    }
    let rest = &data[start..];
    let end = rest.iter().rposition(|&b| b == b'\n').map(|i| i + 1).unwrap_or(0);
    for line in rest[..end].split(|&b| b == b'\n') {
        if line.is_empty() {
            continue;
        }
        f.line += 1;
        parse_into(f, line, demux)?;
    }
    f.partial.extend_from_slice(&rest[end..]);
    Ok(())
}

fn parse_into(f: &Follow, line: &[u8], demux: &mut Demux) -> Result<(), TraceError> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    match parse_line(line) {
        Some(Ok(r)) => demux.push(f.asid, r),
        Some(Err(m)) => return Err(TraceError::at_line(&f.path.display().to_string(), f.line, m)),
        None => {}
    }
    Ok(())
}
