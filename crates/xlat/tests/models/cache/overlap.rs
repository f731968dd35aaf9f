//! The `overlap` core (`[time] core = "overlap"`, docs/caches.md): data-cache misses issued within
//! `window` instructions of a group's first miss, up to `mshrs` of them, cost the group's longest
//! stall instead of the sum. Hand-worked sequences, the blocking core as the one-MSHR case, and
//! random sequences against a reference written here: its own cache model (direct-mapped,
//! virtually indexed, loads only) and its own grouping (groups built first, then priced).

use xlat::config::Config;
use xlat::engine::System;
use xlat::stats::SystemStats;
use xlat::trace::{Kind, Record};

/// One data level (1 cycle) over memory (60 cycles): a miss stalls 59 cycles. No instruction
/// cache (fetches never stall) and walks that bypass the cache (they are translation time).
fn one_level(core: &str) -> String {
    format!(
        "name = \"o\"\n[[tlb]]\nname = \"T\"\nentries = 64\n[page_table]\nkind = \"radix\"\n\
         [[cache]]\nname = \"D\"\nsize = 65536\nline = 32\nways = 1\nserves = \"data\"\nlevel = 1\nlatency = 1\n\
         index = \"virtual\"\nwalker = false\n[memory]\nlatency = 60\n[time]\ncpi = 1.0\n{core}\n"
    )
}

fn stats(config: &str, recs: &[Record]) -> SystemStats {
    let c = Config::from_toml(config, "o.toml").unwrap_or_else(|e| panic!("{e}\n{config}"));
    let mut s = System::new(&c).unwrap();
    s.process(recs).unwrap();
    assert!(s.failure().is_none());
    s.stats()
}

fn ifetch(n: u64) -> Record {
    Record::Access { kind: Kind::Ifetch, size: 4, addr: 0x40_0000 + 4 * n }
}

fn load(line: u64) -> Record {
    Record::Access { kind: Kind::Load, size: 4, addr: 0x1000_0000 + 32 * line }
}

/// `spec` as instructions, each with the lines it loads (each line loaded once: a miss).
fn program(spec: &[&[u64]]) -> Vec<Record> {
    let mut v = Vec::new();
    for (i, lines) in spec.iter().enumerate() {
        v.push(ifetch(i as u64));
        v.extend(lines.iter().map(|&l| load(l)));
    }
    v
}

fn dcache(core: &str, spec: &[&[u64]]) -> u64 {
    stats(&one_level(core), &program(spec)).time.unwrap().dcache
}

const MISS: u64 = 60 - 1;

#[test]
fn two_misses_within_the_window_cost_one_latency() {
    let spec: &[&[u64]] = &[&[0], &[], &[1]];
    assert_eq!(dcache("", spec), 2 * MISS, "the blocking core pays both");
    // Instruction 2's miss lies 2 < 4 instructions after instruction 0's: one group.
    assert_eq!(dcache("core = \"overlap\"\nmshrs = 2\nwindow = 4", spec), MISS);
    // A window of 2 no longer holds it: the two add.
    assert_eq!(dcache("core = \"overlap\"\nmshrs = 2\nwindow = 2", spec), 2 * MISS);
}

#[test]
fn misses_beyond_the_mshrs_serialize() {
    // Five misses on consecutive instructions, a window of 8: groups of at most 2 -> 3 groups.
    let spec: &[&[u64]] = &[&[0], &[1], &[2], &[3], &[4]];
    assert_eq!(dcache("core = \"overlap\"\nmshrs = 2\nwindow = 8", spec), 3 * MISS);
    assert_eq!(dcache("core = \"overlap\"\nmshrs = 5\nwindow = 8", spec), MISS);
    assert_eq!(dcache("core = \"overlap\"\nmshrs = 1\nwindow = 8", spec), 5 * MISS);
    // Two misses of one instruction (a load per line) are one group too.
    assert_eq!(dcache("core = \"overlap\"\nmshrs = 2\nwindow = 1", &[&[0, 1], &[2, 3]]), 2 * MISS);
}

#[test]
fn misses_outside_the_window_add() {
    // Misses at instructions 0, 3, 4, 9 with a window of 4 and 4 MSHRs: the group of 0 takes 3
    // (3 < 4) but not 4 (4 - 0 = 4); 4 opens a group that 9 does not join (9 - 4 = 5).
    let spec: &[&[u64]] = &[&[0], &[], &[], &[1], &[2], &[], &[], &[], &[], &[3]];
    assert_eq!(dcache("core = \"overlap\"\nmshrs = 4\nwindow = 4", spec), 3 * MISS);
    // Hits cost nothing and neither open nor close a group: line 0 again at instruction 2.
    let spec: &[&[u64]] = &[&[0], &[], &[0], &[1]];
    assert_eq!(dcache("core = \"overlap\"\nmshrs = 2\nwindow = 4", spec), MISS);
}

