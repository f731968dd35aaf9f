//! Address-space snapshots: the mapped regions and resident pages of real processes, and the
//! page tables each design would need to map them.
//!
//! A [`Snapshot`] holds, for every process of a process tree, its mapped regions (as listed in
//! `/proc/PID/maps`) and the virtual pages that had a page-table entry (`/proc/PID/pagemap`: page
//! present or swapped out). It is captured from a live process ([`capture_tree`]), stored in a
//! small line-oriented text file (`docs/snapshot-format.md`; [`read`], [`write()`]) and evaluated
//! against designs ([`evaluate`]): every resident page is mapped in the design's page table, whose
//! Table 2 size and walk cost are reported.

use crate::addr::{Asid, PageSize, Vpn};
use crate::config::Config;
use crate::engine::{DesignError, System};
use crate::os::OutOfMemory;
use crate::pt::{Kind, NoTlb, ParamError, PtSize, WalkRecord};
use std::fmt::Write as _;
use std::io::{BufRead, Write};
use std::path::Path;

/// First word of the header line of a snapshot file.
pub const MAGIC: &str = "xlat-snapshot";

/// Most resident pages a snapshot may hold in all (2^27: 512 GiB of 4 KB pages). Every page
/// number is kept in memory (8 bytes each), so counts read from a file are bounded before they
/// allocate anything.
pub const MAX_RESIDENT_PAGES: u64 = 1 << 27;
/// The format version this module writes and reads.
pub const VERSION: u32 = 1;

/// The address spaces of a process tree at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Processes, the root of the tree first.
    pub processes: Vec<ProcessSnapshot>,
    /// When it was taken: `peak` (peak resident size of the tree), `exit` (last sample before
    /// the command exited), `signal` (xlat was interrupted) or `now` (a live process, once).
    pub taken_at: String,
    /// Page size of the machine the snapshot was taken on, in bytes (VPNs are in this unit).
    pub page_size: u64,
}

/// One process's address space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessSnapshot {
    /// Process ID.
    pub pid: u32,
    /// Parent's process ID.
    pub ppid: u32,
    /// Command line (arguments separated by spaces), or the command name.
    pub command: String,
    /// Mapped regions in address order.
    pub regions: Vec<Region>,
    /// Virtual page numbers with a page-table entry, sorted and without duplicates.
    pub resident: Vec<u64>,
    /// Resident set size in pages as the kernel reported it (`VmRSS`); 0 if unknown.
    pub rss_pages: u64,
}

/// One line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    /// First byte address.
    pub start: u64,
    /// One past the last byte address.
    pub end: u64,
    /// Permissions as the kernel prints them, e.g. `r-xp`.
    pub perms: String,
    /// Offset in the mapped file.
    pub offset: u64,
    /// Mapped file or pseudo-path (`[heap]`, `[stack]`); empty for anonymous memory.
    pub path: String,
}

/// A snapshot that cannot be read, captured or evaluated.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The file could not be opened, read or written.
    #[error("{file}: {error}")]
    Io {
        /// The file.
        file: String,
        /// Why.
        error: std::io::Error,
    },
    /// A line that does not follow the format (also: a wrong header or version, a file cut short).
    #[error("{file}: line {line}: {message}")]
    Parse {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What was wrong and what is expected.
        message: String,
    },
    /// A live process could not be read.
    #[error("process {pid}: {message}")]
    Capture {
        /// The process.
        pid: u32,
        /// Why.
        message: String,
    },
    /// A design that cannot be built.
    #[error("config '{config}': {error}")]
    Param {
        /// Which design.
        config: String,
        /// The key and what is expected.
        error: ParamError,
    },
    /// A resident page beyond the design's virtual address space.
    #[error("config '{config}': process {pid} has a resident page at {addr:#x}, outside the {va_bits}-bit virtual address space of its page table ({key})")]
    AddressRange {
        /// Which design.
        config: String,
        /// Which process.
        pid: u32,
        /// Address of the page.
        addr: u64,
        /// The configured width.
        va_bits: u32,
        /// The key that sets it.
        key: &'static str,
    },
    /// The design's physical memory cannot hold the snapshot's pages.
    #[error("config '{config}': {error}")]
    OutOfMemory {
        /// Which design.
        config: String,
        /// Details.
        error: OutOfMemory,
    },
}

impl Snapshot {
    /// Resident pages of all processes.
    pub fn resident_pages(&self) -> u64 {
        self.processes.iter().map(|p| p.resident.len() as u64).sum()
    }

    /// Mapped regions of all processes.
    pub fn regions(&self) -> u64 {
        self.processes.iter().map(|p| p.regions.len() as u64).sum()
    }
}

/// Run-length encoding of a sorted, duplicate-free list of page numbers: `(first, count)` runs
/// of consecutive pages, in order, each run as long as possible.
pub fn runs(pages: &[u64]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &p in pages {
        match out.last_mut() {
            Some((start, n)) if start.checked_add(*n) == Some(p) => *n += 1,
            _ => out.push((p, 1)),
        }
    }
    out
}

/// The pages of `runs` (the inverse of [`runs`]).
pub fn expand(runs: &[(u64, u64)]) -> Vec<u64> {
    let mut out = Vec::with_capacity(runs.iter().map(|r| r.1 as usize).sum());
    for &(start, n) in runs {
        out.extend((0..n).map(|i| start + i));
    }
    out
}

/// Runs per `pages` line in files written by [`write`].
const RUNS_PER_LINE: usize = 16;

/// Writes `snap` in the text format of `docs/snapshot-format.md`.
pub fn write_to(snap: &Snapshot, out: &mut impl Write) -> std::io::Result<()> {
    let clean = |s: &str| s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect::<String>();
    writeln!(out, "{MAGIC} {VERSION}")?;
    writeln!(out, "page_size {}", snap.page_size)?;
    writeln!(out, "taken_at {}", clean(&snap.taken_at).replace(' ', "_"))?;
    for p in &snap.processes {
        writeln!(out, "process {} {} {} {}", p.pid, p.ppid, p.rss_pages, clean(&p.command).trim())?;
        for r in &p.regions {
            let path = clean(&r.path);
            let sep = if path.is_empty() { "" } else { " " };
            writeln!(out, "region {:x} {:x} {} {:x}{sep}{path}", r.start, r.end, clean(&r.perms), r.offset)?;
        }
        for chunk in runs(&p.resident).chunks(RUNS_PER_LINE) {
            let mut line = String::from("pages");
            for (start, n) in chunk {
                let _ = write!(line, " {start:x}+{n}");
            }
            writeln!(out, "{line}")?;
        }
    }
    writeln!(out, "end {}", snap.processes.len())?;
    Ok(())
}

