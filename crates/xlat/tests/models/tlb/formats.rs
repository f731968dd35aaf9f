//! TLB entry formats (single, superpage, partial-subblock, complete-subblock) against an
//! independent reference model.
//!
//! The reference shares no code with `xlat::tlb`: each set is a plain vector of entries in LRU
//! (or FIFO) order, an entry is (ASID, tag, log2 pages, valid vector, frames), and the fill rules
//! are written from the format descriptions (talluri95 §4.1, §4.4). Seeded random sequences of
//! accesses (lookup, then on a miss a page fault if needed and a fill), range invalidations and
//! remappings run on both, over a page table mixing base pages, partial-subblock blocks and
//! superpages smaller than, equal to and larger than the block. Hits, returned translations,
//! merged flags, evictions, invalidation counts and the full set of translations must agree.

use proptest::prelude::*;
use xlat::addr::{Asid, PageSize, Pfn, Vpn};
use xlat::pt::Pte;
use xlat::tlb::{frame_of, Format, Geometry, Policy, Tlb, TlbData, TlbEntry};

const BASE: u8 = 12;

/// A page-table mapping as the test sees it: frame of the page, mapping size in pages, valid
/// vector (partial-subblock) or 0.
#[derive(Clone, Copy, Debug)]
struct Map {
    frame: u64,
    pages: u64,
    valid: u64,
}

impl Map {
    fn pte(self) -> Pte {
        Pte { pfn: Pfn(self.frame), size: PageSize::from_bytes(4096 * self.pages).unwrap(), valid: self.valid }
    }
}

// ---------------------------------------------------------------------------------------------
// Reference TLB.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fmt {
    Single,
    Super,
    Partial(u64),
    Complete(u64),
}

#[derive(Clone, Debug)]
struct RefEntry {
    asid: u32,
    tag: u64,
    /// The entry covers 2^log base pages.
    log: u32,
    /// None: every page valid.
    valid: Option<u64>,
    /// Frame of the first page (single, superpage, partial-subblock entries).
    first: u64,
    /// Frame per page (complete-subblock entries).
    frames: Vec<u64>,
    complete: bool,
}

impl RefEntry {
    fn covers(&self, vpn: u64) -> bool {
        vpn / (1 << self.log) == self.tag
    }
    fn page_valid(&self, i: u64) -> bool {
        match self.valid {
            None => true,
            Some(v) => v & (1 << i) != 0,
        }
    }
    fn translates(&self, asid: u32, vpn: u64) -> bool {
        self.asid == asid && self.covers(vpn) && self.page_valid(vpn - self.tag * (1 << self.log))
    }
    fn frame(&self, vpn: u64) -> u64 {
        let i = vpn - self.tag * (1 << self.log);
        if self.complete {
            self.frames[i as usize]
        } else {
            self.first + i
        }
    }
    fn as_entry(&self) -> TlbEntry {
        TlbEntry {
            tag: self.tag,
            asid: self.asid,
            data: TlbData {
                pfn: if self.complete { 0 } else { self.first },
                shift: BASE + self.log as u8,
                valid: self.valid.unwrap_or(0),
            },
        }
    }
}

struct RefTlb {
    sets: Vec<Vec<RefEntry>>,
    ways: usize,
    lru: bool,
    fmt: Fmt,
}

fn log2(x: u64) -> u32 {
    let mut l = 0;
    while (1u64 << l) < x {
        l += 1;
    }
    assert_eq!(1u64 << l, x);
    l
}

impl RefTlb {
    fn new(entries: usize, ways: usize, lru: bool, fmt: Fmt) -> RefTlb {
        RefTlb { sets: vec![Vec::new(); entries / ways], ways, lru, fmt }
    }

    fn set_of(&self, tag: u64) -> usize {
        (tag % self.sets.len() as u64) as usize
    }

