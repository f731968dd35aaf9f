//! Seeded mutation fuzzing of every input xlat reads: the trace readers (lackey, xtr, ChampSim,
//! each raw and compressed, and format detection), address-space snapshots, design configs,
//! `xlat curve`'s arguments and sweep files, and the engine over every trace a reader accepts.
//! Each mutated input must be either accepted or rejected with a one-line error; a panic fails
//! the test, naming the target, seed and iteration so that the input can be made again. Curve
//! arguments and sweep files must also be checked within seconds and, when accepted, stay within
//! the bounds of what a curve or a sweep may hold.
//!
//! It runs briefly in the test command (`XLAT_FUZZ_ITERS`, default 300 mutants per target and
//! seed input) and for as long as wanted on demand:
//!
//! ```sh
//! XLAT_FUZZ_ITERS=100000 XLAT_FUZZ_SEED=7 cargo test --release -p xlat --test models fuzz::inputs -- --nocapture
//! ```
//!
//! Inputs are capped at 64 KiB, so a reader that allocates what a header claims, or loops
//! without reading, shows up as an abort or a test that does not finish.

use std::io::{Cursor, Read, Write};
use std::time::{Duration, Instant};

use super::{iterations, no_internal_errors, seed, Rng, VecReader};
use xlat::config::Config;
use xlat::engine::{self, RunOptions, System};
use xlat::trace::open::reader_from_stream;
use xlat::trace::Format;
use xlat::trace::{Kind, Record, BATCH};

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

fn simulate(records: Vec<Record>) {
    let mut systems = designs();
    engine::run(&mut VecReader(records, 0), &mut systems, RunOptions::default(), |_| {}).unwrap();
    no_internal_errors(&systems);
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
        // A timed preset without [os] also tries the kernel's footprint and costs.
        if *name == "x86-64" {
            let kernel = "[os]\nkernel_text_bytes = 8192\nkernel_data_bytes = 4096\nsyscall_cycles = 100\nswitch_cycles = 1000\n";
            inputs.push((format!("{name}+kernel"), toml::from_str(&format!("{text}\n{kernel}")).unwrap()));
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
                // Whatever validates must build.
                let mut systems = vec![System::new(&c).expect("a validated config builds")];
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
        assert_eq!(t.kernel, s.kernel.cycles, "time.breakdown.kernel is kernel.cycles");
        for part in [t.base, t.icache, t.dcache, t.translation, t.faults, t.remap, t.kernel] {
            assert!(t.cycles >= part, "time.cycles {} below a part {part}", t.cycles);
        }
        assert!(t.translation_share() <= 1.0, "translation_share {}", t.translation_share());
    }
}

/// Longest that checking one curve's arguments or one sweep file may take: far more than any
/// takes, far less than work without bound (a loop over every size for every associativity, a
/// product made before it is counted).
const CHECK_TIME: Duration = Duration::from_secs(10);

/// The fields of a curve's arguments, one a line: `--entries`, `--ways`, `--policy`,
/// `--page-size` (bytes) and `--sample` (empty: none).
fn curve_spec(text: &str) -> Result<xlat::curve::CurveSpec, String> {
    use xlat::curve;
    let fields: Vec<&str> = text.split('\n').collect();
    let field = |i: usize| fields.get(i).copied().unwrap_or("");
    let (entries, entries_range) = curve::parse_entries(field(0)).map_err(|e| e.to_string())?;
    let ways = curve::parse_ways(field(1)).map_err(|e| e.to_string())?;
    let policy = curve::parse_policy(field(2)).map_err(|e| e.to_string())?;
    let mut page_sizes = Vec::new();
    for p in field(3).split(',') {
        let p: u64 = p.trim().parse().map_err(|_| format!("--page-size: '{p}' is not a number"))?;
        if !page_sizes.contains(&p) {
            page_sizes.push(p);
        }
    }
    let sample = match field(4).trim() {
        "" => None,
        r => Some(r.parse::<f64>().map_err(|_| format!("--sample: '{r}' is not a number"))?),
    };
    Ok(curve::CurveSpec { entries, entries_range, ways, policy, page_sizes, sample, max_refs: None, seed: 1 })
}

