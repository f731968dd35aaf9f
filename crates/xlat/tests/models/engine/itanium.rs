//! Layouts, Itanium regions and the long VHPT end to end, against reference models written here
//! apart from the engine: placement of mappings, RID-tagged TLB lookups, the VHPT's hash and
//! collisions, no TLB translation the OS table does not hold with sharing on (after unmaps,
//! exits and RID purges), and what sharing buys n processes that touch the same pages.

use proptest::prelude::*;
use std::collections::{HashMap, VecDeque};
use xlat::config::Config;
use xlat::engine::System;
use xlat::trace::{map_flags, Kind, Record};

fn load(addr: u64) -> Record {
    Record::Access { kind: Kind::Load, size: 8, addr }
}

fn fetch(addr: u64) -> Record {
    Record::Access { kind: Kind::Ifetch, size: 4, addr }
}

fn design(text: &str) -> System {
    System::new(&Config::from_toml(text, "test").unwrap()).unwrap()
}

/// A fully associative LRU TLB over arbitrary keys: misses.
struct Lru<K> {
    cap: usize,
    q: VecDeque<K>,
    misses: u64,
}

impl<K: PartialEq> Lru<K> {
    fn new(cap: usize) -> Self {
        Lru { cap, q: VecDeque::new(), misses: 0 }
    }
    fn touch(&mut self, k: K) {
        if let Some(i) = self.q.iter().position(|x| *x == k) {
            let k = self.q.remove(i).unwrap();
            self.q.push_front(k);
        } else {
            self.misses += 1;
            if self.q.len() == self.cap {
                self.q.pop_back();
            }
            self.q.push_front(k);
        }
    }
}

/// The demo trace's records (a real x86-64 program, no map records).
fn demo() -> Vec<Record> {
    crate::bundled_records("demo.xtr")
}

#[test]
fn compact32_runs_a_64_bit_trace_on_a_32_bit_machine_exactly() {
    let records = demo();
    // Reference placement: each 1 MB chunk, in order of first touch, goes to 64 KB + the bytes
    // placed before it.
    let mut chunks: HashMap<u64, u64> = HashMap::new();
    let mut next = 64 << 10;
    let mut lru = Lru::new(32);
    for r in &records {
        if let Record::Access { size, addr, .. } = *r {
            let c = addr >> 20;
            let base = *chunks.entry(c).or_insert_with(|| {
                let b = next;
                next += 1 << 20;
                b
            });
            let laid = base + (addr & ((1 << 20) - 1));
            let end = laid + size.max(1) as u64 - 1;
            for p in laid >> 12..=end >> 12 {
                lru.touch(p);
            }
        }
    }
    let mut s = design(
        "name = \"r3k\"\n[[tlb]]\nname = \"TLB\"\nentries = 40\nreserved = 8\nserves = \"unified\"\n\
         [page_table]\nkind = \"linear\"\nva_bits = 32\npte_bytes = 4\nbits_per_level = 10\n\
         [layout]\nkind = \"compact32\"\n",
    );
    s.process(&records).unwrap();
    let st = s.stats();
    assert_eq!(st.tlb[0].misses, lru.misses);
    assert_eq!(s.layout_stats().unwrap().implicit, chunks.len() as u64);
    // Without the layout, the same design cannot run the trace at all.
    let mut plain = design(
        "name = \"r3k\"\n[[tlb]]\nname = \"TLB\"\nentries = 32\n[page_table]\nkind = \"linear\"\nva_bits = 32\n",
    );
    assert!(plain.process(&records).is_err());
}

