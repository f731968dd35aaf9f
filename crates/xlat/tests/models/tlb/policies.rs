//! Exact TLB miss counts against an independent reference model, on a real lackey trace.
//!
//! The reference here shares no code with the engine: it parses the lackey text with plain string
//! splitting, splits accesses into pages itself, and keeps each set as a vector in recency
//! (LRU) or insertion (FIFO) order — the textbook definition, O(ways) per access.

use std::io::Read;
use xlat::config::Config;
use xlat::engine::{self, RunOptions, System};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/sort-400.lackey.zst");

/// (is_instruction, addr, size) for every reference in the fixture, parsed independently.
fn fixture_refs() -> Vec<(bool, u64, u64)> {
    let mut text = String::new();
    zstd::Decoder::new(std::fs::File::open(FIXTURE).expect("fixture present"))
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    let mut refs = Vec::new();
    for line in text.lines() {
        let kind = match line.get(..2) {
            Some("I ") => true,
            Some(" L") | Some(" S") | Some(" M") => false,
            _ => continue,
        };
        let (addr, size) = line[2..].trim().split_once(',').expect("addr,size");
        let addr = u64::from_str_radix(addr.trim_start_matches("0x"), 16).unwrap();
        refs.push((kind, addr, size.trim().parse().unwrap()));
    }
    assert!(refs.len() > 500_000, "fixture too small: {}", refs.len());
    refs
}

struct RefTlb {
    sets: Vec<Vec<u64>>,
    ways: usize,
    fifo: bool,
}

impl RefTlb {
    fn new(entries: usize, ways: usize, fifo: bool) -> RefTlb {
        RefTlb { sets: vec![Vec::new(); entries / ways], ways, fifo }
    }
    /// True on a hit. Inserts on a miss (evicting the last of the order).
    fn access(&mut self, vpn: u64) -> bool {
        let n = self.sets.len() as u64;
        let set = &mut self.sets[(vpn % n) as usize];
        if let Some(p) = set.iter().position(|&v| v == vpn) {
            if !self.fifo {
                let v = set.remove(p);
                set.insert(0, v);
            }
            return true;
        }
        if set.len() == self.ways {
            set.pop();
        }
        set.insert(0, vpn);
        false
    }
}

fn pages(addr: u64, size: u64, shift: u32) -> std::ops::RangeInclusive<u64> {
    (addr >> shift)..=((addr + size.max(1) - 1) >> shift)
}

fn run_engine(toml: &str) -> xlat::stats::SystemStats {
    let cfg = Config::from_toml(toml, "test").unwrap();
    let mut systems = vec![System::new(&cfg).unwrap()];
    let mut reader = xlat::trace::open::open_reader(FIXTURE, None).unwrap();
    engine::run(reader.as_mut(), &mut systems, RunOptions::default(), |_| {}).unwrap();
    systems[0].stats()
}

fn one_level(entries: usize, ways: usize, policy: &str, page_size: u64) -> String {
    format!(
        "name = \"t\"\npage_size = {page_size}\n[[tlb]]\nname = \"L1\"\nentries = {entries}\nways = {ways}\npolicy = \"{policy}\"\n[page_table]\nkind = \"radix\"\n"
    )
}

#[test]
fn single_level_lru_and_fifo_match_reference_exactly() {
    let refs = fixture_refs();
    let geometries = [(64, 64), (16, 16), (48, 12), (64, 4), (64, 1), (7, 7), (1536, 12), (96, 96)];
    for (entries, ways) in geometries {
        for policy in ["lru", "fifo"] {
            for page_size in [4096u64, 65536] {
                let shift = page_size.trailing_zeros();
                let mut r = RefTlb::new(entries, ways, policy == "fifo");
                let (mut lookups, mut misses) = (0u64, 0u64);
                for &(_, addr, size) in &refs {
                    for vpn in pages(addr, size, shift) {
                        lookups += 1;
                        misses += !r.access(vpn) as u64;
                    }
                }
                let s = run_engine(&one_level(entries, ways, policy, page_size));
                let what = format!("{entries} entries, {ways} ways, {policy}, {page_size} B pages");
                assert_eq!(s.lookups, lookups, "{what}: lookups");
                assert_eq!(s.tlb[0].accesses, lookups, "{what}: accesses");
                assert_eq!(s.tlb[0].misses, misses, "{what}: misses");
                assert_eq!(s.tlb[0].hits + s.tlb[0].misses, s.tlb[0].accesses, "{what}");
                // Demand paging: every distinct page faults once; walks == last-level misses.
                assert_eq!(s.walks.count, misses, "{what}: walks");
            }
        }
    }
}

