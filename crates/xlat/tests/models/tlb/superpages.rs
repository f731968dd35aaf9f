//! Superpage and subblock TLBs end to end: exact miss counts against independent reference
//! models on a real trace, and a property test that no TLB ever translates a page differently
//! from the page table, whatever the entry format, page table, OS policy, unmaps, forks and exits.
//!
//! The reference models share no code with the engine: they parse the lackey text themselves and
//! keep a fully associative LRU TLB as a vector in recency order, with the OS policy written out
//! directly (first touch of a page = a fault; with reservation every page is properly placed).

use proptest::prelude::*;
use std::collections::{HashMap, HashSet};
use std::io::Read;
use xlat::config::Config;
use xlat::engine::{self, RunOptions, System};
use xlat::trace::{Kind, Record};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/sort-400.lackey.zst");

/// Base pages (4 KB) touched by every reference of the fixture, in order.
fn fixture_pages() -> Vec<u64> {
    let mut text = String::new();
    zstd::Decoder::new(std::fs::File::open(FIXTURE).expect("fixture present"))
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    let mut pages = Vec::new();
    for line in text.lines() {
        if !matches!(line.get(..2), Some("I ") | Some(" L") | Some(" S") | Some(" M")) {
            continue;
        }
        let (addr, size) = line[2..].trim().split_once(',').expect("addr,size");
        let addr = u64::from_str_radix(addr.trim_start_matches("0x"), 16).unwrap();
        let size: u64 = size.trim().parse().unwrap();
        for p in (addr >> 12)..=((addr + size.max(1) - 1) >> 12) {
            pages.push(p);
        }
    }
    assert!(pages.len() > 500_000);
    pages
}

/// A denser synthetic page sequence (seeded): sequential sweeps and random hops over 48 blocks,
/// so that many 64 KB blocks fill up and are promoted.
fn synthetic_pages() -> Vec<u64> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut pages = Vec::new();
    let base = 0x7f00_0000u64 >> 12;
    for _ in 0..4000 {
        let start = next() % (48 * 16);
        let len = 1 + next() % 40;
        for p in start..(start + len).min(48 * 16) {
            pages.push(base + p);
            if next() % 4 == 0 {
                pages.push(base + next() % (48 * 16));
            }
        }
    }
    pages
}

/// The engine over the fixture (`pages == None`) or over one 8-byte load per page of `pages`.
fn run_engine_on(toml: &str, pages: Option<&[u64]>) -> xlat::stats::SystemStats {
    let cfg = Config::from_toml(toml, "test").unwrap();
    let mut systems = vec![System::new(&cfg).unwrap()];
    match pages {
        None => {
            let mut reader = xlat::trace::open::open_reader(FIXTURE, None).unwrap();
            engine::run(reader.as_mut(), &mut systems, RunOptions::default(), |_| {}).unwrap();
        }
        Some(pages) => {
            let recs: Vec<Record> =
                pages.iter().map(|&p| Record::Access { kind: Kind::Load, size: 8, addr: (p << 12) + 64 }).collect();
            for chunk in recs.chunks(4096) {
                systems[0].process(chunk).unwrap();
            }
        }
    }
    systems[0].check_translations().unwrap();
    systems[0].stats()
}