/// Writes `snap` to `path` (`-`: standard output). A file is written next to its final name and
/// renamed once complete, so a failure leaves no partial snapshot (`crate::output`).
pub fn write(snap: &Snapshot, path: &str) -> Result<(), SnapshotError> {
    let io = |error| SnapshotError::Io { file: path.to_string(), error };
    if path == "-" {
        let stdout = std::io::stdout();
        let mut w = std::io::BufWriter::new(stdout.lock());
        write_to(snap, &mut w).and_then(|_| w.flush()).map_err(io)?;
        return Ok(());
    }
    let out = crate::output::Output::start(path, "");
    out.create()
        .and_then(|f| {
            let mut w = std::io::BufWriter::new(f);
            write_to(snap, &mut w)?;
            w.flush()
        })
        .and_then(|()| out.commit())
        .map_err(io)
}

/// What a file that is not a snapshot is instead, told from its first bytes: a trace given
/// where a snapshot was expected is the usual mistake.
fn not_a_snapshot(prefix: &[u8]) -> Option<String> {
    use crate::trace::open::{looks_like_lackey, Compression};
    if prefix.starts_with(MAGIC.as_bytes()) {
        return None;
    }
    let hint = "snapshots are plain text made by `xlat snapshot`; give traces with --trace";
    Some(match Compression::detect(prefix) {
        Compression::None if prefix.starts_with(crate::trace::xtr::MAGIC) => format!("this is an xtr trace ({hint})"),
        Compression::None if looks_like_lackey(prefix) => format!("this looks like a lackey trace ({hint})"),
        Compression::None if std::str::from_utf8(prefix).is_err() || prefix.contains(&0) => {
            format!("binary data, perhaps a ChampSim trace ({hint})")
        }
        Compression::None => return None,
        c => {
            // What the compressed data starts with, as far as the buffered prefix decodes.
            let mut inner = Vec::new();
            if let Ok((r, _)) = crate::trace::open::decompress(std::io::Cursor::new(prefix.to_vec())) {
                let _ = std::io::Read::read_to_end(&mut std::io::Read::take(r, 4096), &mut inner);
            }
            let what = if inner.starts_with(crate::trace::xtr::MAGIC) {
                "an xtr trace"
            } else if looks_like_lackey(&inner) {
                "a lackey trace"
            } else {
                "data, perhaps a trace"
            };
            format!("this is {what}, {}-compressed ({hint})", c.name())
        }
    })
}

/// Reads a snapshot file.
pub fn read(path: &Path) -> Result<Snapshot, SnapshotError> {
    let name = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|error| SnapshotError::Io { file: name.clone(), error })?;
    // A large buffer, so that the first bytes of a compressed trace given by mistake decode.
    read_from(std::io::BufReader::with_capacity(1 << 18, f), &name)
}