/// sparse32 against compact32 on a hand-built trace: text, heap (grown once), two mmaps and the
/// stack land where a MIPS Unix puts them (worked by hand: 64 KB units; text from 0x0040_0000,
/// heap from 0x1000_0000, mmaps down from 2 GB - 8 MB, the stack's units ending at 2 GB), and
/// the linear page table needs one page of PTEs per 4 MB they fall in: pages 1, 64, 509 and
/// 511, and the root page: 5; compact32 packs them all under 4 MB: one page and the root.
#[test]
fn sparse32_spreads_a_process_over_the_page_tables_of_a_mips_unix() {
    use map_flags::*;
    let maps = [
        (0x5555_5555_4000u64, 0x3000u64, IMAGE | FILE | READ | EXEC, false, 0x0040_4000u64),
        (0x5555_5556_0000, 0x2_1000, HEAP | READ | WRITE, true, 0x1000_0000),
        (0x5555_5558_1000, 0x1_0000, HEAP | READ | WRITE, true, 0x1002_1000),
        (0x7fff_f7dd_0000, 0x2_0000, READ | WRITE, true, 0x7f7e_0000),
        (0x7fff_f7d0_0000, 0x1_0000, READ | EXEC | FILE, false, 0x7f7d_0000),
        (0x7fff_ffdd_e000, 0x2_1000, STACK | READ | WRITE, true, 0x7ffd_e000),
    ];
    let mut recs = vec![Record::Process { asid: 1 }];
    for &(start, len, flags, _, _) in &maps {
        recs.push(Record::Map { start, len, flags });
    }
    for &(start, _, _, data, _) in &maps {
        recs.push(if data { load(start) } else { fetch(start) });
    }
    let run = |kind: &str| {
        let mut s = design(&format!(
            "name = \"r3k\"\n[[tlb]]\nname = \"TLB\"\nentries = 64\nreserved = 8\nserves = \"unified\"\n\
             [page_table]\nkind = \"linear\"\nva_bits = 32\npte_bytes = 4\nbits_per_level = 10\n\
             [layout]\nkind = \"{kind}\"\n"
        ));
        s.process(&recs).unwrap();
        s
    };
    let sparse = run("sparse32");
    for &(start, _, _, _, laid) in &maps {
        let pte = sparse.page_table().get(xlat::addr::Asid(1), xlat::addr::Vpn(laid >> 12));
        assert!(pte.is_some(), "{start:#x} is not at {laid:#x}");
    }
    assert_eq!(sparse.page_table().size().objects, 5);
    assert_eq!(run("compact32").page_table().size().objects, 2);
}

/// Reference RIDs: context = order of first appearance from 1 (or a program's own context
/// first under shared text), RID = context << 3 | VRN (byte-swapped: low two bytes swapped).
fn rid(ctx: u64, vrn: u64, swapped: bool) -> u64 {
    let c = if swapped { (ctx & !0xffff) | ((ctx & 0xff) << 8) | ((ctx >> 8) & 0xff) } else { ctx };
    ((c << 3) | vrn) & ((1 << 24) - 1)
}

/// A multi-process stream in Itanium-laid-out addresses (regions 2 and 3 by kind, no maps):
/// `procs` processes forked from process 0, each fetching text pages and loading data pages.
fn forked_stream(procs: u32, text: u64, data: u64, rounds: u32, seed: u64) -> Vec<Record> {
    let mut t = vec![Record::Process { asid: 0 }];
    for c in 1..procs {
        t.push(Record::Fork { child: c });
    }
    let mut x = seed | 1;
    for round in 0..rounds {
        for p in 0..procs {
            t.push(Record::ContextSwitch { asid: p });
            for _ in 0..40 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let page = x % (text + data);
                if page < text {
                    t.push(fetch(0x40_0000 + page * 16384 + (round as u64 % 64) * 4));
                } else {
                    t.push(load(0x60_0000_0000 + (page - text) * 16384 + 8));
                }
            }
        }
    }
    t
}

fn itanium(tlb: u32, extra_pt: &str, itanium: &str) -> String {
    format!(
        "name = \"ia\"\npage_size = 16384\n[[tlb]]\nname = \"TLB\"\nentries = {tlb}\nserves = \"unified\"\n\
         [page_table]\nva_bits = 64\n{extra_pt}\n[layout]\nkind = \"itanium-linux\"\n[itanium]\n{itanium}\n\
         [os]\nmemory_bytes = 1073741824\n"
    )
}

#[test]
fn region_tagged_lookups_and_shared_text_match_a_reference() {
    let t = forked_stream(4, 12, 20, 30, 7);
    for share in [false, true] {
        let mut lru = Lru::new(48);
        let mut cur = 0u32;
        for r in &t {
            match *r {
                Record::Process { asid } | Record::ContextSwitch { asid } => cur = asid,
                Record::Access { kind, addr, .. } => {
                    let vrn = if kind == Kind::Ifetch { 2 } else { 3 };
                    // The space: the program's text (all 4 are one program) or the process's region.
                    let space = if share && vrn == 2 { (u32::MAX, vrn) } else { (cur, vrn) };
                    lru.touch((space, ((vrn << 61) | addr) >> 14));
                }
                _ => {}
            }
        }
        let mut s = design(&itanium(48, "kind = \"vhpt-long\"", &format!("share_text = {share}")));
        s.process(&t).unwrap();
        assert_eq!(s.stats().tlb[0].misses, lru.misses, "share_text = {share}");
        s.check_translations().unwrap();
    }
}

