//! Writes the page-number stream a single-level TLB of a design sees (one number per page an
//! access touches, 4 KB pages, instruction fetches and data alike) for the benchmark's anchors:
//! `cargo run --release --example pages -- TRACE OUT.u64 OUT.oracleGeneral`.
//! `OUT.u64` holds the page numbers as little-endian u64s (for `benches/fa_lru.c`);
//! `OUT.oracleGeneral` holds the same requests in libCacheSim's oracleGeneral binary format
//! (u32 time, u64 object id, u32 size = 1, i64 next access = -1; 24 bytes, packed).
use std::io::{BufWriter, Write};
use xlat::trace::{Record, BATCH};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: pages TRACE OUT.u64 OUT.oracleGeneral");
        std::process::exit(2);
    }
    let mut r = xlat::trace::open::open_reader(&args[1], None).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let mut raw = BufWriter::new(std::fs::File::create(&args[2]).expect("create OUT.u64"));
    let mut og = BufWriter::new(std::fs::File::create(&args[3]).expect("create OUT.oracleGeneral"));
    let mut buf = Vec::new();
    let (mut n, mut asid) = (0u64, 0u64);
    while r.read_batch(&mut buf, BATCH).expect("readable trace") > 0 {
        for rec in &buf {
            match *rec {
                Record::Access { size, addr, .. } => {
                    let last = addr.saturating_add(size.max(1) as u64 - 1) >> 12;
                    for page in addr >> 12..=last {
                        let key = page | asid << 52;
                        raw.write_all(&key.to_le_bytes()).expect("write");
                        og.write_all(&(n as u32).to_le_bytes()).expect("write");
                        og.write_all(&key.to_le_bytes()).expect("write");
                        og.write_all(&1u32.to_le_bytes()).expect("write");
                        og.write_all(&(-1i64).to_le_bytes()).expect("write");
                        n += 1;
                    }
                }
                Record::Process { asid: a } | Record::ContextSwitch { asid: a } => asid = a as u64,
                _ => {}
            }
        }
    }
    raw.flush().expect("write");
    og.flush().expect("write");
    println!("{n}");
}