/// Reads a snapshot in the text format from `input`; `file` names it in errors.
pub fn read_from(mut input: impl BufRead, file: &str) -> Result<Snapshot, SnapshotError> {
    let prefix = input.fill_buf().map_err(|error| SnapshotError::Io { file: file.to_string(), error })?;
    if let Some(what) = not_a_snapshot(prefix) {
        return Err(SnapshotError::Parse {
            file: file.to_string(),
            line: 1,
            message: format!("not an xlat snapshot: {what}"),
        });
    }
    let mut snap = Snapshot { processes: Vec::new(), taken_at: String::new(), page_size: 0 };
    let mut page_size: Option<u64> = None;
    let mut taken_at: Option<String> = None;
    let mut header = false;
    let mut ended = false;
    let mut line_no = 0usize;
    // Runs of the current process's pages, checked to ascend.
    let mut prev_last: Option<u64> = None;
    let mut total_pages = 0u64;
    for line in input.lines() {
        line_no += 1;
        let line = line.map_err(|error| match error.kind() {
            std::io::ErrorKind::InvalidData => {
                SnapshotError::Parse { file: file.to_string(), line: line_no, message: "not UTF-8 text".to_string() }
            }
            _ => SnapshotError::Io { file: file.to_string(), error },
        })?;
        let bad = |message: String| SnapshotError::Parse { file: file.to_string(), line: line_no, message };
        let text = line.trim_end_matches('\r');
        if !header {
            let mut w = text.split_whitespace();
            if w.next() != Some(MAGIC) {
                return Err(bad(format!("not an xlat snapshot: the first line must be '{MAGIC} {VERSION}'")));
            }
            match w.next().map(str::parse::<u32>) {
                Some(Ok(VERSION)) if w.next().is_none() => {}
                Some(Ok(v)) => {
                    return Err(bad(format!(
                        "snapshot format version {v} is not supported (this xlat reads {VERSION})"
                    )))
                }
                _ => return Err(bad(format!("bad header '{text}': expected '{MAGIC} {VERSION}'"))),
            }
            header = true;
            continue;
        }
        if text.trim().is_empty() || text.trim_start().starts_with('#') {
            continue;
        }
        if ended {
            return Err(bad("text after the 'end' line".to_string()));
        }
        let (key, rest) = text.split_once(' ').unwrap_or((text, ""));
        match key {
            "page_size" => {
                if page_size.is_some() {
                    return Err(bad("a second 'page_size' line".to_string()));
                }
                let v = rest.trim().parse::<u64>().ok().filter(|v| v.is_power_of_two() && *v >= 2);
                page_size = Some(v.ok_or_else(|| {
                    bad(format!("page_size: expected a power of two of at least 2 bytes, got '{}'", rest.trim()))
                })?);
            }
            "taken_at" => {
                if taken_at.is_some() {
                    return Err(bad("a second 'taken_at' line".to_string()));
                }
                let v = rest.trim();
                if v.is_empty() || v.contains(char::is_whitespace) {
                    return Err(bad(format!("taken_at: expected one word (peak, exit, signal, now), got '{v}'")));
                }
                taken_at = Some(v.to_string());
            }
            "process" => {
                if page_size.is_none() || taken_at.is_none() {
                    return Err(bad("'page_size' and 'taken_at' lines must come before the first process".to_string()));
                }
                let mut parts = rest.splitn(4, ' ');
                let mut num = |what: &str| {
                    let t = parts.next().unwrap_or("");
                    t.parse::<u64>().map_err(|_| {
                        bad(format!("process: expected 'process PID PPID RSS_PAGES COMMAND', bad {what} '{t}'"))
                    })
                };
                let pid = num("PID")?;
                let ppid = num("PPID")?;
                let rss_pages = num("RSS_PAGES")?;
                let (pid, ppid) = match (u32::try_from(pid), u32::try_from(ppid)) {
                    (Ok(a), Ok(b)) => (a, b),
                    _ => return Err(bad("process: PID and PPID must fit in 32 bits".to_string())),
                };
                let command = parts.next().unwrap_or("").to_string();
                snap.processes.push(ProcessSnapshot {
                    pid,
                    ppid,
                    command,
                    regions: Vec::new(),
                    resident: Vec::new(),
                    rss_pages,
                });
                prev_last = None;
            }
            "region" => {
                let p =
                    snap.processes.last_mut().ok_or_else(|| bad("'region' before any 'process' line".to_string()))?;
                let mut parts = rest.splitn(5, ' ');
                let usage = "expected 'region START END PERMS OFFSET [PATH]' (hex START, END, OFFSET)";
                let mut hex = |what: &str| {
                    let t = parts.next().unwrap_or("");
                    u64::from_str_radix(t, 16).map_err(|_| bad(format!("region: {usage}; bad {what} '{t}'")))
                };
                let start = hex("START")?;
                let end = hex("END")?;
                let perms = parts.next().unwrap_or("").to_string();
                let offset = u64::from_str_radix(parts.next().unwrap_or(""), 16)
                    .map_err(|_| bad(format!("region: {usage}; bad PERMS or OFFSET")))?;
                if perms.is_empty() {
                    return Err(bad(format!("region: {usage}; PERMS missing")));
                }
                if start >= end {
                    return Err(bad(format!("region: START {start:#x} must be below END {end:#x}")));
                }
                let path = parts.next().unwrap_or("").to_string();
                p.regions.push(Region { start, end, perms, offset, path });
            }
            "pages" => {
                let p =
                    snap.processes.last_mut().ok_or_else(|| bad("'pages' before any 'process' line".to_string()))?;
                for tok in rest.split_whitespace() {
                    let (s, n) = tok.split_once('+').unwrap_or((tok, "1"));
                    let start = u64::from_str_radix(s, 16).ok();
                    let n = n.parse::<u64>().ok().filter(|n| *n > 0);
                    let (Some(start), Some(n)) = (start, n) else {
                        return Err(bad(format!(
                            "pages: expected runs 'VPN+COUNT' (hex VPN, decimal COUNT > 0), got '{tok}'"
                        )));
                    };
                    let last = start
                        .checked_add(n - 1)
                        .ok_or_else(|| bad(format!("pages: run '{tok}' runs past the end of the address space")))?;
                    if prev_last.is_some_and(|l| start <= l) {
                        return Err(bad(format!(
                            "pages: run '{tok}' does not start after the previous run of this process (runs must ascend and not overlap)"
                        )));
                    }
                    total_pages = total_pages.saturating_add(n);
                    if total_pages > MAX_RESIDENT_PAGES {
                        return Err(bad(format!(
                            "pages: run '{tok}' brings the snapshot above {MAX_RESIDENT_PAGES} resident pages, the most xlat reads (it keeps every page number in memory)"
                        )));
                    }
                    p.resident.extend(start..=last);
                    prev_last = Some(last);
                }
            }
            "end" => {
                let n = rest.trim().parse::<usize>().map_err(|_| {
                    bad(format!("end: expected 'end N' with N the number of processes, got '{}'", rest.trim()))
                })?;
                if n != snap.processes.len() {
                    return Err(bad(format!(
                        "end: the file says {n} processes but holds {} (truncated or edited?)",
                        snap.processes.len()
                    )));
                }
                ended = true;
            }
            other => {
                return Err(bad(format!(
                    "unknown line kind '{other}' (expected page_size, taken_at, process, region, pages or end)"
                )))
            }
        }
    }
    let eof = |message: String| SnapshotError::Parse { file: file.to_string(), line: line_no + 1, message };
    if !header {
        return Err(eof(format!("empty file: expected the header '{MAGIC} {VERSION}'")));
    }
    if !ended {
        return Err(eof("truncated: the file ends before its 'end N' line".to_string()));
    }
    snap.page_size = page_size.ok_or_else(|| eof("no 'page_size' line".to_string()))?;
    snap.taken_at = taken_at.ok_or_else(|| eof("no 'taken_at' line".to_string()))?;
    Ok(snap)
}

// ---------------------------------------------------------------------------------------------
// Capturing live processes (Linux /proc)
// ---------------------------------------------------------------------------------------------

/// Parses the text of `/proc/PID/maps`. Lines that do not parse are an error naming the line.
pub fn parse_maps(text: &str) -> Result<Vec<Region>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || format!("maps line {}: cannot parse '{line}'", i + 1);
        // "start-end perms offset dev inode   path": the path may contain spaces.
        let mut rest = line;
        let mut field = || {
            let r = rest.trim_start();
            let (f, tail) = r.split_once(' ').unwrap_or((r, ""));
            rest = tail;
            f
        };
        let range = field();
        let perms = field().to_string();
        let offset = field();
        let _dev = field();
        let _inode = field();
        let path = rest.trim().to_string();
        let (s, e) = range.split_once('-').ok_or_else(bad)?;
        let start = u64::from_str_radix(s, 16).map_err(|_| bad())?;
        let end = u64::from_str_radix(e, 16).map_err(|_| bad())?;
        let offset = u64::from_str_radix(offset, 16).map_err(|_| bad())?;
        if perms.is_empty() || start >= end {
            return Err(bad());
        }
        out.push(Region { start, end, perms, offset, path });
    }
    Ok(out)
}

/// The machine's page size as the kernel reports it (the `KernelPageSize` of the first mapping
/// of `/proc/self/smaps`), or 4096 if it cannot be read.
pub fn host_page_size() -> u64 {
    std::fs::read_to_string("/proc/self/smaps")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                let v = l.strip_prefix("KernelPageSize:")?;
                v.trim().trim_end_matches("kB").trim().parse::<u64>().ok().map(|k| k << 10)
            })
        })
        .filter(|v| v.is_power_of_two())
        .unwrap_or(4096)
}