/// Not-recently-used, as documented: a reference bit per way, set on every hit and fill; when
/// the bits of a set are all set, all but the one just used are cleared. Empty ways fill in
/// index order; the victim is the lowest way whose bit is clear.
struct RefNru {
    sets: Vec<Vec<(Option<u64>, bool)>>,
}

impl RefNru {
    fn new(entries: usize, ways: usize) -> RefNru {
        RefNru { sets: vec![vec![(None, false); ways]; entries / ways] }
    }
    fn access(&mut self, vpn: u64) -> bool {
        let n = self.sets.len() as u64;
        let set = &mut self.sets[(vpn % n) as usize];
        let (w, hit) = match set.iter().position(|e| e.0 == Some(vpn)) {
            Some(w) => (w, true),
            None => {
                let w = set.iter().position(|e| e.0.is_none()).or_else(|| set.iter().position(|e| !e.1)).unwrap_or(0);
                set[w].0 = Some(vpn);
                (w, false)
            }
        };
        set[w].1 = true;
        if set.iter().all(|e| e.1) {
            for (i, e) in set.iter_mut().enumerate() {
                e.1 = i == w;
            }
        }
        hit
    }
}

/// Tree pseudo-LRU, as documented: a binary tree over the ways whose nodes point towards the
/// older half; an access points every node on its path away from it; the victim follows the
/// pointers from the root. Empty ways fill in index order.
struct RefPlru {
    sets: Vec<(Vec<Option<u64>>, Vec<bool>)>,
}

impl RefPlru {
    fn new(entries: usize, ways: usize) -> RefPlru {
        RefPlru { sets: vec![(vec![None; ways], vec![false; ways]); entries / ways] }
    }
    fn access(&mut self, vpn: u64) -> bool {
        let n = self.sets.len() as u64;
        let (tags, tree) = &mut self.sets[(vpn % n) as usize];
        let ways = tags.len();
        let hit = tags.contains(&Some(vpn));
        let w = match tags.iter().position(|t| *t == Some(vpn)) {
            Some(w) => w,
            None => {
                let w = tags.iter().position(|t| t.is_none()).unwrap_or_else(|| {
                    // Follow the pointers: node i has children 2i and 2i+1; leaves are ways+w.
                    let mut node = 1;
                    while node < ways {
                        node = 2 * node + usize::from(tree[node]);
                    }
                    node - ways
                });
                tags[w] = Some(vpn);
                w
            }
        };
        // Point the path away from w: at each ancestor, towards the sibling subtree.
        let (mut lo, mut hi, mut node) = (0, ways, 1);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if w < mid {
                tree[node] = true; // the right half is now older
                hi = mid;
                node *= 2;
            } else {
                tree[node] = false;
                lo = mid;
                node = 2 * node + 1;
            }
        }
        hit
    }
}

#[test]
fn nru_and_plru_match_reference_exactly() {
    let refs = fixture_refs();
    for (entries, ways) in [(64, 64), (16, 16), (64, 4), (8, 8), (32, 2)] {
        let (mut nru, mut plru) = (RefNru::new(entries, ways), RefPlru::new(entries, ways));
        let (mut nru_misses, mut plru_misses) = (0u64, 0u64);
        for &(_, addr, size) in &refs {
            for vpn in pages(addr, size, 12) {
                nru_misses += !nru.access(vpn) as u64;
                plru_misses += !plru.access(vpn) as u64;
            }
        }
        let s = run_engine(&one_level(entries, ways, "nru", 4096));
        assert_eq!(s.tlb[0].misses, nru_misses, "nru {entries}x{ways}");
        let s = run_engine(&one_level(entries, ways, "plru", 4096));
        assert_eq!(s.tlb[0].misses, plru_misses, "plru {entries}x{ways}");
    }
}