/// The overlap changes the data stalls and nothing else; with one MSHR it is the blocking core.
#[test]
fn one_mshr_is_the_blocking_core() {
    let recs = random_program(7, 20_000);
    let blocking = stats(&one_level(""), &recs);
    let one = stats(&one_level("core = \"overlap\"\nmshrs = 1\nwindow = 1000"), &recs);
    assert_eq!(blocking, one);
    let many = stats(&one_level("core = \"overlap\"\nmshrs = 8\nwindow = 16"), &recs);
    let (b, m) = (blocking.time.unwrap(), many.time.unwrap());
    assert!(m.dcache < b.dcache, "{} vs {}", m.dcache, b.dcache);
    assert_eq!((m.base, m.icache, m.translation, m.faults), (b.base, b.icache, b.translation, b.faults));
    assert_eq!(m.cycles, b.cycles - (b.dcache - m.dcache));
    assert_eq!((many.caches, many.tlb, many.walks), (blocking.caches, blocking.tlb, blocking.walks));
}

#[test]
fn bad_overlap_keys_name_themselves() {
    let err = |core: &str| Config::from_toml(&one_level(core), "o.toml").unwrap_err().to_string();
    assert!(err("core = \"overlap\"\nmshrs = 0").contains("time.mshrs"));
    assert!(err("mshrs = 1025").contains("time.mshrs"));
    assert!(err("core = \"overlap\"\nwindow = 0").contains("time.window"));
    assert!(err("window = 4294967297").contains("time.window"));
    let e = err("core = \"wide\"");
    assert!(e.contains("unknown variant `wide`") && e.contains("blocking"), "{e}");
    Config::from_toml(&one_level("core = \"overlap\"\nmshrs = 1024\nwindow = 4294967296"), "o.toml").unwrap();
}

// ---------------------------------------------------------------------------------------------
// The reference.

/// Random instructions, each loading 0 to 2 lines of a 64 KB range (so that the two levels
/// below hit and miss), from a xorshift generator.
fn random_program(seed: u64, instructions: u64) -> Vec<Record> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut v = Vec::new();
    for i in 0..instructions {
        v.push(ifetch(i % 64));
        for _ in 0..next() % 3 {
            // Skewed: a hot 4 KB and the whole range.
            let line = if next() % 2 == 0 { next() % 128 } else { next() % 2048 };
            v.push(load(line));
        }
    }
    v
}

/// Two direct-mapped levels of 32-byte lines indexed by the virtual line (1 KB at 1 cycle, 8 KB
/// at 10), memory at 60: each load's stall, with the instruction it belongs to.
fn reference_misses(recs: &[Record]) -> Vec<(u64, u64)> {
    let mut l1 = vec![u64::MAX; 32];
    let mut l2 = vec![u64::MAX; 256];
    let (mut instructions, mut misses) = (0u64, Vec::new());
    for r in recs {
        match *r {
            Record::Access { kind: Kind::Ifetch, .. } => instructions += 1,
            Record::Access { kind: Kind::Load, addr, .. } => {
                let line = addr >> 5;
                let (i1, i2) = ((line % 32) as usize, (line % 256) as usize);
                let latency = if l1[i1] == line {
                    1
                } else if l2[i2] == line {
                    10
                } else {
                    l2[i2] = line;
                    60
                };
                l1[i1] = line;
                if latency > 1 {
                    misses.push((instructions, latency - 1));
                }
            }
            _ => unreachable!(),
        }
    }
    misses
}

/// Groups in order: a miss starts a new group when the current one is full or began `window` or
/// more instructions before it. The stall is the sum of each group's longest.
fn reference_stall(misses: &[(u64, u64)], mshrs: usize, window: u64) -> u64 {
    let mut groups: Vec<Vec<(u64, u64)>> = Vec::new();
    for &m in misses {
        match groups.last_mut() {
            Some(g) if g.len() < mshrs && m.0 - g[0].0 < window => g.push(m),
            _ => groups.push(vec![m]),
        }
    }
    groups.iter().map(|g| g.iter().map(|m| m.1).max().unwrap()).sum()
}

fn two_levels(core: &str) -> String {
    format!(
        "name = \"o\"\n[[tlb]]\nname = \"T\"\nentries = 64\n[page_table]\nkind = \"radix\"\n\
         [[cache]]\nname = \"L1\"\nsize = 1024\nline = 32\nways = 1\nserves = \"data\"\nlevel = 1\nlatency = 1\n\
         index = \"virtual\"\nwalker = false\n\
         [[cache]]\nname = \"L2\"\nsize = 8192\nline = 32\nways = 1\nserves = \"data\"\nlevel = 2\nlatency = 10\n\
         index = \"virtual\"\nwalker = false\n[memory]\nlatency = 60\n[time]\ncpi = 1.0\n{core}\n"
    )
}

#[test]
fn random_sequences_match_the_reference() {
    for seed in 1..=4 {
        let recs = random_program(seed, 5_000);
        let misses = reference_misses(&recs);
        assert!(misses.iter().any(|m| m.1 == 9) && misses.iter().any(|m| m.1 == 59), "both kinds of miss");
        let blocking = stats(&two_levels(""), &recs).time.unwrap().dcache;
        assert_eq!(blocking, misses.iter().map(|m| m.1).sum::<u64>(), "seed {seed}: the reference's caches");
        for (mshrs, window) in [(1, 8), (2, 1), (2, 3), (3, 8), (6, 8), (16, 40), (1024, 1 << 20)] {
            let core = format!("core = \"overlap\"\nmshrs = {mshrs}\nwindow = {window}");
            let got = stats(&two_levels(&core), &recs).time.unwrap().dcache;
            assert_eq!(got, reference_stall(&misses, mshrs, window), "seed {seed}, {mshrs} MSHRs, window {window}");
            assert!(got <= blocking);
        }
    }
}