/// Pagemap bit: the page is present in RAM.
pub const PAGEMAP_PRESENT: u64 = 1 << 63;
/// Pagemap bit: the page is swapped out (it still has a page-table entry).
pub const PAGEMAP_SWAPPED: u64 = 1 << 62;

/// Pagemap entries read per system call (8 bytes each).
const PAGEMAP_CHUNK: u64 = 32 * 1024;

/// Whether a region is skipped when reading pagemap: `[vsyscall]` (a fixed kernel page above the
/// user address space, not in the process's page table).
pub fn skipped_region(r: &Region) -> bool {
    r.path == "[vsyscall]"
}

/// Reads the pagemap entries of `first..last` (VPNs, exclusive end) and appends the pages that
/// are present or swapped to `out`.
fn read_pagemap_range(
    f: &std::fs::File,
    first: u64,
    last: u64,
    out: &mut Vec<u64>,
    buf: &mut Vec<u8>,
) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut vpn = first;
    while vpn < last {
        let n = (last - vpn).min(PAGEMAP_CHUNK);
        buf.resize(n as usize * 8, 0);
        let mut got = 0usize;
        while got < buf.len() {
            let off = vpn.checked_mul(8).and_then(|o| o.checked_add(got as u64));
            let off = off.ok_or_else(|| std::io::Error::other("address out of range"))?;
            match f.read_at(&mut buf[got..], off) {
                Ok(0) => return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "short pagemap read")),
                Ok(k) => got += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        for (i, e) in buf.chunks_exact(8).enumerate() {
            let e = u64::from_le_bytes(e.try_into().expect("8 bytes"));
            if e & (PAGEMAP_PRESENT | PAGEMAP_SWAPPED) != 0 {
                out.push(vpn + i as u64);
            }
        }
        vpn += n;
    }
    Ok(())
}

/// `(ppid, command)` of a live process from `/proc/PID/stat` and `/proc/PID/cmdline`.
fn process_identity(pid: u32) -> Result<(u32, String), String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    // "pid (comm) state ppid ...": comm may contain spaces and parentheses; it ends at the last ')'.
    let close = stat.rfind(')').ok_or_else(|| format!("/proc/{pid}/stat: unexpected format"))?;
    let comm = stat.find('(').map(|o| stat[o + 1..close].to_string()).unwrap_or_default();
    let ppid = stat[close + 1..]
        .split_whitespace()
        .nth(1)
        .and_then(|t| t.parse::<u32>().ok())
        .ok_or_else(|| format!("/proc/{pid}/stat: unexpected format"))?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> =
        cmdline.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    Ok((ppid, if args.is_empty() { comm } else { args.join(" ") }))
}

/// Resident set size of a live process in bytes (`VmRSS` of `/proc/PID/status`); `None` if the
/// process is gone or a zombie.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| {
        let v = l.strip_prefix("VmRSS:")?;
        v.trim().trim_end_matches("kB").trim().parse::<u64>().ok().map(|k| k << 10)
    })
}

/// The live descendants of `pid` (children, grandchildren, ...), found through
/// `/proc/PID/task/*/children`, parents before their children.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut queue = std::collections::VecDeque::from([pid]);
    while let Some(p) = queue.pop_front() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else { continue };
        let mut kids: Vec<u32> = Vec::new();
        for t in tasks.flatten() {
            let Ok(text) = std::fs::read_to_string(t.path().join("children")) else { continue };
            kids.extend(text.split_whitespace().filter_map(|c| c.parse::<u32>().ok()));
        }
        kids.sort_unstable();
        kids.dedup();
        for k in kids {
            if k != pid && !out.contains(&k) {
                out.push(k);
                queue.push_back(k);
            }
        }
    }
    out
}

/// Total resident size in bytes of `pid` and its descendants; `None` if `pid` is gone.
pub fn tree_rss_bytes(pid: u32) -> Option<u64> {
    let root = rss_bytes(pid)?;
    Some(root + descendants(pid).into_iter().filter_map(rss_bytes).sum::<u64>())
}

/// Captures one live process: its regions and the pages with a page-table entry (present or
/// swapped), in units of `page_size`. Regions whose pagemap cannot be read are skipped, as is
/// `[vsyscall]`. A process with no regions (exited, a zombie, or a kernel thread) is an error.
pub fn capture_process(pid: u32, page_size: u64) -> Result<ProcessSnapshot, SnapshotError> {
    let err = |message: String| SnapshotError::Capture { pid, message };
    if !page_size.is_power_of_two() {
        return Err(err(format!("page size {page_size} is not a power of two")));
    }
    let (ppid, command) = process_identity(pid).map_err(err)?;
    let maps =
        std::fs::read_to_string(format!("/proc/{pid}/maps")).map_err(|e| err(format!("/proc/{pid}/maps: {e}")))?;
    let regions = parse_maps(&maps).map_err(|m| err(format!("/proc/{pid}/maps: {m}")))?;
    if regions.is_empty() {
        return Err(err("no mapped regions (the process exited, or is a kernel thread)".to_string()));
    }
    let f =
        std::fs::File::open(format!("/proc/{pid}/pagemap")).map_err(|e| err(format!("/proc/{pid}/pagemap: {e}")))?;
    let shift = page_size.trailing_zeros();
    let mut resident = Vec::new();
    let mut buf = Vec::new();
    for r in regions.iter().filter(|r| !skipped_region(r)) {
        let mark = resident.len();
        let (first, last) = (r.start >> shift, (r.end + page_size - 1) >> shift);
        if read_pagemap_range(&f, first, last, &mut resident, &mut buf).is_err() {
            resident.truncate(mark);
        }
    }
    resident.sort_unstable();
    resident.dedup();
    let rss_pages = rss_bytes(pid).map(|b| b >> shift).unwrap_or(0);
    Ok(ProcessSnapshot { pid, ppid, command, regions, resident, rss_pages })
}

/// Captures `pid` and its live descendants. Descendants that exit meanwhile are left out; the
/// root failing is an error.
pub fn capture_tree(pid: u32, taken_at: &str) -> Result<Snapshot, SnapshotError> {
    let page_size = host_page_size();
    let mut processes = vec![capture_process(pid, page_size)?];
    for d in descendants(pid) {
        if let Ok(p) = capture_process(d, page_size) {
            processes.push(p);
        }
    }
    Ok(Snapshot { processes, taken_at: taken_at.to_string(), page_size })
}

/// Which moment of a command's run a snapshot keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// The sample where the process tree's total resident size was largest.
    Peak,
    /// The last sample before the command exited.
    Exit,
}