/// One input: (name, pages for the reference, pages for the engine; `None`: the fixture file).
type Input = (&'static str, Vec<u64>, Option<Vec<u64>>);

/// Both inputs.
fn inputs() -> Vec<Input> {
    let s = synthetic_pages();
    vec![("fixture", fixture_pages(), None), ("synthetic", s.clone(), Some(s))]
}

/// A 64-entry fully associative LRU TLB; with a linear table, 8 more entries are reserved for its
/// page-table pages so the 64 main entries see only data translations.
fn design(format: &str, extra_tlb: &str, kind: &str, os: &str) -> String {
    let reserved = if kind == "linear" { "entries = 72\nreserved = 8" } else { "entries = 64" };
    format!(
        "name = \"t\"\npage_size = 4096\n[[tlb]]\nname = \"TLB\"\n{reserved}\npolicy = \"lru\"\nformat = \"{format}\"\n{extra_tlb}\n\
         [page_table]\nkind = \"{kind}\"\n[os]\nframe_allocator = \"buddy\"\nblock_pages = 16\n{os}"
    )
}

/// A fully associative LRU TLB of entries (tag, k, valid): k = 0 for a base page (tag = VPN,
/// valid unused), k = 4 for a 64 KB block (tag = VPN >> 4, valid = bit per base page).
struct Lru {
    e: Vec<(u64, u32, u64)>,
    cap: usize,
}

impl Lru {
    fn find(&self, vpn: u64) -> Option<usize> {
        self.e.iter().position(|&(tag, k, valid)| {
            (k == 0 && tag == vpn) || (k == 4 && tag == vpn >> 4 && valid >> (vpn & 15) & 1 == 1)
        })
    }
    fn block(&self, b: u64) -> Option<usize> {
        self.e.iter().position(|&(tag, k, _)| k == 4 && tag == b)
    }
    fn touch(&mut self, i: usize) {
        let x = self.e.remove(i);
        self.e.insert(0, x);
    }
    fn push(&mut self, x: (u64, u32, u64)) {
        if self.e.len() == self.cap {
            self.e.pop();
        }
        self.e.insert(0, x);
    }
}

#[test]
fn superpage_tlb_with_promotion_matches_reference() {
    let mut total_promotions = 0;
    for (input, pages, engine_pages) in inputs() {
        let (mut misses, mut faults, mut promotions) = (0u64, 0u64, 0u64);
        let mut resident: HashSet<u64> = HashSet::new();
        let mut count: HashMap<u64, u32> = HashMap::new();
        let mut tlb = Lru { e: Vec::new(), cap: 64 };
        for &v in &pages {
            let b = v >> 4;
            if let Some(i) = tlb.find(v) {
                tlb.touch(i);
                continue;
            }
            misses += 1;
            if resident.insert(v) {
                faults += 1;
                let c = count.entry(b).or_insert(0);
                *c += 1;
                if *c == 16 {
                    // Promotion: the block's base entries are shot down.
                    promotions += 1;
                    tlb.e.retain(|&(tag, k, _)| !(k == 0 && tag >> 4 == b));
                }
            }
            if count[&b] == 16 {
                tlb.push((b, 4, u64::MAX));
            } else {
                tlb.push((v, 0, 0));
            }
        }
        total_promotions += promotions;
        let e = engine_pages.as_deref();
        for kind in ["radix", "linear", "hashed", "clustered"] {
            let s = run_engine_on(&design("superpage", "", kind, "reservation = true\nsuperpages = \"promote\"\n"), e);
            assert_eq!(s.tlb[0].misses, misses, "{input} {kind}: misses");
            assert_eq!(s.page_faults, faults, "{input} {kind}: faults");
            assert_eq!(s.os.promotions, promotions, "{input} {kind}: promotions");
        }
        // Without promotion a superpage TLB is a single-page-size TLB.
        let single = run_engine_on(&design("single", "", "radix", ""), e);
        let sp_none = run_engine_on(&design("superpage", "", "radix", ""), e);
        assert_eq!(single.tlb[0].misses, sp_none.tlb[0].misses, "{input}");
        if promotions > 0 {
            assert!(misses < single.tlb[0].misses, "{input}");
        }
    }
    assert!(total_promotions > 20, "the inputs promote blocks: {total_promotions}");
}

/// A TLB of 64 KB block entries over `pages` (no unmaps, every page properly placed): returns
/// (misses, misses that merged into an entry already present). A miss loads the whole block's
/// mapped pages (`load_block`: a partial-subblock PTE, or complete subblocking with prefetch) or
/// only its own page (complete subblocking without prefetch). Pages only ever join a block, so
/// "the PTE's valid vector" and "the entry's bits or the loaded ones" are the same thing here.
fn block_reference(pages: &[u64], load_block: bool) -> (u64, u64) {
    let (mut misses, mut merged) = (0u64, 0u64);
    let mut vector: HashMap<u64, u64> = HashMap::new();
    let mut tlb = Lru { e: Vec::new(), cap: 64 };
    for &v in pages {
        let b = v >> 4;
        if let Some(i) = tlb.find(v) {
            tlb.touch(i);
            continue;
        }
        misses += 1;
        let vec = vector.entry(b).or_insert(0);
        *vec |= 1 << (v & 15);
        let load = if load_block { *vec } else { 1 << (v & 15) };
        match tlb.block(b) {
            Some(i) => {
                merged += 1;
                tlb.e[i].2 |= load;
                tlb.touch(i);
            }
            None => tlb.push((b, 4, load)),
        }
    }
    (misses, merged)
}

#[test]
fn partial_subblock_tlb_matches_reference() {
    for (input, pages, engine_pages) in inputs() {
        let (misses, merged) = block_reference(&pages, true);
        for kind in ["radix", "linear", "hashed", "clustered"] {
            let os = "reservation = true\npartial_subblock = true\n";
            let s =
                run_engine_on(&design("partial-subblock", "subblock_factor = 16", kind, os), engine_pages.as_deref());
            assert_eq!(s.tlb[0].misses, misses, "{input} {kind}: misses");
            assert_eq!(s.tlb[0].subblock_misses, merged, "{input} {kind}: valid-vector updates");
        }
    }
}

#[test]
fn complete_subblock_tlb_matches_reference_with_and_without_prefetch() {
    for (input, pages, engine_pages) in inputs() {
        for prefetch in [false, true] {
            let (misses, subblock) = block_reference(&pages, prefetch);
            for kind in ["radix", "linear", "hashed", "clustered"] {
                let extra = format!("subblock_factor = 16\nprefetch = {prefetch}");
                let s = run_engine_on(&design("complete-subblock", &extra, kind, ""), engine_pages.as_deref());
                assert_eq!(s.tlb[0].misses, misses, "{input} {kind} prefetch={prefetch}: misses");
                assert_eq!(s.tlb[0].subblock_misses, subblock, "{input} {kind} prefetch={prefetch}: subblock misses");
                assert_eq!(s.walks.block_walks, if prefetch { s.walks.count } else { 0 });
            }
        }
    }
}

/// A random multi-process trace over a few 64 KB blocks: accesses, unmaps, forks, exits.
fn records() -> impl Strategy<Value = Vec<Record>> {
    let op = prop_oneof![
        8 => (0u64..96, 1u32..9000).prop_map(|(p, size)| (0u8, p, size)),
        1 => (0u64..96, 1u32..20).prop_map(|(p, n)| (1u8, p, n)),
        1 => (0u64..3, 0u32..1).prop_map(|(a, _)| (2u8, a, 0)),
    ];
    prop::collection::vec(op, 1..300).prop_map(|ops| {
        let mut out = Vec::new();
        let mut asid = 0u32;
        let mut next_child = 10u32;
        for (k, x, y) in ops {
            match k {
                0 => out.push(Record::Access { kind: Kind::Load, size: y, addr: 0x40_0000 + x * 4096 + 100 }),
                1 => out.push(Record::Unmap { start: 0x40_0000 + x * 4096, len: y as u64 * 4096 }),
                _ => match x {
                    0 => {
                        out.push(Record::Fork { child: next_child });
                        out.push(Record::ContextSwitch { asid: next_child });
                        asid = next_child;
                        next_child += 1;
                    }
                    1 if asid != 0 => {
                        out.push(Record::Exit { asid });
                        out.push(Record::ContextSwitch { asid: 0 });
                        asid = 0;
                    }
                    _ => out.push(Record::ContextSwitch { asid: 0 }),
                },
            }
        }
        out
    })
}

proptest! {
    #![proptest_config(crate::proptest_cases(24))]

    #[test]
    fn tlbs_never_translate_what_the_page_table_does_not_hold(recs in records(), entries in 1u32..5) {
        let entries = entries * 4;
        let designs = [
            ("single", "", ""),
            ("superpage", "", "reservation = true\nsuperpages = \"promote\"\n"),
            ("superpage", "", "reservation = true\nsuperpages = \"static\"\n"),
            ("superpage", "", "reservation = true\nsuperpages = \"promote\"\npartial_subblock = true\nreservation_failure = 0.3\n"),
            ("partial-subblock", "subblock_factor = 16", "reservation = true\npartial_subblock = true\n"),
            ("partial-subblock", "subblock_factor = 16", "reservation = true\npartial_subblock = true\nsuperpages = \"promote\"\n"),
            ("complete-subblock", "subblock_factor = 16\nprefetch = true", "reservation = true\nsuperpages = \"promote\"\n"),
            ("complete-subblock", "subblock_factor = 8", ""),
        ];
        for kind in ["radix", "linear", "hashed", "clustered"] {
            for (format, extra, os) in designs {
                let toml = design(format, extra, kind, os)
                    .replace("entries = 64", &format!("entries = {entries}"))
                    .replace("entries = 72", &format!("entries = {}", entries + 8));
                let cfg = Config::from_toml(&toml, "prop").unwrap();
                let mut sys = System::new(&cfg).unwrap();
                for r in &recs {
                    sys.process(std::slice::from_ref(r)).unwrap();
                    if let Err(e) = sys.check_translations() {
                        return Err(TestCaseError::fail(format!("{kind} {format} [{os}]: after {r:?}: {e}")));
                    }
                }
            }
        }
    }
}

/// Two complete-subblock levels with different block sizes, prefetching or not: each level fills
/// its own block (a crash once, when the larger block's mappings were handed to the smaller
/// one), and no level ever translates a page the page table does not hold.
#[test]
fn complete_subblock_levels_with_different_blocks_fill_their_own_blocks() {
    let mut pages = synthetic_pages();
    pages.extend(fixture_pages().into_iter().take(200_000));
    for (l1, l2) in [
        ("subblock_factor = 16\nprefetch = true", "subblock_factor = 64\nprefetch = true"),
        ("subblock_factor = 64\nprefetch = true", "subblock_factor = 16\nprefetch = true"),
        ("subblock_factor = 16\nprefetch = true", "subblock_factor = 64"),
        ("subblock_factor = 8", "subblock_factor = 32\nprefetch = true"),
    ] {
        for kind in ["radix", "clustered"] {
            let toml = format!(
                "name = \"t\"\n[[tlb]]\nname = \"L1\"\nentries = 16\nformat = \"complete-subblock\"\n{l1}\n\
                 [[tlb]]\nname = \"L2\"\nlevel = 2\nentries = 64\nformat = \"complete-subblock\"\n{l2}\n\
                 [page_table]\nkind = \"{kind}\"\n[os]\nframe_allocator = \"buddy\"\nreservation = true\nblock_pages = 64\n"
            );
            let mut sys = System::new(&Config::from_toml(&toml, "two levels").unwrap()).unwrap();
            for (i, chunk) in pages.chunks(4096).enumerate() {
                let recs: Vec<Record> =
                    chunk.iter().map(|&p| Record::Access { kind: Kind::Load, size: 1, addr: p << 12 }).collect();
                sys.process(&recs).unwrap();
                if i % 8 == 0 {
                    sys.check_translations().unwrap_or_else(|e| panic!("[{l1}] [{l2}] {kind}: {e}"));
                }
            }
            sys.check_translations().unwrap_or_else(|e| panic!("[{l1}] [{l2}] {kind}: {e}"));
            let s = sys.stats();
            assert_eq!(s.tlb[0].accesses, pages.len() as u64);
            assert_eq!(s.tlb[1].accesses, s.tlb[0].misses, "L2 sees L1's misses");
            assert_eq!(s.walks.count, s.tlb[1].misses);
        }
    }
}
