//! Synthetic trace generator.

use std::collections::HashMap;

use xlat::trace::gen::{GenSpec, Generator, Pattern, BASE};
use xlat::trace::{Kind, Record, TraceReader};

fn gen_all(spec: GenSpec, batch: usize) -> Vec<(Kind, u32, u64)> {
    let mut g = Generator::new(spec).unwrap();
    let mut all = Vec::new();
    let mut b = Vec::new();
    while g.read_batch(&mut b, batch).unwrap() > 0 {
        assert!(b.len() <= batch.max(1));
        all.extend(b.iter().map(|r| match *r {
            Record::Access { kind, size, addr } => (kind, size, addr),
            other => panic!("unexpected {other:?}"),
        }));
    }
    assert_eq!(g.stats().records, spec.refs);
    all
}

fn spec(pattern: Pattern) -> GenSpec {
    GenSpec {
        pattern,
        refs: 100_000,
        footprint: 1 << 20,
        stride: 4096,
        zipf_s: 1.0,
        burst: 1000,
        seed: 42,
        access_size: 8,
        store_fraction: 0.25,
    }
}

#[test]
fn pattern_names() {
    for p in [Pattern::Sequential, Pattern::Strided, Pattern::Uniform, Pattern::Zipf, Pattern::Mix] {
        assert_eq!(Pattern::from_name(p.name()), Some(p));
    }
    assert_eq!(Pattern::from_name("random"), Some(Pattern::Uniform));
    assert_eq!(Pattern::from_name("gaussian"), None);
}

#[test]
fn deterministic_for_a_seed_and_batching() {
    for p in [Pattern::Sequential, Pattern::Strided, Pattern::Uniform, Pattern::Zipf, Pattern::Mix] {
        let a = gen_all(spec(p), 4096);
        assert_eq!(a.len(), 100_000);
        assert_eq!(a, gen_all(spec(p), 1000));
        assert_eq!(a, gen_all(spec(p), 7));
        if matches!(p, Pattern::Uniform | Pattern::Zipf | Pattern::Mix) {
            let other = gen_all(GenSpec { seed: 43, ..spec(p) }, 4096);
            assert_ne!(a, other, "{p:?}");
        }
    }
}

#[test]
fn sequential_walks_and_wraps() {
    let s = GenSpec {
        refs: 3000,
        footprint: 8000, // 1000 slots of 8 bytes
        store_fraction: 0.0,
        ..spec(Pattern::Sequential)
    };
    let v = gen_all(s, 4096);
    for (i, &(kind, size, addr)) in v.iter().enumerate() {
        assert_eq!(kind, Kind::Load);
        assert_eq!(size, 8);
        assert_eq!(addr, BASE + (i as u64 % 1000) * 8);
    }
}

#[test]
fn strided_touches_each_page_once_per_sweep() {
    let s = GenSpec { refs: 1024, footprint: 1 << 20, stride: 4096, ..spec(Pattern::Strided) };
    let v = gen_all(s, 100);
    for (i, &(_, _, addr)) in v.iter().enumerate() {
        assert_eq!(addr, BASE + (i as u64 % 256) * 4096);
    }
    // A stride that does not divide the footprint wraps to 0 before crossing the end.
    let s = GenSpec { refs: 10, footprint: 100, stride: 30, access_size: 8, ..spec(Pattern::Strided) };
    let offs: Vec<u64> = gen_all(s, 100).iter().map(|x| x.2 - BASE).collect();
    assert_eq!(offs, vec![0, 30, 60, 90, 0, 30, 60, 90, 0, 30]);
}

#[test]
fn uniform_stays_in_footprint_and_covers_it() {
    let s = GenSpec { footprint: 64 * 4096, ..spec(Pattern::Uniform) };
    let v = gen_all(s, 4096);
    let mut pages = HashMap::new();
    let mut stores = 0;
    for &(kind, size, addr) in &v {
        assert!(addr >= BASE && addr + size as u64 <= BASE + s.footprint);
        assert_eq!(addr % 8, 0);
        *pages.entry((addr - BASE) / 4096).or_insert(0u64) += 1;
        stores += (kind == Kind::Store) as u64;
    }
    assert_eq!(pages.len(), 64);
    // Roughly uniform: every page near 100000/64 = 1562.
    assert!(pages.values().all(|&c| (1300..1850).contains(&c)), "{pages:?}");
    assert!((23_000..27_000).contains(&stores), "{stores}");
}