impl At {
    /// The `taken_at` word of snapshots kept this way.
    pub fn name(self) -> &'static str {
        match self {
            At::Peak => "peak",
            At::Exit => "exit",
        }
    }
}

/// What [`watch`] saw.
#[derive(Debug, Default)]
pub struct Watched {
    /// The snapshot kept (`None` if the process exited before a sample could be taken).
    pub snapshot: Option<Snapshot>,
    /// Samples of the tree's resident size taken.
    pub samples: u64,
    /// Largest total resident size of the tree seen, in bytes.
    pub peak_rss_bytes: u64,
    /// Snapshots captured (each replacing the previous one).
    pub captures: u64,
}

/// Samples the resident size of `pid` and its descendants (`VmRSS`) every `interval` until
/// `done()` returns true (the caller checks whether the process exited, or a signal came), and
/// keeps a snapshot of the tree: under [`At::Peak`] a new one whenever the total resident size
/// exceeds the largest seen so far, under [`At::Exit`] one at every sample. A capture that fails
/// because the process is exiting keeps the previous snapshot.
pub fn watch(pid: u32, at: At, interval: std::time::Duration, mut done: impl FnMut() -> bool) -> Watched {
    let mut w = Watched::default();
    while !done() {
        if let Some(rss) = tree_rss_bytes(pid) {
            w.samples += 1;
            if at == At::Exit || rss > w.peak_rss_bytes || w.snapshot.is_none() {
                if let Ok(s) = capture_tree(pid, at.name()) {
                    w.snapshot = Some(s);
                    w.captures += 1;
                    w.peak_rss_bytes = w.peak_rss_bytes.max(rss);
                }
            }
        }
        std::thread::sleep(interval);
    }
    w
}

// ---------------------------------------------------------------------------------------------
// Evaluating designs on a snapshot
// ---------------------------------------------------------------------------------------------

/// What one design's page table looks like once it maps a snapshot.
#[derive(Clone, Debug, PartialEq)]
pub struct SnapshotReport {
    /// The design's name.
    pub name: String,
    /// The design's base page size in bytes.
    pub page_size: u64,
    /// Page-table kind.
    pub kind: Kind,
    /// Size in Table 2 accounting after mapping every resident page.
    pub size: PtSize,
    /// Pages mapped (in the design's page size) of all processes.
    pub mapped_pages: u64,
    /// Pages mapped per process, in snapshot order.
    pub mapped_per_process: Vec<u64>,
    /// Walks made: one per mapped page.
    pub walks: u64,
    /// Memory references of all those walks.
    pub walk_refs: u64,
    /// Cache lines of all those walks.
    pub walk_lines: u64,
}

impl SnapshotReport {
    /// Average memory references per walk.
    pub fn refs_per_page(&self) -> f64 {
        self.walk_refs as f64 / (self.walks.max(1)) as f64
    }
    /// Average cache lines per walk.
    pub fn lines_per_page(&self) -> f64 {
        self.walk_lines as f64 / (self.walks.max(1)) as f64
    }
    /// Page-table bytes (without bucket arrays) per mapped page.
    pub fn bytes_per_page(&self) -> f64 {
        self.size.table_bytes as f64 / (self.mapped_pages.max(1)) as f64
    }
}

/// The pages of `p` in units of `2^to_shift` bytes, given snapshot pages of `2^from_shift`
/// bytes: a design page is mapped if any snapshot page inside it is resident, and a snapshot
/// page larger than the design's page maps all the design pages it covers. Ascending, without
/// duplicates, and made one at a time: the design pages of a snapshot of large pages are
/// bounded by the design's memory (prefaulting them runs out of frames), never held in a list.
fn pages_in(p: &ProcessSnapshot, from_shift: u32, to_shift: u32) -> impl Iterator<Item = u64> + '_ {
    let (up, down) = (from_shift.saturating_sub(to_shift), to_shift.saturating_sub(from_shift));
    let mut last = None;
    p.resident
        .iter()
        // The pages were checked to lie in the design's address space: no shift overflows.
        .flat_map(move |&v| {
            let base = v << up;
            (0..1u64 << up).map(move |k| (base + k) >> down)
        })
        .filter(move |&v| last.replace(v) != Some(v))
}

/// Builds each design's page table from `snap` — every resident page of every process mapped
/// (ASID = the process's index), frames from the design's frame allocator — and reports its size
/// and the cost of a walk over every mapped page (no TLB, no page-walk caches).
pub fn evaluate(snap: &Snapshot, configs: &[Config]) -> Result<Vec<SnapshotReport>, SnapshotError> {
    configs.iter().map(|c| evaluate_one(snap, c)).collect()
}

fn evaluate_one(snap: &Snapshot, config: &Config) -> Result<SnapshotReport, SnapshotError> {
    let param = |error| SnapshotError::Param { config: config.name.clone(), error };
    config.validate().map_err(param)?;
    let page_size = PageSize::from_bytes(config.page_size).expect("validated");
    // Walks measure the table alone: no TLB and no page-walk caches (which, over pages walked in
    // ascending order, would hit almost always and hide the table's structure).
    let mut cfg = config.clone();
    cfg.page_table.pwc.clear();
    let mut sys = System::new(&cfg).map_err(param)?;
    let snap_shift = PageSize::from_bytes(snap.page_size)
        .ok_or_else(|| {
            param(ParamError::new("page_size", format!("snapshot page size {} is not a power of two", snap.page_size)))
        })?
        .shift();
    let shift = page_size.shift();
    let (va_bits, key) = config.page_table.translated_va_bits();
    let mut per_process = Vec::with_capacity(snap.processes.len());
    let mut rec = WalkRecord::default();
    let (mut walks, mut walk_refs, mut walk_lines) = (0u64, 0u64, 0u64);
    // Check every address first: a table never sees a page it cannot hold.
    let limit: u128 = 1u128 << va_bits.min(64);
    for p in &snap.processes {
        if let Some(&last) = p.resident.last() {
            if ((last as u128 + 1) << snap_shift) > limit {
                let addr = u64::try_from((last as u128) << snap_shift).unwrap_or(u64::MAX);
                return Err(SnapshotError::AddressRange {
                    config: config.name.clone(),
                    pid: p.pid,
                    addr,
                    va_bits,
                    key,
                });
            }
        }
    }
    for (i, p) in snap.processes.iter().enumerate() {
        let asid = Asid(i as u32);
        let mut n = 0u64;
        for v in pages_in(p, snap_shift, shift) {
            n += 1;
            // Each page is faulted in through the design's OS model, so page reservation,
            // superpages and partial-subblock PTEs shape the table as they would at run time.
            sys.prefault(asid, Vpn(v)).map_err(|e| match e {
                DesignError::OutOfMemory { error, .. } => {
                    SnapshotError::OutOfMemory { config: config.name.clone(), error }
                }
                other => SnapshotError::Param {
                    config: config.name.clone(),
                    error: ParamError::new("page_table", other.to_string()),
                },
            })?;
        }
        per_process.push(n);
    }
    for (i, p) in snap.processes.iter().enumerate() {
        let asid = Asid(i as u32);
        for v in pages_in(p, snap_shift, shift) {
            rec.reset();
            let found = sys.page_table_mut().walk(asid, Vpn(v), &mut NoTlb, &mut rec);
            debug_assert!(found.is_some(), "a mapped page is found");
            walks += 1;
            walk_refs += rec.mem_refs;
            walk_lines += rec.cache_lines;
        }
    }
    Ok(SnapshotReport {
        name: config.name.clone(),
        page_size: config.page_size,
        kind: sys.page_table().kind(),
        size: sys.page_table().size(),
        mapped_pages: per_process.iter().sum(),
        mapped_per_process: per_process,
        walks,
        walk_refs,
        walk_lines,
    })
}