#[test]
fn split_two_level_hierarchy_matches_reference() {
    // L1I (8 FA LRU) and L1D (16, 4-way LRU) in front of a unified 128-entry 4-way L2.
    // Reference: on an L1 miss look in L2; on an L2 hit fill the L1; on an L2 miss fill both.
    let refs = fixture_refs();
    let toml = r#"
name = "split"
[[tlb]]
name = "L1I"
entries = 8
serves = "instruction"
[[tlb]]
name = "L1D"
entries = 16
ways = 4
serves = "data"
[[tlb]]
name = "L2"
entries = 128
ways = 4
level = 2
"#;
    let (mut l1i, mut l1d, mut l2) = (RefTlb::new(8, 8, false), RefTlb::new(16, 4, false), RefTlb::new(128, 4, false));
    let mut counts = [[0u64; 2]; 3]; // [structure][accesses, misses]
    for &(inst, addr, size) in &refs {
        for vpn in pages(addr, size, 12) {
            let (l1, k) = if inst { (&mut l1i, 0) } else { (&mut l1d, 1) };
            counts[k][0] += 1;
            if l1.access(vpn) {
                continue;
            }
            counts[k][1] += 1;
            counts[2][0] += 1;
            if !l2.access(vpn) {
                counts[2][1] += 1;
            }
        }
    }
    let s = run_engine(toml);
    for (k, name) in ["L1I", "L1D", "L2"].iter().enumerate() {
        assert_eq!([s.tlb[k].accesses, s.tlb[k].misses], counts[k], "{name}");
    }
    assert_eq!(s.walks.count, counts[2][1]);
}

#[test]
fn flush_on_switch_equals_tagged_for_a_single_process() {
    let base = one_level(32, 32, "lru", 4096);
    let tagged = run_engine(&base);
    let flushed = run_engine(&base.replace("page_size = 4096", "page_size = 4096\nasid = \"flush\""));
    assert_eq!(tagged.tlb[0], flushed.tlb[0]);
    assert_eq!(flushed.events.flushes, 0);
}

/// Traces `gzip` compressing generated text with valgrind lackey, now, into a temporary file:
/// a second real program, whose exact counts nobody has seen before the test runs.
fn fresh_lackey_trace(dir: &std::path::Path) -> std::path::PathBuf {
    let input = dir.join("input.txt");
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let text: String = (0..8000)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i % 61 == 60 {
                '\n'
            } else {
                (b'a' + (x % 26) as u8) as char
            }
        })
        .collect();
    std::fs::write(&input, text).unwrap();
    let log = dir.join("gzip.lackey");
    let status = std::process::Command::new("valgrind")
        .args(["--tool=lackey", "--trace-mem=yes"])
        .arg(format!("--log-file={}", log.display()))
        .args(["gzip", "-c"])
        .arg(&input)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("valgrind is needed for this test (scripts/test.sh installs the Debian package)");
    assert!(status.success(), "valgrind gzip failed");
    log
}

#[test]
fn lru_and_fifo_match_reference_on_a_freshly_traced_program() {
    let dir = tempfile::tempdir().unwrap();
    let path = fresh_lackey_trace(dir.path());
    let text = std::fs::read_to_string(&path).unwrap();
    let refs: Vec<(u64, u64)> = text
        .lines()
        .filter(|l| matches!(l.get(..2), Some("I " | " L" | " S" | " M")))
        .map(|l| {
            let (a, s) = l[2..].trim().split_once(',').unwrap();
            (u64::from_str_radix(a, 16).unwrap(), s.trim().parse().unwrap())
        })
        .collect();
    assert!(refs.len() > 100_000, "gzip made only {} references", refs.len());
    for (entries, ways, policy) in [(64, 64, "lru"), (32, 4, "fifo"), (128, 8, "lru"), (12, 12, "fifo")] {
        let mut r = RefTlb::new(entries, ways, policy == "fifo");
        let misses: u64 = refs.iter().flat_map(|&(a, s)| pages(a, s, 12)).map(|v| !r.access(v) as u64).sum();
        let cfg = Config::from_toml(&one_level(entries, ways, policy, 4096), "test").unwrap();
        let mut systems = vec![System::new(&cfg).unwrap()];
        let mut reader = xlat::trace::open::open_reader(path.to_str().unwrap(), None).unwrap();
        engine::run(reader.as_mut(), &mut systems, RunOptions::default(), |_| {}).unwrap();
        assert_eq!(systems[0].stats().tlb[0].misses, misses, "{entries}x{ways} {policy}");
    }
}