#[test]
fn long_vhpt_hash_and_collisions_match_a_reference() {
    let t = forked_stream(6, 10, 40, 20, 11);
    for (swapped, alloc) in [(false, "sequential"), (true, "byte-swapped")] {
        // Reference: a 16-entry LRU TLB in front of a 256-entry direct-mapped VHPT indexed by
        // (RID xor VPN) mod 256; a VHPT miss inserts the translation.
        let mut lru = Lru::new(16);
        let mut vhpt: Vec<Option<(u64, u64)>> = vec![None; 256];
        let (mut lookups, mut misses, mut collisions) = (0u64, 0u64, 0u64);
        let mut cur = 0u32;
        for r in &t {
            match *r {
                Record::Process { asid } | Record::ContextSwitch { asid } => cur = asid,
                Record::Access { kind, addr, .. } => {
                    let vrn = if kind == Kind::Ifetch { 2 } else { 3 };
                    let vpn = ((vrn << 61) | addr) >> 14;
                    let before = lru.misses;
                    lru.touch((cur, vrn, vpn));
                    if lru.misses > before {
                        let r = rid(cur as u64 + 1, vrn, swapped);
                        let i = ((r ^ vpn) & 255) as usize;
                        lookups += 1;
                        if vhpt[i] != Some((r, vpn)) {
                            misses += 1;
                            collisions += vhpt[i].is_some() as u64;
                            vhpt[i] = Some((r, vpn));
                        }
                    }
                }
                _ => {}
            }
        }
        let mut s =
            design(&itanium(16, "kind = \"vhpt-long\"\nvhpt_entries = 256\n", &format!("rid_alloc = \"{alloc}\"")));
        s.process(&t).unwrap();
        let v = s.vhpt_stats().unwrap();
        assert_eq!(s.stats().tlb[0].misses, lru.misses, "{alloc}");
        assert_eq!((v.lookups, v.misses, v.collisions), (lookups, misses, collisions), "{alloc}");
        assert!(collisions > 0, "{alloc}: the test must exercise collisions");
        s.check_translations().unwrap();
    }
}

#[test]
fn byte_swapped_rids_collide_less_after_fork() {
    // chapman03 §3.1: forked processes with close RIDs and the same layout collide in the hash.
    let t = forked_stream(8, 8, 56, 25, 3);
    let collisions = |alloc: &str| {
        let mut s =
            design(&itanium(32, "kind = \"vhpt-long\"\nvhpt_entries = 65536\n", &format!("rid_alloc = \"{alloc}\"")));
        s.process(&t).unwrap();
        s.vhpt_stats().unwrap().collisions
    };
    let (seq, swapped) = (collisions("sequential"), collisions("byte-swapped"));
    assert!(seq > 4 * swapped.max(1), "sequential {seq} vs byte-swapped {swapped}");
}

#[test]
fn sharing_divides_data_tlb_misses_by_the_processes() {
    // n processes of one program touch the same p pages of a shared mapping their parent made
    // before forking (extreme, chapman03 §4.1), yielding after each pass.
    let (n, p) = (8u32, 24u64);
    let mut t = vec![Record::Process { asid: 0 }];
    t.push(Record::Map { start: 0x7f00_0000_0000, len: p * 16384, flags: map_flags::READ | map_flags::SHARED });
    for c in 1..=n {
        t.push(Record::Fork { child: c });
    }
    for _ in 0..50 {
        for c in 1..=n {
            t.push(Record::ContextSwitch { asid: c });
            for i in 0..p {
                t.push(load(0x7f00_0000_0000 + i * 16384 + 64));
            }
        }
    }
    let misses = |itanium_cfg: &str| {
        let mut s = design(&itanium(64, "kind = \"vhpt-long\"\nvhpt_entries = 4096\n", itanium_cfg));
        s.process(&t).unwrap();
        s.check_translations().unwrap();
        s.stats().tlb[0].misses
    };
    let (private, shared) = (misses(""), misses("shared_region = true"));
    // Without sharing, 8 x 24 pages do not fit 64 entries: every pass misses; with it they fit.
    assert_eq!(shared, p, "one miss per shared page");
    assert!(private >= 50 * n as u64 * p / 2, "private {private}");
    assert!(shared * (n as u64) * 10 <= private, "shared {shared} vs private {private}");
}