/// The JSON report of `xlat run --snapshot` (`docs/snapshot-format.md`).
pub fn json(snap: &Snapshot, file: &str, reports: &[SnapshotReport]) -> serde_json::Value {
    use serde_json::json;
    let processes: Vec<_> = snap
        .processes
        .iter()
        .enumerate()
        .map(|(i, p)| {
            json!({
                "asid": i, "pid": p.pid, "ppid": p.ppid, "command": p.command,
                "regions": p.regions.len(), "resident_pages": p.resident.len(), "rss_pages": p.rss_pages,
            })
        })
        .collect();
    let configs: Vec<_> = reports
        .iter()
        .map(|r| {
            json!({
                "name": r.name,
                "page_size": r.page_size,
                "mapped_pages": r.mapped_pages,
                "mapped_pages_per_process": r.mapped_per_process,
                "page_table": {
                    "kind": r.kind.name(), "bytes": r.size.table_bytes,
                    "bucket_bytes": r.size.bucket_bytes, "objects": r.size.objects,
                    "bytes_per_page": r.bytes_per_page(),
                },
                "walk": {
                    "walks": r.walks, "memory_refs": r.walk_refs, "cache_lines": r.walk_lines,
                    "refs_per_page": r.refs_per_page(), "lines_per_page": r.lines_per_page(),
                },
            })
        })
        .collect();
    json!({
        "snapshot": {
            "file": file, "taken_at": snap.taken_at, "page_size": snap.page_size,
            "resident_pages": snap.resident_pages(), "regions": snap.regions(), "processes": processes,
        },
        "configs": configs,
    })
}

