//! Seeded mutation fuzzing of every input xlat reads: the trace readers (lackey, xtr, ChampSim,
//! each raw and compressed, and format detection), address-space snapshots and design configs,
//! and the engine over every trace a reader accepts. Each mutated input must be either accepted
//! or rejected with an error; a panic fails the test, naming the target, seed and iteration so
//! that the input can be made again.
//!
//! It runs briefly in the test command (`XLAT_FUZZ_ITERS`, default 300 mutants per target and
//! seed input) and for as long as wanted on demand:
//!
//! ```sh
//! XLAT_FUZZ_ITERS=100000 XLAT_FUZZ_SEED=7 cargo test --release -p xlat --test fuzz -- --nocapture
//! ```
//!
//! Inputs are capped at 64 KiB, so a reader that allocates what a header claims, or loops
//! without reading, shows up as an abort or a test that does not finish.

use std::io::{Cursor, Read, Write};
use xlat::config::Config;
use xlat::engine::{self, RunOptions, System};
use xlat::trace::open::reader_from_stream;
use xlat::trace::Format;
use xlat::trace::{Kind, Record, BATCH};

/// A small seeded generator (xorshift), so that every run makes the same mutants.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Interesting bytes and numbers to splice in.
const SPICE: &[&[u8]] = &[
    b"\xff\xff\xff\xff\xff\xff\xff\xff",
    b"\x00\x00\x00\x00",
    b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",
    b"18446744073709551615",
    b"4294967296",
    b"+2000000000000000000",
    b"ffffffffffff0000,4294967295",
    b"\n",
    b"[[tlb]]\n",
    b"= -1\n",
    b"0x",
    b"XTR\0",
];

/// One mutant of `input`: a few flips, insertions, deletions, splices or a truncation.
fn mutate(input: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(7) {
            0 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] ^= 1 << rng.below(8);
            }
            1 => v.insert(at, rng.next() as u8),
            2 if at < v.len() => {
                let n = rng.below(16).min(v.len() - at);
                v.drain(at..at + n);
            }
            3 => {
                let s = SPICE[rng.below(SPICE.len())];
                v.splice(at..at, s.iter().copied());
            }
            4 => v.truncate(at),
            5 if !v.is_empty() => {
                // Duplicate a chunk elsewhere.
                let from = rng.below(v.len());
                let n = rng.below(64).min(v.len() - from);
                let chunk = v[from..from + n].to_vec();
                v.splice(at..at, chunk);
            }
            _ => {
                let i = at.min(v.len().saturating_sub(1));
                if let Some(b) = v.get_mut(i) {
                    *b = [0u8, 0xff, b'\n', b' ', b'+', b'9'][rng.below(6)];
                }
            }
        }
    }
    v.truncate(64 << 10);
    v
}