#[test]
fn protection_key_misses_match_per_process_pkr_files() {
    // Three shared objects (three keys) mapped before forking, and each process's private data
    // (its region's key); two PKRs per process, LRU.
    let objects = [0x7f00_0000_0000u64, 0x7f10_0000_0000, 0x7f20_0000_0000];
    let mut t = vec![Record::Process { asid: 0 }];
    for &o in &objects {
        t.push(Record::Map { start: o, len: 4 * 16384, flags: map_flags::READ | map_flags::SHARED });
    }
    for c in 1..=3 {
        t.push(Record::Fork { child: c });
    }
    let mut x = 99u64;
    for _ in 0..400 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        t.push(Record::ContextSwitch { asid: (x % 4) as u32 });
        for _ in 0..(x >> 8) % 5 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let a = match x % 4 {
                3 => 0x60_0000 + (x >> 4) % 8 * 16384,
                o => objects[o as usize] + (x >> 4) % 4 * 16384,
            };
            t.push(load(a));
        }
    }
    // Reference: a page's key is its object (shared) or (process, data region); PKR files per
    // process, LRU of two.
    let mut files: HashMap<u32, Vec<(u32, u64)>> = HashMap::new();
    let (mut cur, mut checks, mut misses) = (0u32, 0u64, 0u64);
    for r in &t {
        match *r {
            Record::Process { asid } | Record::ContextSwitch { asid } => cur = asid,
            Record::Access { addr, .. } => {
                checks += 1;
                let key = match objects.iter().position(|&o| addr >> 36 == o >> 36) {
                    Some(i) => (u32::MAX, i as u64),
                    None => (cur, 3),
                };
                let f = files.entry(cur).or_default();
                match f.iter().position(|&k| k == key) {
                    Some(i) => {
                        f.remove(i);
                    }
                    None => {
                        misses += 1;
                        if f.len() == 2 {
                            f.pop();
                        }
                    }
                }
                f.insert(0, key);
            }
            _ => {}
        }
    }
    let mut s = design(&itanium(
        64,
        "kind = \"vhpt-long\"\nvhpt_entries = 4096\n",
        "shared_region = true\nprotection_keys = true\npkrs = 2",
    ));
    s.process(&t).unwrap();
    let k = s.key_stats().unwrap();
    assert_eq!((k.checks, k.misses), (checks, misses));
    assert!(misses > 50, "the test must exercise replacement: {misses}");
    s.check_translations().unwrap();
}