#[test]
fn curve_arguments_never_panic_or_run_away() {
    use xlat::curve;
    let records = {
        let lackey = lackey_sample();
        let mut r = read_all(&lackey, Some(Format::Lackey)).expect("the sample reads");
        r.truncate(3000);
        r.extend([
            Record::ContextSwitch { asid: 2 },
            Record::Access { kind: Kind::Load, size: 8192, addr: 0x7f00_0000_0ff8 },
            Record::Unmap { start: 0x7f00_0000_0000, len: 1 << 20 },
            Record::Exit { asid: 2 },
        ]);
        r
    };
    let inputs: Vec<Vec<u8>> = [
        "1..300\nfull,1,2,4\nlru\n4096,2097152\n",
        "8,16,32,64\nfull,4\nfifo\n4096\n",
        "1..64\nfull\nlru\n8192\n0.25",
        "16,64,256\n2,4,full\nplru\n4096,16384\n",
        "1..40\nfull,2\nrandom\n4096\n",
        "1048576\n8,full\nnru\n1024\n",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let check = |text: &str| {
        let start = Instant::now();
        let checked = curve_spec(text).and_then(|spec| spec.pairs().map(|p| (spec, p)).map_err(|e| e.to_string()));
        assert!(start.elapsed() < CHECK_TIME, "checking {text:?} took {:?}", start.elapsed());
        let (spec, pairs) = match checked {
            Ok(ok) => ok,
            Err(e) => {
                assert!(!e.contains('\n') && e.starts_with("--"), "one line naming the flag: {e}");
                return false;
            }
        };
        let cost = spec.cost(&pairs);
        assert_eq!(cost.points, pairs.len() as u64 * spec.page_sizes.len() as u64);
        assert!(
            cost.points <= curve::MAX_POINTS
                && cost.tlbs <= curve::MAX_TLBS
                && cost.tlb_entries <= curve::MAX_TLB_ENTRIES
                && cost.set_depth <= curve::MAX_SET_DEPTH
                && cost.set_slots <= curve::MAX_SET_SLOTS,
            "{text:?} is accepted past a bound: {cost:?}"
        );
        // Run the curves that are cheap to build.
        let largest = pairs.iter().map(|p| p.0).max().unwrap_or(0);
        if cost.points <= 4096 && cost.tlb_entries <= 1 << 16 && cost.set_slots <= 1 << 20 && largest <= 1 << 16 {
            let r = curve::curve(&mut VecReader(records.clone(), 0), &spec, |_| {}).expect("an accepted curve runs");
            assert_eq!(r.curves.len(), spec.page_sizes.len());
            for c in &r.curves {
                assert_eq!(c.points.len(), pairs.len());
                assert!(c.points.iter().all(|p| p.misses <= c.lookups), "{text:?}");
            }
        }
        true
    };
    fuzz("curve-args", &inputs, |m| std::str::from_utf8(m).is_ok_and(check));
    // Mutated bytes rarely make arguments that parse; these are made to, from sizes, way
    // counts and page sizes near every bound.
    let mut rng = Rng(seed() ^ 0xc0ffee | 1);
    let num = |rng: &mut Rng| -> u64 {
        match rng.below(16) {
            0..=4 => 1 + rng.below(64) as u64,
            5..=9 => 1 << rng.below(21),
            10..=12 => (1 << rng.below(19)) * (1 + rng.below(3) as u64),
            13 | 14 => curve::MAX_SIZE as u64 + rng.below(3) as u64 - 1,
            _ => rng.next() >> rng.below(64),
        }
    };
    let (mut accepted, n) = (0, iterations());
    for i in 0..n {
        let entries = if rng.below(2) == 0 {
            let (a, b) = (num(&mut rng), num(&mut rng));
            format!("{}..{}", a.min(b), a.max(b))
        } else {
            (0..1 + rng.below(8)).map(|_| num(&mut rng).to_string()).collect::<Vec<_>>().join(",")
        };
        let ways = (0..1 + rng.below(6))
            .map(|_| match rng.below(8) {
                0 | 1 => "full".to_string(),
                2..=5 => (1u64 << rng.below(5)).to_string(),
                _ => num(&mut rng).min(1 << 21).to_string(),
            })
            .collect::<Vec<_>>()
            .join(",");
        let policy = ["lru", "lru", "fifo", "random", "nru", "plru"][rng.below(6)];
        let most = if rng.below(4) == 0 { 32 } else { 3 };
        let pages =
            (0..1 + rng.below(most)).map(|_| (1u64 << (10 + rng.below(31))).to_string()).collect::<Vec<_>>().join(",");
        let sample = ["", "", "", "0.1", "1", "0"][rng.below(6)];
        let text = format!("{entries}\n{ways}\n{policy}\n{pages}\n{sample}");
        match std::panic::catch_unwind(|| check(&text)) {
            Ok(ok) => accepted += ok as usize,
            Err(_) => panic!("curve arguments {i} (XLAT_FUZZ_SEED={}) panic: {text:?}", seed()),
        }
    }
    println!("curve-args-made: {n} made, {accepted} accepted, {} rejected", n - accepted);
    assert!(n < 20 || (accepted > 0 && accepted < n), "made curve arguments must be both accepted and rejected");
}

#[test]
fn sweep_files_never_panic_or_run_away() {
    use xlat::sweep::{self, Store, Sweep, WorkloadSource};
    let dir = tempfile::tempdir().unwrap();
    let mut w = xlat::trace::xtr::XtrWriter::new(Vec::new(), "fuzz").unwrap();
    let recs: Vec<Record> = (0..64)
        .map(|i| Record::Access { kind: Kind::ALL[i % 4], size: 8, addr: 0x40_0000 + 4096 * i as u64 })
        .collect();
    xlat::trace::TraceWriter::write(&mut w, &recs).unwrap();
    std::fs::write(dir.path().join("t.xtr"), w.finish_into_inner().unwrap()).unwrap();
    std::fs::write(
        dir.path().join("d.toml"),
        "name = \"d\"\n[[tlb]]\nname = \"L1\"\nentries = 64\nways = 4\n[page_table]\nkind = \"radix\"\n",
    )
    .unwrap();
    let workloads_dir = dir.path().join("workloads");
    let default_dir = move |_| workloads_dir.clone();
    // No workload to build: a `workload:NAME` trace names none of an empty manifest.
    let source = std::panic::AssertUnwindSafe(WorkloadSource {
        manifest: ("workload = []\n", "fuzz manifest"),
        default_dir: &default_dir,
        on_build: &|name| panic!("fuzzing builds no workload, not {name}"),
    });
    let store = Store::new(&dir.path().join("out"));
    let inputs: Vec<Vec<u8>> = [
        "base = \"x86-64\"\ntraces = [\"t.xtr\"]\nmax_refs = 1000\n[vary]\n\"tlb.0.entries\" = [16, 32, 64]\n\
         \"page_table.kind\" = [\"radix\", \"hashed\"]\n[[zip]]\n\"tlb.2.entries\" = [512, 1024]\n\"tlb.2.ways\" = [4, 8]\n",
        "base = \"d.toml\"\ntraces = [\"t.xtr\", \"./t.xtr\"]\n[vary]\n\"tlb.0.entries\" = [8, 16, 32, 64, 128]\n\
         \"tlb.0.policy\" = [\"lru\", \"fifo\", \"random\"]\n\"tlb.0.ways\" = [1]\n",
        "base = \"mips-r3000\"\ntraces = [\"t.xtr\"]\n[[zip]]\n\"tlb.0.entries\" = [64, 128]\n\"name\" = [\"x\", \"y\"]\n\
         [workloads]\nsize = \"small\"\n",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let check = |text: &str| {
        let start = Instant::now();
        let parsed = Sweep::from_toml(text, "fuzz.toml", dir.path(), &source);
        assert!(start.elapsed() < CHECK_TIME, "checking {text:?} took {:?}", start.elapsed());
        match parsed {
            Ok(s) => {
                let rows = s.points.len() * s.traces.len();
                assert!(rows as u64 <= sweep::MAX_ROWS, "{text:?}: {rows} rows accepted");
                let tasks = s.tasks(&store, 2, 32);
                assert_eq!(tasks.iter().map(|t| t.points.len()).sum::<usize>(), rows);
                let (columns, table) = s.table(&store);
                assert_eq!(table.len(), rows);
                assert!(table.iter().all(|r| r.len() == columns.len()));
                true
            }
            Err(e) => {
                assert!(!e.to_string().contains('\n'), "one line: {e}");
                false
            }
        }
    };
    fuzz("sweep", &inputs, |m| std::str::from_utf8(m).is_ok_and(check));
    // Made sweeps: products of every size, from one point to past 2^64, over one to three
    // traces, with zipped groups of equal and unequal lengths and values valid and not.
    let pool: &[(&str, &[&str])] = &[
        ("tlb.0.entries", &["16", "32", "64", "128", "0", "7", "4294967296"]),
        ("tlb.0.ways", &["1", "2", "4", "8", "3"]),
        ("tlb.1.policy", &["\"lru\"", "\"fifo\"", "\"random\"", "\"nru\"", "\"plru\"", "\"mru\""]),
        ("page_table.kind", &["\"radix\"", "\"hashed\"", "\"linear\"", "\"clustered\""]),
        ("cache.0.size", &["16384", "32768", "65536", "-1"]),
        ("stlb.entries", &["256", "512"]),
        ("name", &["\"a\"", "\"b\""]),
    ];
    let mut rng = Rng(seed() ^ 0x5eeb | 1);
    let (mut accepted, n) = (0, iterations());
    for i in 0..n {
        let mut text = String::from("base = \"x86-64\"\n");
        let traces = ["\"t.xtr\"", "\"./t.xtr\"", "\"missing.xtr\""];
        let most = if rng.below(8) == 0 { 3 } else { 2 };
        text.push_str(&format!("traces = [{}]\n", traces[..1 + rng.below(most)].join(", ")));
        // Mostly short lists; now and then lists long enough that their product passes the
        // bound, or so many lists that it passes 2^64.
        let long = rng.below(6) == 0;
        let len = |rng: &mut Rng| if long { 200 + rng.below(600) } else { 1 + rng.below(3) };
        let keys = if long && rng.below(3) == 0 { 70 } else { 1 + rng.below(4) };
        text.push_str("[vary]\n");
        for k in 0..keys {
            let (path, vals) = pool[k % pool.len()];
            let key = if k < pool.len() { path.to_string() } else { format!("cache.{k}.size") };
            let l = if keys > pool.len() { 2 } else { len(&mut rng) };
            let vals: Vec<String> = (0..l)
                .map(|j| {
                    if path == "name" {
                        format!("\"n{}\"", j % (l + rng.below(2)))
                    } else if rng.below(12) == 0 {
                        vals[rng.below(vals.len())].to_string()
                    } else if vals.len() > 4 || l <= vals.len() {
                        vals[j % vals.len().min(4)].to_string()
                    } else {
                        // Long lists of distinct valid values.
                        (j + 1).to_string()
                    }
                })
                .collect();
            text.push_str(&format!("\"{key}\" = [{}]\n", vals.join(", ")));
        }
        if rng.below(3) == 0 {
            let l = len(&mut rng);
            let other = if rng.below(8) == 0 { l + 1 } else { l };
            let a: Vec<String> = (0..l).map(|j| ((1 + j % 4) * 256).to_string()).collect();
            let b: Vec<String> = (0..other).map(|j| (1 << (j % 4)).to_string()).collect();
            text.push_str(&format!(
                "[[zip]]\n\"tlb.2.entries\" = [{}]\n\"tlb.2.ways\" = [{}]\n",
                a.join(", "),
                b.join(", ")
            ));
        }
        match std::panic::catch_unwind(|| check(&text)) {
            Ok(ok) => accepted += ok as usize,
            Err(_) => {
                let dump = std::env::temp_dir().join(format!("xlat-fuzz-sweep-made-{i}.toml"));
                let _ = std::fs::write(&dump, &text);
                panic!("made sweep {i} (XLAT_FUZZ_SEED={}) panics; file in {}", seed(), dump.display());
            }
        }
    }
    println!("sweep-made: {n} made, {accepted} accepted, {} rejected", n - accepted);
    assert!(n < 20 || (accepted > 0 && accepted < n), "made sweeps must be both accepted and rejected");
}