fn iterations() -> usize {
    std::env::var("XLAT_FUZZ_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(300)
}

fn seed() -> u64 {
    std::env::var("XLAT_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1)
}

/// Runs `check` over mutants of each seed input; a panic is reported with how to remake it.
/// `check` says whether the input was accepted; both outcomes must occur, or the mutants test
/// nothing.
fn fuzz(target: &str, inputs: &[Vec<u8>], check: impl Fn(&[u8]) -> bool + std::panic::RefUnwindSafe) {
    let n = iterations();
    let mut accepted = 0;
    for (k, input) in inputs.iter().enumerate() {
        assert!(check(input), "{target}: seed input {k} is accepted");
        let mut rng = Rng(seed().wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (k as u64 + 1) << 32 | 1);
        for i in 0..n {
            let m = mutate(input, &mut rng);
            let r = std::panic::catch_unwind(|| check(&m));
            accepted += matches!(r, Ok(true)) as usize;
            if r.is_err() {
                let dump = std::env::temp_dir().join(format!("xlat-fuzz-{target}-{k}-{i}.bin"));
                let _ = std::fs::write(&dump, &m);
                panic!(
                    "{target}: seed input {k}, mutant {i} (XLAT_FUZZ_SEED={}) panics; input in {}",
                    seed(),
                    dump.display()
                );
            }
        }
    }
    let total = n * inputs.len();
    println!("{target}: {total} mutants, {accepted} accepted, {} rejected", total - accepted);
    assert!(total < 20 || (accepted > 0 && accepted < total), "{target}: mutants must be both accepted and rejected");
}

fn compress(data: &[u8], how: &str) -> Vec<u8> {
    match how {
        "zst" => zstd::encode_all(data, 3).unwrap(),
        "lz4" => {
            let mut w = xlat::trace::lz4::FrameWriter::new(Vec::new());
            w.write_all(data).unwrap();
            w.finish().unwrap()
        }
        "gz" => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        _ => data.to_vec(),
    }
}

/// A few thousand references of the bundled real trace, as lackey text.
fn lackey_sample() -> Vec<u8> {
    let mut text = Vec::new();
    let f = std::fs::File::open(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/sort-400.lackey.zst")).unwrap();
    zstd::Decoder::new(f).unwrap().take(24 << 10).read_to_end(&mut text).unwrap();
    text.truncate(text.iter().rposition(|&b| b == b'\n').unwrap() + 1);
    text
}

/// The records of `lackey` plus events of every kind, as an xtr stream.
fn xtr_sample(records: &[Record]) -> Vec<u8> {
    let mut all = vec![Record::Process { asid: 1 }];
    all.extend_from_slice(&records[..records.len().min(600)]);
    all.extend([
        Record::Fork { child: 2 },
        Record::ContextSwitch { asid: 2 },
        Record::Map { start: 0x7f00_0000_0000, len: 1 << 20, flags: 3 },
        Record::Access { kind: Kind::Store, size: 4096, addr: 0x7f00_0000_0ff8 },
        Record::Unmap { start: 0x7f00_0000_0000, len: 1 << 20 },
        Record::Exit { asid: 2 },
        Record::Marker { id: 7 },
    ]);
    let mut w = xlat::trace::xtr::XtrWriter::new(Vec::new(), "fuzz").unwrap();
    xlat::trace::TraceWriter::write(&mut w, &all).unwrap();
    w.finish_into_inner().unwrap()
}

/// Reads a whole trace; returns its records if the reader accepts it.
fn read_all(bytes: &[u8], format: Option<Format>) -> Option<Vec<Record>> {
    let (mut r, _) =
        reader_from_stream(Box::new(Cursor::new(bytes.to_vec())), "fuzz", format, Some(bytes.len() as u64), false)
            .ok()?;
    let mut all = Vec::new();
    let mut buf = Vec::with_capacity(BATCH);
    loop {
        match r.read_batch(&mut buf, BATCH) {
            Ok(0) => return Some(all),
            Ok(_) => all.extend_from_slice(&buf),
            Err(e) => {
                assert!(!e.to_string().contains('\n'), "an error is one line: {e}");
                return None;
            }
        }
    }
}

/// Designs the engine runs every accepted trace through: failures are allowed, panics not.
fn designs() -> Vec<System> {
    let mut r3000 = Config::preset("mips-r3000").unwrap();
    r3000.os.memory_bytes = 1 << 24;
    let sub = Config::from_toml(
        "name = \"s\"\n[[tlb]]\nname = \"L1\"\nentries = 16\nformat = \"complete-subblock\"\nprefetch = true\n\
         [[tlb]]\nname = \"L2\"\nlevel = 2\nentries = 64\nformat = \"superpage\"\n[page_table]\nkind = \"clustered\"\n\
         [os]\nreservation = true\nsuperpages = \"promote\"\nframe_allocator = \"buddy\"\n",
        "fuzz",
    )
    .unwrap();
    // Itanium: layout, regions (few, so purges and exhaustion), keys, both VHPTs.
    let short = Config::preset("itanium2-linux").unwrap();
    let mut sharing = Config::preset("itanium2-lvhpt-sharing").unwrap();
    sharing.itanium.as_mut().unwrap().rid_bits = 6;
    sharing.itanium.as_mut().unwrap().pkrs = 2;
    sharing.page_table.vhpt_entries = 64;
    [Config::preset("x86-64").unwrap(), r3000, sub, short, sharing].iter().map(|c| System::new(c).unwrap()).collect()
}

struct VecReader(Vec<Record>, usize);

impl xlat::trace::TraceReader for VecReader {
    fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, xlat::trace::TraceError> {
        out.clear();
        let n = (self.0.len() - self.1).min(max);
        out.extend_from_slice(&self.0[self.1..self.1 + n]);
        self.1 += n;
        Ok(n)
    }
    fn stats(&self) -> xlat::trace::ReaderStats {
        xlat::trace::ReaderStats::default()
    }
}

fn simulate(records: Vec<Record>) {
    let mut systems = designs();
    engine::run(&mut VecReader(records, 0), &mut systems, RunOptions::default(), |_| {}).unwrap();
    no_internal_errors(&systems);
}

/// A design may fail on a trace it cannot simulate, but never by a bug: the engine turns a
/// panic inside a design into `DesignError::Internal`, which is a finding here.
fn no_internal_errors(systems: &[System]) {
    for s in systems {
        if let Some(f) = s.failure() {
            assert!(!matches!(f.error, engine::DesignError::Internal { .. }), "{}", f.error);
        }
    }
}

#[test]
fn trace_readers_and_the_engine_never_panic() {
    let lackey = lackey_sample();
    let records = read_all(&lackey, Some(Format::Lackey)).expect("the sample reads");
    let xtr = xtr_sample(&records);
    let mut champsim = Vec::new();
    for (i, r) in records.iter().take(200).enumerate() {
        let mut rec = [0u8; 64];
        if let Record::Access { addr, .. } = r {
            rec[..8].copy_from_slice(&(0x40_0000 + 4 * i as u64).to_le_bytes());
            rec[16..24].copy_from_slice(&addr.to_le_bytes());
        }
        champsim.extend_from_slice(&rec);
    }
    let with = |f: Format| {
        move |m: &[u8]| match read_all(m, Some(f)) {
            Some(recs) => {
                simulate(recs);
                true
            }
            None => false,
        }
    };
    fuzz("lackey", &[lackey.clone(), compress(&lackey, "gz")], with(Format::Lackey));
    fuzz("xtr", &[xtr.clone(), compress(&xtr, "zst"), compress(&xtr, "lz4")], with(Format::Xtr));
    fuzz("champsim", &[champsim.clone(), compress(&champsim, "zst")], with(Format::Champsim));
    fuzz("detect", &[lackey, xtr, champsim], |m| match read_all(m, None) {
        Some(recs) => {
            simulate(recs);
            true
        }
        None => false,
    });
}

#[test]
fn snapshot_reader_never_panics() {
    let text = b"xlat-snapshot 1\npage_size 4096\ntaken_at peak\n\
        process 4242 4241 16172 python3 -c import time\n\
        region 5566b716e000 5566b716f000 r--p 0 /usr/bin/python3.11\n\
        region 7f7b7dd87000 7f7b810bb000 rw-p 0\n\
        pages 5566b716e+1 5566c5b6b+403 7f7b7dd87+1285\n\
        process 4250 4242 310 worker\npages 400+2 7ffd1b1d0\nend 2\n";
    fuzz("snapshot", &[text.to_vec()], |m| match xlat::snapshot::read_from(Cursor::new(m), "fuzz") {
        Ok(snap) => {
            let mut x86 = Config::preset("x86-64").unwrap();
            x86.os.memory_bytes = 1 << 26;
            let _ = xlat::snapshot::evaluate(&snap, &[x86, Config::preset("mips-r3000").unwrap()]);
            true
        }
        Err(e) => {
            assert!(!e.to_string().contains('\n'), "one line: {e}");
            false
        }
    });
}

#[test]
fn config_parser_never_panics() {
    let inputs: Vec<Vec<u8>> = ["x86-64", "itanium2", "talluri95", "mips-r3000"]
        .iter()
        .map(|p| xlat::config::PRESETS.iter().find(|(n, _)| n == p).unwrap().1.as_bytes().to_vec())
        .collect();
    fuzz("config", &inputs, |m| {
        let Ok(text) = std::str::from_utf8(m) else { return false };
        match Config::from_toml(text, "fuzz.toml") {
            Ok(c) => {
                // Whatever validates must build.
                System::new(&c).expect("a validated config builds");
                true
            }
            Err(e) => {
                assert!(!e.to_string().contains('\n'), "one line: {e}");
                false
            }
        }
    });
}

/// Records no mutation of a file reaches: extreme addresses and sizes, events on unknown or
/// reused ASIDs, unmaps of huge ranges, forks onto live processes. Written as xtr and read back
/// (the round trip must be exact), then simulated.
#[test]
fn the_engine_never_panics_on_odd_records() {
    let mut rng = Rng((seed() ^ 0x5eed_0dd5).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    for i in 0..iterations().div_ceil(10) {
        let mut recs = Vec::new();
        for _ in 0..200 + rng.below(400) {
            let addr = match rng.below(6) {
                0 => u64::MAX - rng.below(1 << 16) as u64,
                1 => rng.next(),
                2 => rng.next() & 0xffff_ffff,
                _ => 0x7f00_0000_0000 + (rng.next() & 0xf_ffff),
            };
            let r = match rng.below(24) {
                0 => Record::Fork { child: rng.below(6) as u32 },
                1 => Record::Exit { asid: rng.below(6) as u32 },
                2 => Record::ContextSwitch { asid: rng.below(6) as u32 },
                3 => Record::Process { asid: rng.below(6) as u32 },
                4 => Record::Unmap { start: addr, len: [0, 1, 4096, 1 << 21, u64::MAX][rng.below(5)] },
                5 => Record::Map { start: addr, len: rng.next() >> rng.below(64), flags: rng.next() as u32 },
                6 => Record::Marker { id: rng.next() },
                7 => Record::Object { id: rng.below(4) as u32, offset: rng.next() >> rng.below(64) },
                _ => {
                    let size = if rng.below(100) == 0 { 1 + rng.below(1 << 22) } else { 1 + rng.below(64) } as u32;
                    Record::Access { kind: Kind::ALL[rng.below(4)], size, addr }
                }
            };
            recs.push(r);
        }
        let mut w = xlat::trace::xtr::XtrWriter::new(Vec::new(), "odd").unwrap();
        xlat::trace::TraceWriter::write(&mut w, &recs).unwrap();
        let bytes = w.finish_into_inner().unwrap();
        assert_eq!(read_all(&bytes, Some(Format::Xtr)).as_ref(), Some(&recs), "round trip {i}");
        if std::panic::catch_unwind(|| simulate(recs.clone())).is_err() {
            let dump = std::env::temp_dir().join(format!("xlat-fuzz-odd-{i}.xtr"));
            let _ = std::fs::write(&dump, &bytes);
            panic!(
                "odd records, round {i} (XLAT_FUZZ_SEED={}): the engine panics; trace in {}",
                seed(),
                dump.display()
            );
        }
    }
}

/// Extreme numbers for the config-section target: around every bound of docs/configuration.md
/// and past the ends of the integer types.
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "-1",
    "7",
    "63",
    "64",
    "65",
    "4096",
    "65536",
    "65537",
    "1048576",
    "1048577",
    "16777216",
    "16777217",
    "33554432",
    "67108864",
    "67108865",
    "2147483648",
    "4294967295",
    "4294967296",
    "4294967297",
    "9007199254740992",
    "9223372036854775807",
    "0.5",
    "1e300",
    "-0.0",
    "nan",
    "inf",
    "999.9",
    "1000.0",
];

/// Every numeric leaf of a TOML table, as a path of keys and array indices.
fn numeric_paths(v: &toml::Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        toml::Value::Integer(_) | toml::Value::Float(_) => out.push(path.clone()),
        toml::Value::Table(t) => {
            for (k, v) in t {
                path.push(k.clone());
                numeric_paths(v, path, out);
                path.pop();
            }
        }
        toml::Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                path.push(format!("#{i}"));
                numeric_paths(v, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// The leaf at `path`, if an earlier deletion left it there.
fn leaf_mut<'a>(v: &'a mut toml::Value, path: &[String]) -> Option<&'a mut toml::Value> {
    path.iter().try_fold(v, |v, k| match k.strip_prefix('#') {
        Some(i) => v.as_array_mut()?.get_mut(i.parse::<usize>().ok()?),
        None => v.as_table_mut()?.get_mut(k),
    })
}

fn leaf<'a>(v: &'a mut toml::Value, path: &[String]) -> &'a mut toml::Value {
    path.iter().fold(v, |v, k| match k.strip_prefix('#') {
        Some(i) => &mut v.as_array_mut().unwrap()[i.parse::<usize>().unwrap()],
        None => v.as_table_mut().unwrap().get_mut(k).unwrap(),
    })
}

/// The keys of every section of every preset, plus the sections presets leave out, set one or
/// two at a time to extreme numbers. A config must be refused with one line, or build and run
/// a short trace of processes, maps and accesses with every documented invariant holding: no
/// internal error, hits + misses = accesses, `walks.by_depth` summing to `walks.count`, and no
/// total of cycles below one of its parts (a wrapped number reads less).
#[test]
fn config_sections_hold_their_bounds() {
    let stlb = "[stlb]\nentries = 64\nways = 1\nhit_cycles = 105\nmiss_cycles = 70\n";
    let pt_cache = "[cost.cache]\nsize_bytes = 32768\nways = 8\nline_bytes = 64\nhit_cycles = 4\nmiss_cycles = 100\n";
    let mut inputs: Vec<(String, toml::Value)> = Vec::new();
    for (name, text) in xlat::config::PRESETS {
        inputs.push((name.to_string(), toml::from_str(text).unwrap()));
        // The untimed presets also try a software TLB and a page-table cache.
        if !text.contains("[[cache]]") && !text.contains("[stlb]") && !text.contains("[memory]") {
            let more = if text.contains("[cost.cache]") { stlb.to_string() } else { format!("{stlb}{pt_cache}") };
            inputs.push((format!("{name}+stlb"), toml::from_str(&format!("{text}\n{more}")).unwrap()));
        }
    }
    let mut records = Vec::new();
    for p in 0..3u32 {
        records.push(Record::Process { asid: p });
        records.push(Record::Map { start: 0x7f00_0000_0000 + (p as u64) * 0x10_0000, len: 1 << 20, flags: 3 });
        for i in 0..400u64 {
            let addr = 0x7f00_0000_0000 + (p as u64) * 0x10_0000 + (i * 4160) % (1 << 20);
            records.push(Record::Access { kind: Kind::ALL[(i % 4) as usize], size: 8, addr });
            records.push(Record::Access { kind: Kind::Ifetch, size: 4, addr: 0x40_0000 + 4 * i });
        }
    }
    let mut rng = Rng((seed() ^ 0xc0f1_65ec).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let (mut accepted, mut refused) = (0, 0);
    for i in 0..iterations() {
        let (name, base) = &inputs[rng.below(inputs.len())];
        let mut v = base.clone();
        let mut paths = Vec::new();
        numeric_paths(&v, &mut Vec::new(), &mut paths);
        let mut changed = Vec::new();
        for _ in 0..1 + rng.below(2) {
            let p = paths[rng.below(paths.len())].clone();
            let (last, parent) = p.split_last().unwrap();
            if rng.below(5) == 0 && !last.starts_with('#') {
                // A key left out: its default must fit the rest of the design too.
                if leaf(&mut v, parent).as_table_mut().unwrap().remove(last).is_some() {
                    changed.push(format!("{} deleted", p.join(".")));
                }
                continue;
            }
            let n = NUMBERS[rng.below(NUMBERS.len())];
            if let Some(x) = leaf_mut(&mut v, &p) {
                *x = toml::from_str::<toml::Table>(&format!("x = {n}")).unwrap().remove("x").unwrap();
                changed.push(format!("{} = {n}", p.join(".")));
            }
        }
        let text = toml::to_string(&v).unwrap();
        let what = format!("{name} with {} (mutant {i}, XLAT_FUZZ_SEED={})", changed.join(", "), seed());
        let r = std::panic::catch_unwind(|| match Config::from_toml(&text, "fuzz.toml") {
            Err(e) => {
                assert!(!e.to_string().contains('\n'), "one line: {e}");
                false
            }
            Ok(c) => {
                // Some cross-section checks still run when the design is built: a refusal
                // there must be one line too.
                let system = match System::new(&c) {
                    Ok(s) => s,
                    Err(e) => {
                        assert!(!e.to_string().contains('\n'), "one line: {e}");
                        return false;
                    }
                };
                let mut systems = vec![system];
                engine::run(&mut VecReader(records.clone(), 0), &mut systems, RunOptions::default(), |_| {}).unwrap();
                no_internal_errors(&systems);
                if systems[0].failure().is_none() {
                    check_totals(&systems[0].stats());
                }
                true
            }
        });
        match r {
            Ok(true) => accepted += 1,
            Ok(false) => refused += 1,
            Err(_) => panic!("config sections: {what} panics"),
        }
    }
    println!("config sections: {accepted} accepted, {refused} refused");
    assert!(iterations() < 20 || (accepted > 0 && refused > 0), "mutants must be both accepted and refused");
}

fn check_totals(s: &xlat::stats::SystemStats) {
    for t in &s.tlb {
        assert_eq!(t.hits + t.misses, t.accesses);
    }
    assert_eq!(s.walks.by_depth.iter().sum::<u64>(), s.walks.count, "walks.by_depth sums to walks.count");
    let c = &s.cycles;
    for part in [c.tlb, c.walk_memory, c.refill_overhead, c.page_fault] {
        assert!(c.total() >= part, "cycles.total {} below a part {part}", c.total());
    }
    if let Some(t) = &s.time {
        for part in [t.base, t.icache, t.dcache, t.translation, t.faults, t.remap] {
            assert!(t.cycles >= part, "time.cycles {} below a part {part}", t.cycles);
        }
        assert!(t.translation_share() <= 1.0, "translation_share {}", t.translation_share());
    }
}
