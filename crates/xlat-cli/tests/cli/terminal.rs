//! What the command does for a terminal and for a file: tables that fit a width, progress lines
//! on standard error only on a terminal and never under `-q`.

use crate::common::*;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Stdio;

const SIX: [&str; 6] = ["x86-64", "x86-64-5level", "itanium2", "pa-8000", "ultrasparc", "talluri95"];

/// Six designs side by side would make lines of about 175 characters: printed to a file, the
/// table comes in blocks of columns no wider than 100, each with its labels, and together the
/// blocks hold every design's column once.
#[test]
fn six_designs_fit_100_columns_in_blocks() {
    let t = demo_xtr();
    let mut args = vec!["run", "--trace", s(&t)];
    for p in SIX {
        args.extend(["--preset", p]);
    }
    let out = run(&args);
    assert!(out.status.success(), "{}", describe(&out));
    let table = String::from_utf8(out.stdout).unwrap();
    for line in table.lines() {
        assert!(line.chars().count() <= 100, "{} characters: {line}", line.chars().count());
    }
    let configs: Vec<&str> = table.lines().filter(|l| l.starts_with("config ")).collect();
    assert!(configs.len() >= 2, "one block would be too wide: {table}");
    let names: Vec<&str> = configs.iter().flat_map(|l| l.split_whitespace().skip(1)).collect();
    assert_eq!(names, SIX);
    // Every block has the rows of its designs: six lookup counts in all (at 4 KB pages the
    // trace's 739,689; larger pages straddle fewer boundaries).
    let lookups: Vec<u64> = table
        .lines()
        .filter(|l| l.starts_with("lookups "))
        .flat_map(|l| l.split_whitespace().skip(1).map(|n| n.parse().unwrap()))
        .collect();
    assert_eq!(lookups.len(), 6);
    assert_eq!(lookups.iter().filter(|&&n| n == 739_689).count(), 4, "{lookups:?}");
    // Rows no design of a block has are left out of it: talluri95 and pa-8000 have no caches.
    let blocks: Vec<&str> = table.split("\nconfig ").collect();
    let last = blocks.last().unwrap();
    if !last.contains("x86-64") && !last.contains("itanium2") {
        assert!(!last.contains("cache #1"), "{last}");
    }
}

/// A pseudo-terminal on which standard error is the terminal, `cols` columns wide.
fn pty(cols: u16) -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    let ws = libc::winsize { ws_row: 40, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: openpty writes two descriptors, which are owned from here on.
    let r = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &ws) };
    assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
    unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

/// Runs `xlat args` with standard error on a pseudo-terminal; returns what reached the terminal.
fn on_terminal(args: &[&str]) -> String {
    let (master, slave) = pty(120);
    let mut child = xlat(args).stdout(Stdio::null()).stderr(Stdio::from(slave)).spawn().expect("xlat starts");
    // The child holds the only other end; reading stops with EIO once it has exited.
    let mut terminal = std::fs::File::from(master);
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match terminal.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    assert!(child.wait().unwrap().success());
    String::from_utf8_lossy(&seen).into_owned()
}

/// On a terminal, `xlat run`, `xlat info` and `xlat curve` show progress (the references read
/// and, for a run, the designs); with `-q` they show none.
#[test]
fn progress_on_a_terminal_and_none_under_quiet() {
    let t = lackey_fixture();
    let shown = on_terminal(&["run", "--preset", "x86-64", "--preset", "talluri95", "--trace", s(&t)]);
    assert!(shown.contains("references read, 2 designs simulated"), "{shown:?}");
    let shown = on_terminal(&["info", s(&t)]);
    assert!(shown.contains("records read"), "{shown:?}");
    let shown = on_terminal(&["curve", "--trace", s(&t), "--entries", "1..64"]);
    assert!(shown.contains("references read"), "{shown:?}");
    for args in [
        vec!["run", "-q", "--preset", "x86-64", "--trace", s(&t)],
        vec!["info", "-q", s(&t)],
        vec!["curve", "-q", "--trace", s(&t)],
    ] {
        let shown = on_terminal(&args);
        assert!(!shown.contains(" read") && !shown.contains('\u{1b}'), "{args:?}: {shown:?}");
    }
}

/// Standard error that is not a terminal gets no progress line: only the summary line.
#[test]
fn no_progress_when_stderr_is_not_a_terminal() {
    let t = lackey_fixture();
    for args in [vec!["run", "--preset", "x86-64", "--trace", s(&t)], vec!["info", s(&t)]] {
        let out = run(&args);
        assert!(out.status.success(), "{}", describe(&out));
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(!err.contains('\r') && !err.contains('\u{1b}') && !err.contains(" read"), "{args:?}: {err:?}");
    }
}