    /// (set, position) of the entry answering `vpn`: the smallest one translating it.
    fn locate(&self, asid: u32, vpn: u64) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize, u32)> = None;
        for (s, set) in self.sets.iter().enumerate() {
            for (p, e) in set.iter().enumerate() {
                if e.translates(asid, vpn) && best.map_or(true, |b| e.log < b.2) {
                    best = Some((s, p, e.log));
                }
            }
        }
        best.map(|(s, p, _)| (s, p))
    }

    fn move_front(&mut self, s: usize, p: usize) {
        if self.lru {
            let e = self.sets[s].remove(p);
            self.sets[s].insert(0, e);
        }
    }

    /// On a hit: the translation returned.
    fn lookup(&mut self, asid: u32, vpn: u64) -> Option<TlbData> {
        let (s, p) = self.locate(asid, vpn)?;
        let e = &self.sets[s][p];
        let data = if e.complete {
            TlbData { pfn: e.frame(vpn), shift: BASE, valid: 0 }
        } else {
            TlbData { pfn: e.first, shift: BASE + e.log as u8, valid: e.valid.unwrap_or(0) }
        };
        self.move_front(s, p);
        Some(data)
    }

    fn find_tag(&self, asid: u32, tag: u64, log: u32) -> Option<(usize, usize)> {
        let s = self.set_of(tag);
        self.sets[s].iter().position(|e| e.asid == asid && e.tag == tag && e.log == log).map(|p| (s, p))
    }

    fn add(&mut self, e: RefEntry) -> Option<TlbEntry> {
        let s = self.set_of(e.tag);
        let evicted = if self.sets[s].len() == self.ways { self.sets[s].pop().map(|x| x.as_entry()) } else { None };
        self.sets[s].insert(0, e);
        evicted
    }

    /// (evicted, merged)
    fn fill(&mut self, asid: u32, vpn: u64, m: Map) -> (Option<TlbEntry>, bool) {
        let whole = |log: u32| RefEntry {
            asid,
            tag: vpn >> log,
            log,
            valid: None,
            first: m.frame - vpn % (1 << log),
            frames: Vec::new(),
            complete: false,
        };
        match self.fmt {
            Fmt::Single => (self.add(whole(0)), false),
            Fmt::Super => {
                if m.valid == 0 && m.pages > 1 {
                    (self.add(whole(log2(m.pages))), false)
                } else {
                    (self.add(whole(0)), false)
                }
            }
            Fmt::Partial(bp) => {
                let vector = if m.valid != 0 && m.pages == bp {
                    m.valid
                } else if m.valid == 0 && m.pages >= bp {
                    if bp == 64 {
                        u64::MAX
                    } else {
                        (1 << bp) - 1
                    }
                } else {
                    return (self.add(whole(0)), false);
                };
                let log = log2(bp);
                let first = m.frame - vpn % bp;
                if let Some((s, p)) = self.find_tag(asid, vpn / bp, log) {
                    self.sets[s][p].valid = Some(vector);
                    self.sets[s][p].first = first;
                    self.move_front(s, p);
                    return (None, true);
                }
                let e = RefEntry {
                    asid,
                    tag: vpn / bp,
                    log,
                    valid: Some(vector),
                    first,
                    frames: Vec::new(),
                    complete: false,
                };
                (self.add(e), false)
            }
            Fmt::Complete(bp) => {
                let mut pages = vec![None; bp as usize];
                pages[(vpn % bp) as usize] = Some(m);
                self.fill_complete(asid, vpn, bp, &pages)
            }
        }
    }

    fn fill_complete(&mut self, asid: u32, vpn: u64, bp: u64, pages: &[Option<Map>]) -> (Option<TlbEntry>, bool) {
        let log = log2(bp);
        let (slot, evicted, merged) = match self.find_tag(asid, vpn / bp, log) {
            Some((s, p)) => {
                self.move_front(s, p);
                (self.set_of(vpn / bp), None, true)
            }
            None => {
                let e = RefEntry {
                    asid,
                    tag: vpn / bp,
                    log,
                    valid: Some(0),
                    first: 0,
                    frames: vec![0; bp as usize],
                    complete: true,
                };
                let ev = self.add(e);
                (self.set_of(vpn / bp), ev, false)
            }
        };
        let p = self.sets[slot].iter().position(|e| e.asid == asid && e.tag == vpn / bp && e.log == log).unwrap();
        let e = &mut self.sets[slot][p];
        for (i, m) in pages.iter().enumerate() {
            if let Some(m) = m {
                e.frames[i] = m.frame;
                e.valid = Some(e.valid.unwrap() | 1 << i);
            }
        }
        (evicted, merged)
    }

    fn invalidate(&mut self, asid: u32, first: u64, last: u64) -> u64 {
        let mut n = 0;
        for set in &mut self.sets {
            let before = set.len();
            set.retain(|e| e.asid != asid || !(first..=last).any(|v| e.translates(asid, v)));
            n += (before - set.len()) as u64;
        }
        n
    }

    fn translations(&self) -> Vec<(u32, Vpn, Pfn)> {
        let mut out = Vec::new();
        for e in self.sets.iter().flatten() {
            for i in 0..1u64 << e.log {
                let v = e.tag * (1 << e.log) + i;
                if e.page_valid(i) {
                    out.push((e.asid, Vpn(v), Pfn(e.frame(v))));
                }
            }
        }
        out.sort();
        out
    }
}

