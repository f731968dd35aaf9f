//! Writes a window of a trace for the benchmark: `cargo run --release --example window -- TRACE
//! OUT.xtr SKIP COUNT` keeps the trace's accesses from the `SKIP`-th (counted from 0) to the one
//! before `SKIP + COUNT`, with every event before and within them (processes, switches, maps,
//! unmaps, forks, exits, markers), so that the window starts with the processes and mappings the
//! program had at that point; the events after the window are dropped. Prints the accesses kept.
use xlat::trace::{Record, BATCH};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let parse = |s: &str| s.parse::<u64>().unwrap_or_else(|_| usage());
    if args.len() != 5 {
        usage();
    }
    let (skip, count) = (parse(&args[3]), parse(&args[4]));
    let mut r = xlat::trace::open::open_reader(&args[1], None).unwrap_or_else(|e| fail(e));
    let mut w = xlat::trace::open::create_writer(&args[2], None).unwrap_or_else(|e| fail(e));
    let (mut buf, mut out) = (Vec::new(), Vec::with_capacity(BATCH));
    let mut n = 0u64;
    'read: while r.read_batch(&mut buf, BATCH).unwrap_or_else(|e| fail(e)) > 0 {
        out.clear();
        for rec in &buf {
            if let Record::Access { .. } = rec {
                n += 1;
                if n <= skip {
                    continue;
                }
                if n > skip + count {
                    w.write(&out).unwrap_or_else(|e| fail(e));
                    out.clear();
                    break 'read;
                }
            }
            out.push(*rec);
        }
        w.write(&out).unwrap_or_else(|e| fail(e));
    }
    w.finish().unwrap_or_else(|e| fail(e));
    println!("{}", n.saturating_sub(skip).min(count));
}

fn usage() -> ! {
    eprintln!("usage: window TRACE OUT.xtr SKIP COUNT");
    std::process::exit(2)
}

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("{e}");
    std::process::exit(2)
}
