//! Splits a run's time into decoding and simulation: `cargo run --release --example speed -- TRACE [CONFIG.toml]`.
use std::time::Instant;
use xlat::config::Config;
use xlat::engine::System;
use xlat::trace::BATCH;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = &args[1];
    let t = Instant::now();
    let mut r = xlat::trace::open::open_reader(path, None).unwrap();
    let mut all = Vec::new();
    let mut buf = Vec::new();
    while r.read_batch(&mut buf, BATCH).unwrap() > 0 {
        all.extend_from_slice(&buf);
    }
    let decode = t.elapsed().as_secs_f64();
    let cfg = match args.get(2) {
        Some(p) => Config::from_file(std::path::Path::new(p)).unwrap(),
        None => Config::preset("x86-64").unwrap(),
    };
    let mut sys = System::new(&cfg).unwrap();
    let t = Instant::now();
    for c in all.chunks(BATCH) {
        sys.process(c).unwrap();
    }
    let sim = t.elapsed().as_secs_f64();
    let n = sys.stats().lookups as f64;
    println!(
        "records {} decode {:.3}s ({:.1} M/s)  simulate {:.3}s ({:.1} M lookups/s)",
        all.len(),
        decode,
        all.len() as f64 / decode / 1e6,
        sim,
        n / sim / 1e6
    );
}