#[test]
fn zipf_is_skewed_and_in_footprint() {
    let s = GenSpec { refs: 200_000, footprint: 1000 * 4096, zipf_s: 1.0, ..spec(Pattern::Zipf) };
    let v = gen_all(s, 4096);
    let mut pages: HashMap<u64, u64> = HashMap::new();
    for &(_, size, addr) in &v {
        assert!(addr >= BASE && addr + size as u64 <= BASE + s.footprint);
        *pages.entry((addr - BASE) / 4096).or_insert(0) += 1;
    }
    let mut counts: Vec<u64> = pages.values().copied().collect();
    counts.sort_unstable_by(|a, b| b.cmp(a));
    // P(rank 1) = 1 / H(1000) ≈ 0.1336; P(rank 2) is half of it.
    let top = counts[0] as f64 / s.refs as f64;
    assert!((0.125..0.142).contains(&top), "top page share {top}");
    let second = counts[1] as f64 / counts[0] as f64;
    assert!((0.44..0.56).contains(&second), "{second}");
    // Hot pages are scattered, not simply the first pages.
    let mut hot: Vec<(u64, u64)> = pages.iter().map(|(&p, &c)| (c, p)).collect();
    hot.sort_unstable_by(|a, b| b.cmp(a));
    let first_ten: Vec<u64> = hot[..10].iter().map(|x| x.1).collect();
    assert!(first_ten.iter().any(|&p| p >= 10), "{first_ten:?}");
}

/// The mix, cut where a step is neither the access size nor the stride: about a third of its
/// steps each way (sequential and strided bursts), runs of each as long as its bursts, and Zipf
/// bursts (the rest) skewed towards their hottest pages.
#[test]
fn mix_is_bursts_of_each_pattern() {
    let stride = 3 * 4096;
    let s = GenSpec { refs: 400_000, footprint: 64 << 20, stride, burst: 500, ..spec(Pattern::Mix) };
    let v = gen_all(s, 4096);
    let (mut seq, mut strided) = (0u64, 0u64);
    let mut runs: Vec<u64> = Vec::new();
    let mut run = 0u64;
    let mut pages: HashMap<u64, u64> = HashMap::new();
    for w in v.windows(2) {
        let (a, b) = (w[0].2, w[1].2);
        assert!(b >= BASE && b + 8 <= BASE + s.footprint && b % 8 == 0);
        let step = b.wrapping_sub(a);
        if step == 8 || step == stride {
            seq += (step == 8) as u64;
            strided += (step == stride) as u64;
            run += 1;
        } else {
            *pages.entry((b - BASE) / 4096).or_insert(0) += 1;
            if run > 0 {
                runs.push(run);
            }
            run = 0;
        }
    }
    let n = v.len() as f64;
    for (what, c) in [("sequential", seq), ("strided", strided)] {
        let share = c as f64 / n;
        assert!((0.27..0.40).contains(&share), "{what} steps: {share}");
    }
    // Runs end where a burst ends (or two bursts of one kind meet): about 500 steps each.
    let mean = runs.iter().sum::<u64>() as f64 / runs.len() as f64;
    assert!((350.0..800.0).contains(&mean), "mean run {mean}");
    // The other steps are mostly the Zipf bursts': its hottest page takes about 1 / H(16384)
    // ≈ 9.7 % of them, far above a uniform draw's 0.006 %.
    let others: u64 = pages.values().sum();
    let top = *pages.values().max().unwrap() as f64 / others as f64;
    assert!((0.07..0.12).contains(&top), "hottest page share {top}");
    // A burst of zero references is refused.
    assert!(Generator::new(GenSpec { burst: 0, ..s }).is_err());
}

#[test]
fn zipf_large_footprint_uses_bounded_memory_and_stays_in_range() {
    // 2^36 bytes = 16 M pages: the tail sampler handles most ranks.
    let s = GenSpec { refs: 50_000, footprint: 1 << 36, zipf_s: 0.9, access_size: 64, ..spec(Pattern::Zipf) };
    let v = gen_all(s, 4096);
    let mut far = 0;
    for &(_, _, addr) in &v {
        assert!(addr >= BASE && addr + 64 <= BASE + s.footprint);
        assert_eq!(addr % 64, 0);
        far += (addr - BASE > 1 << 30) as u64;
    }
    assert!(far > 0);
}

#[test]
fn invalid_specs_are_rejected() {
    let bad = [
        GenSpec { access_size: 0, ..spec(Pattern::Uniform) },
        GenSpec { footprint: 4, ..spec(Pattern::Uniform) },
        GenSpec { stride: 0, ..spec(Pattern::Strided) },
        GenSpec { zipf_s: 0.0, ..spec(Pattern::Zipf) },
        GenSpec { zipf_s: f64::NAN, ..spec(Pattern::Zipf) },
        GenSpec { access_size: 8192, footprint: 1 << 20, ..spec(Pattern::Zipf) },
        GenSpec { store_fraction: 1.5, ..spec(Pattern::Uniform) },
        GenSpec { footprint: u64::MAX, ..spec(Pattern::Uniform) },
    ];
    for s in bad {
        assert!(Generator::new(s).is_err(), "{s:?}");
    }
    assert!(Generator::new(GenSpec::default()).is_ok());
}

#[test]
fn store_fraction_extremes() {
    let all_stores = gen_all(GenSpec { store_fraction: 1.0, ..spec(Pattern::Uniform) }, 4096);
    assert!(all_stores.iter().all(|x| x.0 == Kind::Store));
    let no_stores = gen_all(GenSpec { store_fraction: 0.0, ..spec(Pattern::Zipf) }, 4096);
    assert!(no_stores.iter().all(|x| x.0 == Kind::Load));
}