// ---------------------------------------------------------------------------------------------
// The page table the accesses run over (test input, shared by both sides).

#[derive(Clone, Debug)]
enum Block {
    /// Base pages: frame per page, None = not mapped yet.
    Base(Vec<Option<u64>>),
    /// Partial-subblock PTE over the block (0 = nothing mapped yet), properly placed.
    Partial(u64),
    /// One superpage of the block's size.
    Whole,
    /// Superpages of two pages.
    Small,
}

#[derive(Clone, Debug)]
struct Region {
    /// One superpage over the whole region (4 blocks).
    big: bool,
    blocks: Vec<Block>,
}

struct Space {
    bp: u64,
    /// regions[asid][r]
    regions: Vec<Vec<Region>>,
    next_frame: u64,
    rng: u64,
}

impl Space {
    fn new(seed: u64, bp: u64, asids: usize, regions: usize) -> Space {
        let mut sp = Space { bp, regions: Vec::new(), next_frame: 1 << 30, rng: seed | 1 };
        for _ in 0..asids {
            let rs = (0..regions).map(|_| sp.random_region()).collect();
            sp.regions.push(rs);
        }
        sp
    }

    fn rand(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    fn random_block(&mut self) -> Block {
        let bp = self.bp;
        match self.rand() % 5 {
            0 | 1 => Block::Base((0..bp).map(|_| (self.rand() % 2 == 0).then_some(0)).collect::<Vec<_>>()),
            2 => Block::Partial(self.rand() & self.rand() & if bp == 64 { u64::MAX } else { (1 << bp) - 1 }),
            3 => Block::Whole,
            _ => Block::Small,
        }
    }

    fn random_region(&mut self) -> Region {
        let big = self.rand() % 6 == 0;
        let mut blocks: Vec<Block> = (0..4).map(|_| self.random_block()).collect();
        // Give base pages that start mapped a frame of their own.
        for b in &mut blocks {
            if let Block::Base(f) = b {
                for x in f.iter_mut().flatten() {
                    *x = self.next_frame;
                    self.next_frame += 7;
                }
            }
        }
        Region { big, blocks }
    }

    fn pages(&self) -> u64 {
        self.regions[0].len() as u64 * 4 * self.bp
    }

    fn region_frame(&self, asid: usize, r: usize) -> u64 {
        ((asid * self.regions[0].len() + r) as u64 + 1) * 8 * self.bp
    }

    /// The mapping of `vpn`; with `fault`, maps it first if needed.
    fn map(&mut self, asid: usize, vpn: u64, fault: bool) -> Option<Map> {
        let bp = self.bp;
        let r = (vpn / (4 * bp)) as usize;
        let rf = self.region_frame(asid, r);
        let off = vpn % (4 * bp);
        let (b, i) = ((off / bp) as usize, off % bp);
        let block_frame = rf + b as u64 * bp;
        if self.regions[asid][r].big {
            return Some(Map { frame: rf + off, pages: 4 * bp, valid: 0 });
        }
        let fresh = self.next_frame;
        match &mut self.regions[asid][r].blocks[b] {
            Block::Base(f) => {
                if f[i as usize].is_none() && fault {
                    f[i as usize] = Some(fresh);
                    self.next_frame += 7;
                }
                f[i as usize].map(|frame| Map { frame, pages: 1, valid: 0 })
            }
            Block::Partial(v) => {
                if fault {
                    *v |= 1 << i;
                }
                (*v & 1 << i != 0).then_some(Map { frame: block_frame + i, pages: bp, valid: *v })
            }
            Block::Whole => Some(Map { frame: block_frame + i, pages: bp, valid: 0 }),
            Block::Small => Some(Map { frame: block_frame + i, pages: 2, valid: 0 }),
        }
    }

    /// Changes how the block (or big region) holding `vpn` is mapped; returns the VPN range whose
    /// translations must be shot down.
    fn remap(&mut self, asid: usize, vpn: u64) -> (u64, u64) {
        let bp = self.bp;
        let r = (vpn / (4 * bp)) as usize;
        if self.regions[asid][r].big || self.rand() % 8 == 0 {
            self.regions[asid][r] = self.random_region();
            let lo = r as u64 * 4 * bp;
            return (lo, lo + 4 * bp - 1);
        }
        let b = ((vpn % (4 * bp)) / bp) as usize;
        let mut nb = self.random_block();
        if let Block::Base(f) = &mut nb {
            for x in f.iter_mut().flatten() {
                *x = self.next_frame;
                self.next_frame += 7;
            }
        }
        self.regions[asid][r].blocks[b] = nb;
        let lo = vpn / bp * bp;
        (lo, lo + bp - 1)
    }
}

// ---------------------------------------------------------------------------------------------
// The driver.

#[derive(Default, Debug, PartialEq, Eq)]
struct Counts {
    hits: u64,
    block_misses: u64,
    subblock_misses: u64,
    evictions: u64,
    invalidated: u64,
}

fn format_of(fmt: Fmt) -> Format {
    match fmt {
        Fmt::Single => Format::Single,
        Fmt::Super => Format::Superpage,
        Fmt::Partial(bp) => Format::PartialSubblock { block_pages: bp as u32 },
        Fmt::Complete(bp) => Format::CompleteSubblock { block_pages: bp as u32 },
    }
}

/// Runs `ops` on a TLB and the reference; returns the counts (equal on both sides).
fn run(fmt: Fmt, prefetch: bool, entries: u32, ways: u32, policy: Policy, seed: u64, ops: &[(u8, u16, u8)]) -> Counts {
    let bp = match fmt {
        Fmt::Partial(b) | Fmt::Complete(b) => b,
        _ => 4,
    };
    let regions = if bp >= 64 { 2 } else { 4 };
    let mut space = Space::new(seed, bp, 2, regions);
    let geometry = Geometry { entries, ways, policy, seed: 1 };
    let mut tlb = Tlb::with_format(geometry, PageSize::SIZE_4K, format_of(fmt)).unwrap();
    let mut rf = RefTlb::new(entries as usize, ways as usize, policy == Policy::Lru, fmt);
    let mut c = Counts::default();
    let n = space.pages();
    let what = format!("{fmt:?} prefetch={prefetch} {entries}/{ways} {policy:?}");
    for (step, &(asid, x, kind)) in ops.iter().enumerate() {
        let a = asid as usize;
        let vpn = x as u64 % n;
        match kind {
            0 => {
                let first = vpn;
                let last = (first + (x as u64 >> 8) % (2 * bp)).min(n - 1);
                let got = tlb.invalidate_range(Asid(asid as u32), Vpn(first), Vpn(last));
                assert_eq!(got, rf.invalidate(asid as u32, first, last), "{what} step {step}: invalidate");
                c.invalidated += got;
            }
            1 => {
                let (first, last) = space.remap(a, vpn);
                let got = tlb.invalidate_range(Asid(asid as u32), Vpn(first), Vpn(last));
                assert_eq!(got, rf.invalidate(asid as u32, first, last), "{what} step {step}: remap");
                c.invalidated += got;
            }
            _ => {
                let got = tlb.lookup(Asid(asid as u32), Vpn(vpn));
                assert_eq!(got, rf.lookup(asid as u32, vpn), "{what} step {step}: lookup {asid}/{vpn:#x}");
                if let Some(d) = got {
                    let want = space.map(a, vpn, false).expect("a hit is mapped").frame;
                    assert_eq!(frame_of(d, Vpn(vpn), PageSize::SIZE_4K), Pfn(want), "{what} step {step}");
                    c.hits += 1;
                    continue;
                }
                let m = space.map(a, vpn, true).expect("faulted in");
                let (fill, want) = match fmt {
                    Fmt::Complete(bp) if prefetch => {
                        let first = vpn / bp * bp;
                        let maps: Vec<Option<Map>> = (first..first + bp).map(|v| space.map(a, v, false)).collect();
                        let ptes: Vec<Option<Pte>> = maps.iter().map(|m| m.map(Map::pte)).collect();
                        (tlb.fill_block(asid as u32, Vpn(vpn), &ptes), rf.fill_complete(asid as u32, vpn, bp, &maps))
                    }
                    _ => (tlb.fill(asid as u32, Vpn(vpn), m.pte()), rf.fill(asid as u32, vpn, m)),
                };
                assert_eq!((fill.evicted, fill.merged), want, "{what} step {step}: fill {asid}/{vpn:#x} {m:?}");
                c.evictions += fill.evicted.is_some() as u64;
                if fill.merged {
                    c.subblock_misses += 1;
                } else {
                    c.block_misses += 1;
                }
                // The page just filled is now translated (probe: no replacement-state change).
                let (s, p) = rf.locate(asid as u32, vpn).expect("filled page translated");
                let e = &rf.sets[s][p];
                assert_eq!(e.frame(vpn), m.frame);
                assert_eq!(tlb.probe(Asid(asid as u32), Vpn(vpn)), Some(e.as_entry()), "{what} step {step}: probe");
            }
        }
        if step % 8 == 7 || step + 1 == ops.len() {
            let mut got = tlb.translations();
            got.sort();
            assert_eq!(got, rf.translations(), "{what} step {step}: translations");
            assert_eq!(tlb.occupancy() as usize, rf.sets.iter().map(Vec::len).sum::<usize>());
        }
    }
    c
}

const GEOMETRIES: [(u32, u32); 3] = [(64, 64), (16, 4), (8, 8)];

fn ops() -> impl Strategy<Value = Vec<(u8, u16, u8)>> {
    prop::collection::vec((0u8..2, any::<u16>(), 0u8..24), 50..400)
}

fn each(fmt: Fmt, prefetch: bool, seed: u64, ops: &[(u8, u16, u8)]) -> Counts {
    let mut total = Counts::default();
    for (entries, ways) in GEOMETRIES {
        for policy in [Policy::Lru, Policy::Fifo] {
            let c = run(fmt, prefetch, entries, ways, policy, seed, ops);
            total.hits += c.hits;
            total.block_misses += c.block_misses;
            total.subblock_misses += c.subblock_misses;
            total.evictions += c.evictions;
            total.invalidated += c.invalidated;
        }
    }
    total
}

proptest! {
    #![proptest_config(crate::proptest_cases(24))]

    #[test]
    fn single_and_superpage_match_reference(seed in any::<u64>(), ops in ops()) {
        each(Fmt::Single, false, seed, &ops);
        each(Fmt::Super, false, seed, &ops);
    }

    #[test]
    fn partial_subblock_matches_reference(seed in any::<u64>(), ops in ops()) {
        for bp in [2, 4, 16, 64] {
            each(Fmt::Partial(bp), false, seed, &ops);
        }
    }

    #[test]
    fn complete_subblock_matches_reference(seed in any::<u64>(), ops in ops()) {
        for bp in [4, 16] {
            each(Fmt::Complete(bp), false, seed, &ops);
            each(Fmt::Complete(bp), true, seed, &ops);
        }
    }
}

/// Fixed seeds with long sequences: the random runs must actually exercise merges, evictions and
/// both kinds of complete-subblock misses, and prefetch must remove subblock misses.
#[test]
fn long_sequences_exercise_every_path() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let ops: Vec<(u8, u16, u8)> = (0..3000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x % 2) as u8, (x >> 8) as u16, ((x >> 32) % 40) as u8)
        })
        .collect();
    let p = each(Fmt::Partial(16), false, 7, &ops);
    assert!(p.subblock_misses > 0 && p.evictions > 0 && p.hits > 0, "{p:?}");
    let plain = each(Fmt::Complete(16), false, 7, &ops);
    let pre = each(Fmt::Complete(16), true, 7, &ops);
    assert!(plain.subblock_misses > 0 && plain.block_misses > 0, "{plain:?}");
    assert!(pre.subblock_misses < plain.subblock_misses, "{pre:?} vs {plain:?}");
    let s = each(Fmt::Super, false, 7, &ops);
    let b = each(Fmt::Single, false, 7, &ops);
    assert!(s.block_misses < b.block_misses, "superpages miss less: {s:?} vs {b:?}");
}