#[test]
fn separately_started_processes_of_one_executable_share_text() {
    // Two processes that are not related by fork, each starting with the image text mapping of
    // the same executable (object 5), then fetching its 20 pages: with shared text the second
    // finds the first's TLB entries; without the object, each has its own program.
    let image = |with_object: bool| {
        let mut v = Vec::new();
        if with_object {
            v.push(Record::Object { id: 5, offset: 0 });
        }
        v.push(Record::Map {
            start: 0x40_0000,
            len: 20 * 16384,
            flags: map_flags::READ | map_flags::EXEC | map_flags::FILE | map_flags::IMAGE,
        });
        v
    };
    let run = |with_object: bool, share: bool| {
        let mut t = vec![Record::Process { asid: 0 }];
        t.extend(image(with_object));
        t.extend((0..20).map(|p| fetch(0x40_0000 + p * 16384)));
        t.push(Record::ContextSwitch { asid: 1 });
        t.extend(image(with_object));
        t.extend((0..20).map(|p| fetch(0x40_0000 + p * 16384)));
        let mut s =
            design(&itanium(64, "kind = \"vhpt-long\"\nvhpt_entries = 4096\n", &format!("share_text = {share}")));
        s.process(&t).unwrap();
        s.check_translations().unwrap();
        (s.stats().tlb[0].misses, s.stats().page_faults)
    };
    assert_eq!(run(true, true), (20, 20), "one program: its text is mapped and cached once");
    assert_eq!(run(false, true), (40, 40), "no object identity: two programs");
    assert_eq!(run(true, false), (40, 40), "no shared text: per-process regions");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, failure_persistence: None, ..ProptestConfig::default() })]

    /// With sharing on and few RIDs (7 contexts: one program and up to 6 processes, so purges),
    /// no TLB entry ever translates a page differently
    /// from the OS table, through maps, unmaps, forks and exits.
    #[test]
    fn no_tlb_entry_disagrees_with_the_os_table(ops in proptest::collection::vec((0u8..8, 0u64..48, 1u32..6), 1..300),
                                                 long in any::<bool>()) {
        let pt = if long { "kind = \"vhpt-long\"\nvhpt_entries = 64\n" } else { "kind = \"vhpt-short\"\n" };
        let mut s = design(&itanium(8, pt, "rid_bits = 6\nshare_text = true\nshared_region = true"));
        let mut live = vec![0u32];
        let mut next = 1u32;
        let mut cur = 0u32;
        let mut batch = vec![Record::Process { asid: 0 }];
        for (op, page, x) in ops {
            let a = match op {
                0 => fetch(0x40_0000 + page * 16384),
                1 => load(0x60_0000 + page * 16384),
                2 => load(0x7f00_0000_0000 + page * 16384),
                3 => Record::Map { start: 0x7f00_0000_0000 + page * 16384, len: x as u64 * 16384,
                                    flags: map_flags::READ | if x % 2 == 0 { map_flags::SHARED } else { map_flags::WRITE } },
                4 => Record::Unmap { start: 0x7f00_0000_0000 + page * 16384, len: x as u64 * 16384 },
                5 if live.len() < 6 => { live.push(next); next += 1; Record::Fork { child: next - 1 } }
                6 if live.len() > 1 => {
                    let victim = live[(x as usize) % live.len()];
                    if victim == cur { continue; }
                    live.retain(|&l| l != victim);
                    Record::Exit { asid: victim }
                }
                _ => { cur = live[(page as usize) % live.len()]; Record::ContextSwitch { asid: cur } }
            };
            batch.push(a);
            s.process(&batch).unwrap();
            batch.clear();
            prop_assert!(s.check_translations().is_ok(), "{:?}", s.check_translations());
        }
    }
}

#[test]
fn a_shared_region_window_loses_its_pages_when_its_last_mapping_goes() {
    // A file's two pages in the shared region (chapman03 §3.3): the parent maps and touches
    // them and forks; its unmap leaves them to the child, which touches them without a fault;
    // the child's unmap is the last mapping, so its pages go (2 pages unmapped), and a new map of
    // the file faults again, finding the page in the page cache (a minor fault).
    let a = 0x7f00_0000_0000u64;
    let page = 16384u64;
    let flags = map_flags::READ | map_flags::SHARED | map_flags::FILE;
    let t = vec![
        Record::Process { asid: 0 },
        Record::Object { id: 7, offset: 0 },
        Record::Map { start: a, len: 2 * page, flags },
        load(a),
        load(a + page),
        Record::Fork { child: 1 },
        Record::Unmap { start: a, len: 2 * page },
        Record::ContextSwitch { asid: 1 },
        load(a),
        load(a + page),
        Record::Unmap { start: a, len: 2 * page },
        Record::Object { id: 7, offset: 0 },
        Record::Map { start: a, len: 2 * page, flags },
        load(a),
    ];
    let run = |shared: &str| {
        let mut s = design(&itanium(64, "kind = \"vhpt-long\"\nvhpt_entries = 4096\n", shared));
        s.process(&t).unwrap();
        s.check_translations().unwrap();
        s.stats()
    };
    let st = run("shared_region = true");
    assert_eq!(st.events.pages_unmapped, 2, "only the child's unmap, the last mapping, unmaps");
    assert_eq!(st.page_faults, 3, "2 first touches and the touch after the new map");
    assert_eq!((st.kernel.major_faults, st.kernel.minor_faults), (2, 1));
    assert_eq!((st.os.page_cache.frames, st.os.page_cache.hits), (2, 1));
    // Without the shared region each process's pages are its own: the child inherits the
    // parent's 2 at the fork, the parent's unmap unmaps its 2 and the child's its 2; then 1
    // more fault.
    let private = run("");
    assert_eq!(private.events.pages_unmapped, 4);
    assert_eq!(private.page_faults, 3);
}
