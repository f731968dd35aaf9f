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