/// The text report of `xlat run --snapshot`: the processes, then one column per design.
pub fn table(snap: &Snapshot, file: &str, reports: &[SnapshotReport]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "snapshot {file}: taken at {}, {} B pages, {} process{}, {} regions, {} resident pages",
        snap.taken_at,
        snap.page_size,
        snap.processes.len(),
        if snap.processes.len() == 1 { "" } else { "es" },
        snap.regions(),
        snap.resident_pages()
    );
    for (i, p) in snap.processes.iter().enumerate() {
        let mut cmd: String = p.command.chars().take(60).collect();
        if cmd.len() < p.command.len() {
            cmd.push_str("...");
        }
        let _ = writeln!(
            s,
            "  asid {i}: pid {} (ppid {}), {} regions, {} resident pages (VmRSS {} pages): {cmd}",
            p.pid,
            p.ppid,
            p.regions.len(),
            p.resident.len(),
            p.rss_pages
        );
    }
    s.push('\n');
    let rows: Vec<(&str, Vec<String>)> = vec![
        ("design", reports.iter().map(|r| r.name.clone()).collect()),
        ("page table", reports.iter().map(|r| r.kind.name().to_string()).collect()),
        ("page size", reports.iter().map(|r| r.page_size.to_string()).collect()),
        ("mapped pages", reports.iter().map(|r| r.mapped_pages.to_string()).collect()),
        ("page_table.bytes", reports.iter().map(|r| r.size.table_bytes.to_string()).collect()),
        ("bucket_bytes", reports.iter().map(|r| r.size.bucket_bytes.to_string()).collect()),
        ("objects", reports.iter().map(|r| r.size.objects.to_string()).collect()),
        ("bytes / page", reports.iter().map(|r| format!("{:.2}", r.bytes_per_page())).collect()),
        ("walk refs / page", reports.iter().map(|r| format!("{:.3}", r.refs_per_page())).collect()),
        ("walk lines / page", reports.iter().map(|r| format!("{:.3}", r.lines_per_page())).collect()),
    ];
    let label = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let width = rows.iter().flat_map(|r| r.1.iter().map(String::len)).max().unwrap_or(0).max(10);
    for (name, cells) in rows {
        let _ = write!(s, "{name:<label$}");
        for c in cells {
            let _ = write!(s, "  {c:>width$}");
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(text: &str) -> Result<Snapshot, SnapshotError> {
        read_from(text.as_bytes(), "t.xsnap")
    }

    fn err_of(text: &str) -> String {
        parse(text).expect_err("must fail").to_string()
    }

    const GOOD: &str = "xlat-snapshot 1\npage_size 4096\ntaken_at peak\n\
        process 10 1 5 prog -x  y\n\
        region 400000 402000 r-xp 0 /bin/prog with space\n\
        region 7ff000 800000 rw-p 0\n\
        pages 400+2 7ff+1\n\
        # a comment\n\
        \n\
        pages 7ffff\n\
        process 11 10 0 child\n\
        end 2\n";

    #[test]
    fn reads_a_handwritten_file() {
        let s = parse(GOOD).unwrap();
        assert_eq!(s.page_size, 4096);
        assert_eq!(s.taken_at, "peak");
        assert_eq!(s.processes.len(), 2);
        let p = &s.processes[0];
        assert_eq!((p.pid, p.ppid, p.rss_pages), (10, 1, 5));
        assert_eq!(p.command, "prog -x  y");
        assert_eq!(p.regions[0].path, "/bin/prog with space");
        assert_eq!(
            p.regions[1],
            Region { start: 0x7ff000, end: 0x800000, perms: "rw-p".into(), offset: 0, path: "".into() }
        );
        assert_eq!(p.resident, vec![0x400, 0x401, 0x7ff, 0x7ffff]);
        assert!(s.processes[1].resident.is_empty());
    }

    #[test]
    fn run_length_encoding() {
        assert_eq!(runs(&[]), vec![]);
        assert_eq!(runs(&[5]), vec![(5, 1)]);
        assert_eq!(runs(&[1, 2, 3, 5, 6, 9]), vec![(1, 3), (5, 2), (9, 1)]);
        assert_eq!(runs(&[u64::MAX - 1, u64::MAX]), vec![(u64::MAX - 1, 2)]);
        assert_eq!(expand(&[(1, 3), (5, 2), (9, 1)]), vec![1, 2, 3, 5, 6, 9]);
        // A million consecutive pages are one run: one short token in the file.
        let big: Vec<u64> = (0x10000..0x10000 + 1_000_000).collect();
        let mut out = Vec::new();
        let snap = Snapshot {
            processes: vec![ProcessSnapshot {
                pid: 1,
                ppid: 0,
                command: "x".into(),
                regions: vec![],
                resident: big,
                rss_pages: 0,
            }],
            taken_at: "now".into(),
            page_size: 4096,
        };
        write_to(&snap, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("\npages 10000+1000000\n"), "{text}");
        assert!(text.len() < 100);
    }

    #[test]
    fn malformed_input_names_the_line() {
        let cases: &[(&str, &str)] = &[
            ("", "t.xsnap: line 1: empty file"),
            ("hello\n", "t.xsnap: line 1: not an xlat snapshot"),
            ("xlat-snapshot 2\n", "t.xsnap: line 1: snapshot format version 2 is not supported"),
            ("xlat-snapshot x\n", "t.xsnap: line 1: bad header"),
            ("xlat-snapshot 1\npage_size 4096\ntaken_at peak\nprocess 1 0 0 a\n", "t.xsnap: line 5: truncated"),
            (
                "xlat-snapshot 1\npage_size 4096\ntaken_at peak\nprocess 1 0 0 a\npages 10+2 11+1\nend 1\n",
                "line 5: pages: run '11+1' does not start after",
            ),
            (
                "xlat-snapshot 1\npage_size 4096\ntaken_at peak\nprocess 1 0 0 a\npages 10+0\nend 1\n",
                "line 5: pages: expected runs",
            ),
            (
                "xlat-snapshot 1\npage_size 4096\ntaken_at peak\nprocess 1 0 0 a\npages zz\nend 1\n",
                "line 5: pages: expected runs",
            ),
            (
                "xlat-snapshot 1\npage_size 4096\ntaken_at peak\nprocess 1 0 0 a\nregion 10 5 r--p 0\nend 1\n",
                "line 5: region: START 0x10 must be below END 0x5",
            ),
            (
                "xlat-snapshot 1\npage_size 4096\ntaken_at peak\nprocess 1 0 0 a\nregion 10 20\nend 1\n",
                "line 5: region: expected",
            ),
            (
                "xlat-snapshot 1\npage_size 4096\ntaken_at peak\nprocess x 0 0 a\nend 1\n",
                "line 4: process: expected 'process PID PPID RSS_PAGES COMMAND', bad PID 'x'",
            ),
            (
                "xlat-snapshot 1\npage_size 4096\ntaken_at peak\nprocess 1 0 0 a\nend 2\n",
                "line 5: end: the file says 2 processes but holds 1",
            ),
            ("xlat-snapshot 1\npage_size 4096\ntaken_at peak\nend 0\nend 0\n", "line 5: text after the 'end' line"),
            ("xlat-snapshot 1\npage_size 4000\n", "line 2: page_size: expected a power of two"),
            ("xlat-snapshot 1\nprocess 1 0 0 a\n", "line 2: 'page_size' and 'taken_at' lines must come before"),
            (
                "xlat-snapshot 1\npage_size 4096\ntaken_at peak\npages 1+1\n",
                "line 4: 'pages' before any 'process' line",
            ),
            ("xlat-snapshot 1\npage_size 4096\ntaken_at peak\nfoo 1\n", "line 4: unknown line kind 'foo'"),
            ("xlat-snapshot 1\npage_size 4096\nend 0\n", "line 4: no 'taken_at' line"),
            (
                "xlat-snapshot 1\npage_size 4096\ntaken_at peak\nprocess 1 0 0 a\npages ffffffffffffffff+2\nend 1\n",
                "line 5: pages: run 'ffffffffffffffff+2' runs past",
            ),
        ];
        for (text, want) in cases {
            let e = err_of(text);
            assert!(e.contains(want), "{text:?}: got {e:?}, want {want:?}");
            assert!(!e.contains('\n'), "one line: {e:?}");
        }
        // Cutting a valid file anywhere before its last line is an error, never a shorter snapshot.
        let mut full = Vec::new();
        write_to(&parse(GOOD).unwrap(), &mut full).unwrap();
        let text = String::from_utf8(full).unwrap();
        let last_line_start = text.trim_end().rfind('\n').unwrap() + 1;
        for cut in 0..last_line_start {
            assert!(parse(&text[..cut]).is_err(), "cut at {cut} was accepted");
        }
    }

    #[test]
    fn maps_lines_parse() {
        let text = "00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/dbus-daemon\n\
                    7f1c2e000000-7f1c2e021000 rw-p 00000000 00:00 0 \n\
                    7ffd1b1d0000-7ffd1b1f1000 rw-p 00000000 00:00 0                          [stack]\n\
                    7f0000000000-7f0000001000 rw-s 00001000 00:05 12  /dev/shm/a b (deleted)\n\
                    ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";
        let r = parse_maps(text).unwrap();
        assert_eq!(r.len(), 5);
        assert_eq!(
            r[0],
            Region {
                start: 0x400000,
                end: 0x452000,
                perms: "r-xp".into(),
                offset: 0,
                path: "/usr/bin/dbus-daemon".into()
            }
        );
        assert_eq!(r[1].path, "");
        assert_eq!(r[2].path, "[stack]");
        assert_eq!((r[3].offset, r[3].path.as_str()), (0x1000, "/dev/shm/a b (deleted)"));
        assert!(skipped_region(&r[4]));
        assert!(parse_maps("zz-10 r--p 0 0:0 0\n").is_err());
    }

    #[test]
    fn captures_this_process() {
        // This test process is alive; its stack and code are resident.
        let s = capture_tree(std::process::id(), "now").unwrap();
        let me = &s.processes[0];
        assert_eq!(me.pid, std::process::id());
        assert!(me.regions.iter().any(|r| r.path == "[stack]"));
        assert!(!me.resident.is_empty());
        assert!(me.resident.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
        let here = &s as *const Snapshot as u64 / s.page_size;
        assert!(me.resident.binary_search(&here).is_ok(), "the page of a local variable is resident");
        assert!(matches!(capture_process(u32::MAX - 1, 4096), Err(SnapshotError::Capture { .. })));
    }

    fn one_process(pages: Vec<u64>, page_size: u64) -> Snapshot {
        Snapshot {
            processes: vec![ProcessSnapshot {
                pid: 7,
                ppid: 1,
                command: "p".into(),
                regions: vec![],
                resident: pages,
                rss_pages: 0,
            }],
            taken_at: "now".into(),
            page_size,
        }
    }

    fn design(extra: &str) -> Config {
        let text =
            format!("name = \"d\"\n{extra}\n[[tlb]]\nname = \"L1\"\nentries = 8\n[page_table]\nkind = \"hashed\"\n");
        Config::from_toml(&text, "test").unwrap()
    }

    #[test]
    fn evaluate_converts_page_sizes() {
        // 4 KB pages 0, 1, 2 and 5 in 8 KB pages: 0, 1, 2; in 2 KB pages: eight pages.
        let snap = one_process(vec![0, 1, 2, 5], 4096);
        let r = evaluate(&snap, &[design("page_size = 8192"), design("page_size = 2048")]).unwrap();
        assert_eq!(r[0].mapped_pages, 3);
        assert_eq!(r[1].mapped_pages, 8);
        assert_eq!(r[1].size.table_bytes, 8 * 24);
        assert_eq!(r[0].walks, 3);
        assert!(r[0].walk_refs >= 3);
    }

    /// One resident page of 64 TB is 2^34 pages of 4 KB: they are faulted in one at a time until
    /// the design's memory runs out, never listed first.
    #[test]
    fn a_snapshot_of_huge_pages_runs_out_of_memory_without_listing_its_small_pages() {
        let snap = one_process(vec![1], 1 << 46);
        let mut d = design("");
        d.page_table.va_bits = 64;
        d.os.memory_bytes = 1 << 26;
        let e = evaluate(&snap, &[d]).unwrap_err().to_string();
        assert!(e.starts_with("config 'd': physical memory exhausted after 16384 frames"), "{e}");
    }

    #[test]
    fn evaluate_errors_name_the_design() {
        let snap = one_process(vec![1 << 35], 4096);
        let mut d = design("");
        d.page_table.va_bits = 40;
        let e = evaluate(&snap, &[d.clone()]).unwrap_err().to_string();
        assert_eq!(
            e,
            "config 'd': process 7 has a resident page at 0x800000000000, outside the 40-bit virtual address space of its page table (page_table.va_bits)"
        );
        d.page_table.va_bits = 48;
        let top = one_process(vec![(1 << 36) - 1], 4096);
        assert!(evaluate(&top, &[d.clone()]).is_ok(), "the last page of a 48-bit space fits");
        d.os.memory_bytes = 8192;
        let e = evaluate(&one_process(vec![1, 2, 3], 4096), &[d.clone()]).unwrap_err().to_string();
        assert!(e.starts_with("config 'd': physical memory exhausted"), "{e}");
        d.page_table.buckets = 0;
        assert!(matches!(evaluate(&snap, &[d]), Err(SnapshotError::Param { .. })));
        // The last 512 MB page of a 64-bit space is 2^17 pages of 4 KB, without overflow; one
        // page further is no address at all.
        let huge = one_process(vec![u64::MAX >> 29], 1 << 29);
        let mut wide = design("");
        wide.page_table.va_bits = 64;
        wide.os.memory_bytes = 1 << 40;
        assert_eq!(evaluate(&huge, &[wide.clone()]).unwrap()[0].mapped_pages, 1 << 17);
        let beyond = one_process(vec![u64::MAX >> 28], 1 << 29);
        assert!(matches!(evaluate(&beyond, &[wide]), Err(SnapshotError::AddressRange { .. })));
    }

    fn region() -> impl Strategy<Value = Region> {
        (0u64..1 << 40, 1u64..1 << 20, "[-r][-w][-x][ps]", any::<u32>(), "[ -~]{0,20}").prop_map(
            |(start, len, perms, offset, path)| Region {
                start,
                end: start + len,
                perms,
                offset: offset as u64,
                // Paths keep inner spaces; leading/trailing ones are not representable.
                path: path.trim().to_string(),
            },
        )
    }

    fn process() -> impl Strategy<Value = ProcessSnapshot> {
        (
            any::<u32>(),
            any::<u32>(),
            any::<u64>(),
            "[!-~][ -~]{0,30}",
            proptest::collection::vec(region(), 0..5),
            proptest::collection::btree_set(prop_oneof![0u64..5000, any::<u64>()], 0..300),
        )
            .prop_map(|(pid, ppid, rss_pages, command, regions, pages)| ProcessSnapshot {
                pid,
                ppid,
                command: command.trim().to_string(),
                regions,
                resident: pages.into_iter().collect(),
                rss_pages,
            })
    }

    proptest! {
        #[test]
        fn format_round_trip(
            processes in proptest::collection::vec(process(), 0..4),
            shift in 1u32..30,
            taken_at in prop_oneof![Just("peak"), Just("exit"), Just("signal"), Just("now")],
        ) {
            let snap = Snapshot { processes, taken_at: taken_at.to_string(), page_size: 1 << shift };
            let mut out = Vec::new();
            write_to(&snap, &mut out).unwrap();
            let back = read_from(out.as_slice(), "rt").unwrap();
            prop_assert_eq!(back, snap);
        }

        #[test]
        fn runs_round_trip(pages in proptest::collection::btree_set(0u64..2000, 0..500)) {
            let pages: Vec<u64> = pages.into_iter().collect();
            let r = runs(&pages);
            prop_assert_eq!(expand(&r), pages.clone());
            // Maximal runs: consecutive runs never touch.
            for w in r.windows(2) {
                prop_assert!(w[0].0 + w[0].1 < w[1].0);
            }
        }
    }
}
