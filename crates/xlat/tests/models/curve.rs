//! `xlat::curve` against independent paths: the engine's `System` simulating each size as its
//! own design (same records, with process switches, unmaps and exits, on uniform streams and on
//! streams that alternate between two pages as programs do), and a brute-force LRU list.

use xlat::config::Config;
use xlat::curve::{self, CurveSpec, Ways};
use xlat::engine::{self, RunOptions, System};
use xlat::tlb::Policy;
use xlat::trace::{Kind, ReaderStats, Record, TraceError, TraceReader};

/// Hands out a vector of records in small batches.
struct VecReader(Vec<Record>, usize);

impl TraceReader for VecReader {
    fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, TraceError> {
        out.clear();
        let n = (self.0.len() - self.1).min(max).min(1000);
        out.extend_from_slice(&self.0[self.1..self.1 + n]);
        self.1 += n;
        Ok(n)
    }
    fn stats(&self) -> ReaderStats {
        ReaderStats::default()
    }
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// The events before reference `i` of `n` (random bits `r`): a switch among three processes
/// every `every.0` references, an unmap of up to 20 pages every `every.1`, and process 2's exit
/// halfway (it comes back later, empty).
fn push_events(v: &mut Vec<Record>, i: usize, n: usize, r: u64, every: (usize, usize)) {
    if i % every.0 == every.0 - 1 {
        v.push(Record::ContextSwitch { asid: 1 + (r % 3) as u32 });
    }
    if i % every.1 == 0 {
        let start = (r >> 20) % 300 * 4096;
        v.push(Record::Unmap { start, len: 4096 * (1 + (r >> 40) % 20) });
    }
    if i % 911 == 0 {
        let start = (r >> 24) % 300 * 4096;
        v.push(Record::Map { start, len: 4096 * (1 + (r >> 44) % 30), flags: (r >> 50) as u32 % 8 });
    }
    if i % 613 == 0 {
        // Rights taken or given back: only the pages that lose one are invalidated.
        let start = (r >> 22) % 300 * 4096;
        v.push(Record::Protect { start, len: 4096 * (1 + (r >> 42) % 40), flags: (r >> 52) as u32 % 8 });
    }
    if i % 1009 == 0 {
        let start = (r >> 21) % 300 * 4096;
        v.push(Record::Discard { start, len: 4096 * (1 + (r >> 41) % 10), lazy: r >> 63 == 1 });
    }
    if i == n / 2 {
        v.push(Record::Exit { asid: 2 });
    }
}

/// A seeded stream over three processes: hot and cold pages, accesses that span pages,
/// switches, unmaps of ranges and an exit (the exiting process comes back later, empty).
fn records(seed: u64, n: usize) -> Vec<Record> {
    let mut s = seed;
    let mut v = Vec::with_capacity(n + n / 50);
    for i in 0..n {
        let r = xorshift(&mut s);
        push_events(&mut v, i, n, r, (500, 733));
        let page = if r % 4 == 0 { (r >> 8) % 400 } else { (r >> 8) % 24 };
        let kind = Kind::ALL[(r >> 50) as usize % 4];
        let size = if r % 97 == 0 { 8192 } else { 8 };
        v.push(Record::Access { kind, size, addr: page * 4096 + (r >> 30) % 4096 });
    }
    v
}

/// A seeded stream as programs make them: instruction fetches and data references alternating
/// between a current code page and a current data page (often the same page, often pages that
/// share sets), each moving now and then, with accesses that span pages, switches, unmaps and
/// an exit. Most references go to one of the two pages used last, the runs `xlat curve` counts
/// apart from its stacks.
fn local_records(seed: u64, n: usize) -> Vec<Record> {
    let mut s = seed;
    let mut v = Vec::with_capacity(n + n / 50);
    // Pages whose low bits agree (multiples of 8 and 64) put both in one set at many set counts.
    let pick = |r: u64| match r % 4 {
        0 => (r >> 8) % 300,
        1 => (r >> 8) % 16 * 8,
        2 => (r >> 8) % 8 * 64,
        _ => (r >> 8) % 12,
    };
    let (mut code, mut data) = (0u64, 8u64);
    for i in 0..n {
        let r = xorshift(&mut s);
        push_events(&mut v, i, n, r, (1500, 2203));
        match r % 64 {
            0 => code = pick(r >> 6),
            1..=3 => data = pick(r >> 6),
            4 => data = code,
            _ => {}
        }
        let kind = if (r >> 12) % 2 == 0 { Kind::Ifetch } else { Kind::ALL[1 + (r >> 13) as usize % 3] };
        let page = if kind == Kind::Ifetch { code } else { data };
        let size = if r % 211 == 0 { 8192 } else { 4 };
        v.push(Record::Access { kind, size, addr: page * 4096 + (r >> 30) % 4096 });
    }
    v
}

fn design(entries: u32, ways: u32, policy: Policy, page_size: u64) -> Config {
    let text = format!(
        "name = \"e{entries}w{ways}\"\npage_size = {page_size}\n[[tlb]]\nname = \"L1\"\nentries = {entries}\nways = {ways}\npolicy = \"{}\"\n[page_table]\nkind = \"radix\"\n",
        policy.name()
    );
    Config::from_toml(&text, "test").unwrap()
}

fn spec(entries: &[u32], ways: &[Ways], policy: Policy, page_sizes: &[u64]) -> CurveSpec {
    CurveSpec {
        entries: entries.to_vec(),
        entries_range: false,
        ways: ways.to_vec(),
        policy,
        page_sizes: page_sizes.to_vec(),
        sample: None,
        max_refs: None,
        seed: 1,
    }
}

/// Every point of the curve equals the misses of its own engine design over the same records.
fn check_against_engine(recs: &[Record], sp: &CurveSpec) {
    let result = curve::curve(&mut VecReader(recs.to_vec(), 0), sp, |_| {}).unwrap();
    for (c, &ps) in result.curves.iter().zip(&sp.page_sizes) {
        let mut systems: Vec<System> =
            c.points.iter().map(|p| System::new(&design(p.entries, p.ways, sp.policy, ps)).unwrap()).collect();
        engine::run(&mut VecReader(recs.to_vec(), 0), &mut systems, RunOptions::default(), |_| {}).unwrap();
        assert!(!c.points.is_empty());
        for (p, s) in c.points.iter().zip(&systems) {
            let st = s.stats();
            assert_eq!(c.lookups, st.tlb[0].accesses, "lookups at page size {ps}");
            assert_eq!(
                p.misses,
                st.tlb[0].misses,
                "{} entries, {} ways, {} policy, page size {ps}",
                p.entries,
                p.ways,
                sp.policy.name()
            );
        }
    }
}

#[test]
fn lru_curve_equals_engine_designs_with_switches_unmaps_and_exits() {
    for seed in [3, 11] {
        let recs = records(seed, 30_000);
        let sp = spec(
            &[1, 2, 3, 8, 16, 24, 64, 128],
            &[Ways::Full, Ways::N(1), Ways::N(2), Ways::N(4)],
            Policy::Lru,
            &[4096, 8192, 2 << 20],
        );
        // Pairs whose ways exceed the entries are refused in a list: use what fits.
        let mut sp = sp;
        sp.entries_range = true;
        check_against_engine(&recs, &sp);
    }
}

#[test]
fn runs_over_two_pages_equal_engine_designs() {
    for seed in [7, 19] {
        let recs = local_records(seed, 30_000);
        let mut sp = spec(
            &[1, 2, 4, 8, 16, 32, 64, 128],
            &[Ways::Full, Ways::N(1), Ways::N(2), Ways::N(4), Ways::N(8)],
            Policy::Lru,
            &[4096, 1 << 15],
        );
        sp.entries_range = true;
        check_against_engine(&recs, &sp);
        // Without a fully associative size (entries equal to ways), whose stack also checks
        // the two pages.
        check_against_engine(
            &recs,
            &spec(&[8, 16, 64, 256], &[Ways::N(1), Ways::N(2), Ways::N(4)], Policy::Lru, &[4096]),
        );
        // Without set-associative sizes, the fully associative stack's own runs.
        check_against_engine(&recs, &spec(&[1, 2, 3, 4, 8, 64], &[Ways::Full], Policy::Lru, &[4096]));
    }
}

#[test]
fn other_policies_equal_engine_designs() {
    for recs in [records(5, 20_000), local_records(5, 20_000)] {
        for policy in [Policy::Fifo, Policy::Random, Policy::Nru, Policy::Plru] {
            let mut sp = spec(&[1, 4, 16, 64], &[Ways::Full, Ways::N(1), Ways::N(4)], policy, &[4096]);
            sp.entries_range = true;
            check_against_engine(&recs, &sp);
        }
    }
}

#[test]
fn lru_curve_equals_brute_force_lists() {
    // A plain most-recent-first list per size, no events: misses by definition.
    let recs: Vec<Record> = records(17, 20_000).into_iter().filter(|r| matches!(r, Record::Access { .. })).collect();
    let sizes: Vec<u32> = (1..=40).collect();
    let mut sp = spec(&sizes, &[Ways::Full], Policy::Lru, &[4096]);
    sp.entries_range = true;
    let result = curve::curve(&mut VecReader(recs.clone(), 0), &sp, |_| {}).unwrap();
    for p in &result.curves[0].points {
        let mut list: Vec<u64> = Vec::new();
        let mut misses = 0;
        for r in &recs {
            let Record::Access { size, addr, .. } = *r else { unreachable!() };
            for page in addr >> 12..=(addr + size as u64 - 1) >> 12 {
                match list.iter().position(|&x| x == page) {
                    Some(i) => {
                        list.remove(i);
                    }
                    None => {
                        misses += 1;
                        list.truncate(p.entries as usize - 1);
                    }
                }
                list.insert(0, page);
            }
        }
        assert_eq!(p.misses, misses, "{} entries", p.entries);
    }
}

#[test]
fn sampled_curve_tracks_the_exact_one() {
    // Sampling every page (rate 1) is exact; a lower rate stays close on a large footprint.
    let recs: Vec<Record> = (0..200_000u64)
        .map(|i| {
            let mut s = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            let r = xorshift(&mut s);
            let page = if r % 3 == 0 { r % 20_000 } else { r % 2000 };
            Record::Access { kind: Kind::Load, size: 8, addr: page << 12 }
        })
        .collect();
    let sizes = [256, 512, 1024, 2048, 4096];
    let exact_spec = spec(&sizes, &[Ways::Full], Policy::Lru, &[4096]);
    let exact = curve::curve(&mut VecReader(recs.clone(), 0), &exact_spec, |_| {}).unwrap();
    let mut one = exact_spec.clone();
    one.sample = Some(1.0);
    let same = curve::curve(&mut VecReader(recs.clone(), 0), &one, |_| {}).unwrap();
    assert_eq!(same.curves, exact.curves);
    let mut sampled = exact_spec.clone();
    sampled.sample = Some(0.1);
    let approx = curve::curve(&mut VecReader(recs, 0), &sampled, |_| {}).unwrap();
    let n = exact.curves[0].lookups as f64;
    for (e, a) in exact.curves[0].points.iter().zip(&approx.curves[0].points) {
        let err = (e.misses as f64 - a.misses as f64).abs() / n;
        assert!(
            err < 0.02,
            "{} entries: miss ratio {} exact, {} sampled",
            e.entries,
            e.misses as f64 / n,
            a.misses as f64 / n
        );
    }
}

#[test]
fn bad_pairs_are_refused_naming_the_flag() {
    let cases: &[(&[u32], &[Ways], &str)] = &[
        (&[4], &[Ways::N(8)], "8 ways exceed 4 entries"),
        (&[48], &[Ways::N(4)], "12 sets"),
        (&[10], &[Ways::N(4)], "do not divide"),
    ];
    for (e, w, want) in cases {
        let err = spec(e, w, Policy::Lru, &[4096]).pairs().unwrap_err().to_string();
        assert!(err.starts_with("--ways") && err.contains(want), "{err}");
    }
    assert!(curve::parse_ways("0").is_err());
    assert!(curve::parse_entries("8..4").is_err());
    assert!(curve::parse_entries("0,8").is_err());
    assert!(curve::parse_policy("mru").unwrap_err().to_string().contains("expected lru, fifo"));
    let mut sp = spec(&[64], &[Ways::Full], Policy::Lru, &[4096]);
    sp.sample = Some(0.0);
    assert!(sp.pairs().unwrap_err().to_string().starts_with("--sample"));
}

/// A spec over the range `a..=b` of sizes.
fn range_spec(a: u32, b: u32, ways: &[Ways], policy: Policy, page_sizes: &[u64]) -> CurveSpec {
    let mut sp = spec(&(a..=b).collect::<Vec<_>>(), ways, policy, page_sizes);
    sp.entries_range = true;
    sp
}

#[test]
fn side_by_side_tlbs_above_the_bound_are_refused_before_they_are_built() {
    // Every size to 100000 with FIFO once allocated TLB after TLB until memory ran out.
    let err = range_spec(1, 100_000, &[Ways::Full], Policy::Fifo, &[4096]).pairs().unwrap_err().to_string();
    assert!(err.starts_with("--entries: ") && err.contains("100000 TLBs") && err.contains("256"), "{err}");
    assert!(err.contains("--policy lru"), "{err}");
    // Every size to 4096 cost a lookup in each of 4096 TLBs per reference.
    let err = range_spec(1, 4096, &[Ways::Full], Policy::Random, &[4096]).pairs().unwrap_err().to_string();
    assert!(err.contains("4096 TLBs"), "{err}");
    // Sizes, associativities and page sizes multiply.
    let err = spec(&[8, 16, 32, 64], &[Ways::Full, Ways::N(1), Ways::N(2), Ways::N(4)], Policy::Nru, &[4096; 1])
        .pairs()
        .map(|p| p.len())
        .unwrap();
    assert_eq!(err, 16);
    let sizes: Vec<u64> = (12..29).map(|k| 1u64 << k).collect();
    let err = spec(&[8, 16, 32, 64], &[Ways::Full, Ways::N(1), Ways::N(2), Ways::N(4)], Policy::Nru, &sizes)
        .pairs()
        .unwrap_err()
        .to_string();
    assert!(err.contains("272 TLBs"), "{err}");
    // Few TLBs, but too many entries in all: five page sizes of a 2^20-entry TLB.
    let sizes: Vec<u64> = (12..17).map(|k| 1u64 << k).collect();
    let err = spec(&[1 << 20], &[Ways::Full], Policy::Fifo, &sizes).pairs().unwrap_err().to_string();
    assert!(err.starts_with("--entries: ") && err.contains("5242880 entries") && err.contains("4194304"), "{err}");
    // At the bounds: accepted, and what it holds is what the bounds allow.
    let sp = range_spec(1, 256, &[Ways::Full], Policy::Fifo, &[4096]);
    let pairs = sp.pairs().unwrap();
    let cost = sp.cost(&pairs);
    assert_eq!((cost.points, cost.tlbs, cost.tlb_entries), (256, curve::MAX_TLBS, 256 * 257 / 2));
    let sp = spec(&[1 << 20; 1], &[Ways::Full], Policy::Fifo, &[4096, 8192, 16384, 32768]);
    assert_eq!(sp.cost(&sp.pairs().unwrap()).tlb_entries, curve::MAX_TLB_ENTRIES);
}

#[test]
fn lru_over_every_size_to_the_largest_is_one_pass_and_linear() {
    // Each point once summed the histogram up to its size: minutes for every size to 2^20.
    let recs = records(5, 20_000);
    let start = std::time::Instant::now();
    let sp = range_spec(1, curve::MAX_SIZE, &[Ways::Full], Policy::Lru, &[4096]);
    let all = curve::curve(&mut VecReader(recs.clone(), 0), &sp, |_| {}).unwrap();
    assert!(start.elapsed().as_secs() < 30, "{:?}", start.elapsed());
    let points = &all.curves[0].points;
    assert_eq!(points.len(), 1 << 20);
    let some = curve::curve(&mut VecReader(recs, 0), &range_spec(1, 500, &[Ways::Full], Policy::Lru, &[4096]), |_| {})
        .unwrap();
    assert_eq!(&points[..500], &some.curves[0].points[..]);
    // Past the footprint, every size misses only on first references (and after invalidations).
    assert_eq!(points[4999].misses, points[(1 << 20) - 1].misses);
}

#[test]
fn deep_set_associative_stacks_are_refused_naming_the_flag() {
    // 2 sets of 524288 ways: every reference searched and shifted a stack that deep.
    let err = spec(&[1 << 20], &[Ways::N(1 << 19)], Policy::Lru, &[4096]).pairs().unwrap_err().to_string();
    assert!(err.starts_with("--ways: ") && err.contains("524288 deep") && err.contains("16384"), "{err}");
    // `full` is one stack of every size at once, without that bound.
    assert!(spec(&[1 << 20], &[Ways::Full], Policy::Lru, &[4096]).pairs().is_ok());
    // Shallow stacks at many set counts and page sizes: too many slots in all.
    let sizes: Vec<u32> = (4..=20).map(|k| 1u32 << k).collect();
    let ways = [Ways::N(1), Ways::N(2), Ways::N(4), Ways::N(8)];
    let pages: Vec<u64> = (12..26).map(|k| 1u64 << k).collect();
    let sp = spec(&sizes, &ways, Policy::Lru, &pages);
    let err = sp.pairs().unwrap_err().to_string();
    assert!(err.starts_with("--ways: ") && err.contains("73400096") && err.contains("67108864"), "{err}");
    let sp = spec(&sizes, &ways, Policy::Lru, &pages[..12]);
    let c = sp.cost(&sp.pairs().unwrap());
    assert_eq!((c.points, c.set_depth, c.set_slots), (17 * 4 * 12, (8 * 17 + 4 + 2 + 1) * 12, 5_242_864 * 12));
}

#[test]
fn curves_above_the_point_bound_are_refused() {
    let pages = [4096, 8192, 16384];
    let err = range_spec(1, curve::MAX_SIZE, &[Ways::Full], Policy::Lru, &pages).pairs().unwrap_err().to_string();
    assert!(err.starts_with("--entries: ") && err.contains("2097152"), "{err}");
    assert!(range_spec(1, curve::MAX_SIZE, &[Ways::Full], Policy::Lru, &pages[..2]).pairs().is_ok());
}

#[test]
fn a_long_ways_list_over_a_long_range_is_checked_at_once() {
    // Every associativity was tried at every size (and compared with every other): 2^20 sizes
    // times 20000 associativities.
    let ways: Vec<Ways> = std::iter::once(Ways::Full).chain((1..=20_000).map(Ways::N)).collect();
    let start = std::time::Instant::now();
    let err = range_spec(1, curve::MAX_SIZE, &ways, Policy::Lru, &[4096]).pairs().unwrap_err().to_string();
    assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
    assert!(err.starts_with("--ways: ") && err.contains("deep"), "{err}");
    // The same pairs, in the same order, as trying every associativity at every size:
    // entries-major, associativities as listed, and `full` once where a way count names the
    // same pair.
    for (policy, ways) in [
        (Policy::Lru, vec![Ways::N(4), Ways::Full, Ways::N(8), Ways::N(3), Ways::N(12), Ways::N(16)]),
        (Policy::Plru, vec![Ways::N(4), Ways::Full, Ways::N(8), Ways::N(2)]),
    ] {
        for (a, b) in [(1, 64), (6, 16), (24, 200)] {
            let sp = range_spec(a, b, &ways, policy, &[4096]);
            let mut want = Vec::new();
            for e in a..=b {
                let first = want.len();
                for w in &ways {
                    let w = match *w {
                        Ways::Full => e,
                        Ways::N(n) => n,
                    };
                    let fits = w <= e
                        && e % w == 0
                        && (e / w).is_power_of_two()
                        && (policy != Policy::Plru || w.is_power_of_two());
                    if fits && !want[first..].contains(&(e, w)) {
                        want.push((e, w));
                    }
                }
            }
            match sp.pairs() {
                Ok(pairs) => assert_eq!(pairs, want, "{a}..{b}, {}", policy.name()),
                Err(e) => panic!("{a}..{b}, {}: {e}", policy.name()),
            }
        }
    }
}

#[test]
fn zero_sizes_and_ways_from_library_callers_are_errors_not_panics() {
    // A caller that fills a spec itself, past the parsers: a zero divided.
    let err = spec(&[0], &[Ways::Full], Policy::Lru, &[4096]).pairs().unwrap_err().to_string();
    assert!(err.starts_with("--entries"), "{err}");
    let err = spec(&[8], &[Ways::N(0)], Policy::Fifo, &[4096]).pairs().unwrap_err().to_string();
    assert!(err.starts_with("--ways"), "{err}");
    let err = spec(&[u32::MAX], &[Ways::Full], Policy::Lru, &[4096]).pairs().unwrap_err().to_string();
    assert!(err.starts_with("--entries"), "{err}");
    let err = spec(&[8], &[Ways::Full], Policy::Lru, &[4096, 4096]).pairs().unwrap_err().to_string();
    assert!(err.starts_with("--page-size") && err.contains("twice"), "{err}");
    // A size listed twice counts once.
    assert_eq!(spec(&[8, 16, 8], &[Ways::Full], Policy::Lru, &[4096]).pairs().unwrap(), [(8, 8), (16, 16)]);
}

#[test]
fn argument_errors_quote_the_argument_on_one_short_line() {
    let long = (1..20_000).map(|i| i.to_string()).collect::<Vec<_>>().join(",") + ",x";
    for err in [
        curve::parse_entries(&long).unwrap_err().to_string(),
        curve::parse_entries("8\n9").unwrap_err().to_string(),
        curve::parse_ways("4,8\r\n9").unwrap_err().to_string(),
        curve::parse_policy(&"l".repeat(100_000)).unwrap_err().to_string(),
    ] {
        assert!(!err.contains(['\n', '\r']) && err.len() < 300, "{err}");
    }
}
