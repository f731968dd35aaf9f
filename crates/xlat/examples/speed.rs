//! Splits a run's time into its two threads' work: `cargo run --release --example speed -- TRACE [CONFIG.toml]`.
//! The reader's (decompression, decoding, counting and page words, all on one thread as
//! [`xlat::engine::run`]'s reader thread does them) and the simulation's (over records decoded
//! beforehand into memory). `XLAT_SPEED_REPS=N` reports the best of N of each.
use std::time::Instant;
use xlat::config::Config;
use xlat::engine::System;
use xlat::trace::{BatchWords, TraceCounts, BATCH};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = &args[1];
    let reps: usize = std::env::var("XLAT_SPEED_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(1).max(1);
    let mut read = f64::INFINITY;
    for _ in 0..reps {
        let t = Instant::now();
        let mut r = xlat::trace::open::open_reader_inline(path, None).unwrap().0;
        let (mut buf, mut words, mut counts) = (Vec::new(), Vec::new(), TraceCounts::default());
        while r
            .read_batch_words(
                &mut buf,
                BATCH,
                BatchWords {
                    words: &mut words,
                    shift: 12,
                    counts: &mut counts,
                    all_records: false,
                    for_other_core: false,
                },
            )
            .unwrap()
            > 0
        {}
        read = read.min(t.elapsed().as_secs_f64());
    }
    let mut r = xlat::trace::open::open_reader(path, None).unwrap();
    let (mut all, mut buf) = (Vec::new(), Vec::new());
    while r.read_batch(&mut buf, BATCH).unwrap() > 0 {
        all.extend_from_slice(&buf);
    }
    let cfg = match args.get(2) {
        Some(p) => Config::from_file(std::path::Path::new(p)).unwrap(),
        None => Config::preset("x86-64").unwrap(),
    };
    let mut sim = f64::INFINITY;
    let mut sys = System::new(&cfg).unwrap();
    for _ in 0..reps {
        sys = System::new(&cfg).unwrap();
        let t = Instant::now();
        for c in all.chunks(BATCH) {
            sys.process(c).unwrap();
        }
        sim = sim.min(t.elapsed().as_secs_f64());
    }
    let n = sys.stats().lookups as f64;
    println!(
        "records {} read+count {:.3}s ({:.1} M/s)  simulate {:.3}s ({:.1} M lookups/s)",
        all.len(),
        read,
        all.len() as f64 / read / 1e6,
        sim,
        n / sim / 1e6
    );
}
