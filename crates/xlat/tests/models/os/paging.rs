//! Page reservation, static and promoted superpages, and partial-subblock PTEs: the page-table
//! operations the OS emits are applied to a model page table written here, and after every step
//! the model, the OS's own view and an independent account of resident pages and frames must
//! agree with the policy (docs/superpages.md).

use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use xlat::addr::{Asid, PageSize, Pfn, Vpn};
use xlat::os::{AllocatorKind, FrameAllocator, Os, OsConfig, Paging, PtOp, Superpages};
use xlat::pt::Pte;

const PAGE: u64 = 4096;

/// A mapping of the model page table: `pages` base pages from its key, the first in `frame0`;
/// `valid` is the partial-subblock vector (0: every page).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mapping {
    pages: u64,
    frame0: u64,
    valid: u64,
}

/// The model page table: (asid, first vpn of the mapping) -> mapping.
#[derive(Default)]
struct Model {
    bp: u64,
    maps: HashMap<(u32, u64), Mapping>,
}

impl Model {
    /// The mapping containing `vpn`, with its key.
    fn containing(&self, asid: u32, vpn: u64) -> Option<(u64, Mapping)> {
        if let Some(&m) = self.maps.get(&(asid, vpn)) {
            if m.pages == 1 {
                return Some((vpn, m));
            }
        }
        let first = vpn - vpn % self.bp;
        let m = *self.maps.get(&(asid, first))?;
        (m.pages == self.bp && (m.valid == 0 || m.valid & (1 << (vpn - first)) != 0)).then_some((first, m))
    }

    /// (frame, mapping) of `vpn`.
    fn lookup(&self, asid: u32, vpn: u64) -> Option<(u64, Mapping)> {
        self.containing(asid, vpn).map(|(k, m)| (m.frame0 + (vpn - k), m))
    }

    fn apply(&mut self, op: PtOp) {
        match op {
            PtOp::Map(Asid(a), Vpn(v), pte) => {
                let pages = pte.size.bytes() / PAGE;
                assert!(pages == 1 || pages == self.bp, "{op:?}: size is neither a base page nor the block");
                let first = v - v % pages;
                assert!(pte.pfn.0 >= v - first, "{op:?}");
                let m = Mapping { pages, frame0: pte.pfn.0 - (v - first), valid: pte.valid };
                let block = v - v % self.bp;
                if pages == 1 {
                    assert_eq!(pte.valid, 0, "{op:?}");
                    assert!(self.containing(a, v).is_none(), "{op:?} overlaps a mapping");
                    assert!(!self.maps.get(&(a, block)).is_some_and(|m| m.pages > 1), "{op:?} inside a block PTE");
                } else {
                    assert_eq!(m.frame0 % self.bp, 0, "{op:?}: block PTE not physically aligned");
                    assert!(pte.valid == 0 || pte.valid & (1 << (v - first)) != 0, "{op:?}: names an invalid page");
                    for p in first..first + self.bp {
                        assert!(!self.maps.get(&(a, p)).is_some_and(|m| m.pages == 1), "{op:?} over a base PTE");
                    }
                }
                self.maps.insert((a, first), m);
            }
            PtOp::Unmap(Asid(a), Vpn(v)) => {
                let (k, _) = self.containing(a, v).unwrap_or_else(|| panic!("{op:?}: nothing mapped"));
                self.maps.remove(&(a, k));
            }
        }
    }

    /// Base pages covered by all mappings.
    fn covered(&self) -> u64 {
        self.maps.values().map(|m| if m.valid == 0 { m.pages } else { m.valid.count_ones() as u64 }).sum()
    }
}

#[derive(Clone, Copy, Debug)]
struct Policy {
    reservation: bool,
    superpages: Superpages,
    partial: bool,
}

const POLICIES: [Policy; 7] = [
    Policy { reservation: false, superpages: Superpages::None, partial: false },
    Policy { reservation: true, superpages: Superpages::None, partial: false },
    Policy { reservation: true, superpages: Superpages::None, partial: true },
    Policy { reservation: true, superpages: Superpages::Static, partial: false },
    Policy { reservation: true, superpages: Superpages::Static, partial: true },
    Policy { reservation: true, superpages: Superpages::Promote, partial: false },
    Policy { reservation: true, superpages: Superpages::Promote, partial: true },
];

const KINDS: [AllocatorKind; 3] = [AllocatorKind::Sequential, AllocatorKind::Random, AllocatorKind::Buddy];

/// The OS under test, the model page table, and what the test itself knows is resident.
struct World {
    os: Os,
    pt: Model,
    policy: Policy,
    bp: u64,
    /// (asid, vpn) -> frame of every resident page, as handed out by faults (and forks).
    resident: BTreeMap<(u32, u64), u64>,
    forked: bool,
    ops: Vec<PtOp>,
    sd: Vec<(Asid, Vpn, Vpn)>,
}

fn config(policy: Policy, bp: u64, failure: f64, seed: u64) -> OsConfig {
    OsConfig {
        reservation: policy.reservation,
        block_pages: bp,
        reservation_failure: failure,
        superpages: policy.superpages,
        partial_subblock: policy.partial,
        seed,
        ..OsConfig::default()
    }
}

impl World {
    fn new(policy: Policy, kind: AllocatorKind, frames: u64, bp: u64, failure: f64, seed: u64) -> World {
        let paging = Paging::new(&config(policy, bp, failure, seed), PageSize::SIZE_4K).unwrap();
        World {
            os: Os::with_paging(FrameAllocator::new(kind, frames, seed, 0.0), paging),
            pt: Model { bp, maps: HashMap::new() },
            policy,
            bp,
            resident: BTreeMap::new(),
            forked: false,
            ops: Vec::new(),
            sd: Vec::new(),
        }
    }

    /// (frame, pages) of every resident page, to see which translations an operation changed.
    fn snapshot(&self) -> HashMap<(u32, u64), (u64, u64)> {
        self.resident
            .keys()
            .filter_map(|&(a, v)| Some(((a, v), self.pt.lookup(a, v).map(|(f, m)| (f, m.pages))?)))
            .collect()
    }

    /// Every translation that changed or went away must be in a shootdown range.
    fn check_shootdown(&self, before: &HashMap<(u32, u64), (u64, u64)>) {
        for (&(a, v), &was) in before {
            let now = self.pt.lookup(a, v).map(|(f, m)| (f, m.pages));
            if now != Some(was) {
                assert!(
                    self.sd.iter().any(|&(s, lo, hi)| s.0 == a && lo.0 <= v && v <= hi.0),
                    "translation of {a}:{v:#x} changed {was:?} -> {now:?} without a shootdown ({:?})",
                    self.sd
                );
            }
        }
    }

    fn fault(&mut self, asid: u32, vpn: u64) -> Option<u64> {
        assert!(!self.resident.contains_key(&(asid, vpn)));
        let before = self.snapshot();
        let held: HashSet<u64> = self.resident.values().copied().collect();
        self.ops.clear();
        self.sd.clear();
        let r = self.os.fault(Asid(asid), Vpn(vpn), &mut self.ops, &mut self.sd);
        let Ok(Pfn(f)) = r else {
            assert!(self.ops.is_empty() && self.sd.is_empty(), "a failed fault changes no mapping");
            self.check();
            return None;
        };
        for &op in &self.ops {
            self.pt.apply(op);
        }
        assert!(!held.contains(&f), "frame {f} handed out while still held");
        self.resident.insert((asid, vpn), f);
        // Pages the fault brought in besides vpn: only a static superpage does that.
        let first = vpn - vpn % self.bp;
        for p in first..first + self.bp {
            if let (None, Some((g, m))) = (self.resident.get(&(asid, p)), self.pt.lookup(asid, p)) {
                assert_eq!(self.policy.superpages, Superpages::Static, "{asid}:{p:#x} mapped but never faulted");
                assert_eq!((m.pages, m.valid), (self.bp, 0), "static fill maps a superpage");
                assert!(!held.contains(&g), "frame {g} handed out while still held");
                self.resident.insert((asid, p), g);
            }
        }
        self.check_shootdown(&before);
        self.check();
        Some(f)
    }

    fn unmap(&mut self, asid: u32, first: u64, last: u64) -> u64 {
        let before = self.snapshot();
        self.ops.clear();
        self.sd.clear();
        let n = self.os.unmap_range(Asid(asid), Vpn(first), Vpn(last), &mut self.ops, &mut self.sd);
        let gone: Vec<(u32, u64)> = self.resident.range((asid, first)..=(asid, last)).map(|(k, _)| *k).collect();
        assert_eq!(n, gone.len() as u64, "pages removed");
        for k in gone {
            self.resident.remove(&k);
        }
        for &op in &self.ops {
            self.pt.apply(op);
        }
        self.check_shootdown(&before);
        self.check();
        n
    }

    fn fork(&mut self, parent: u32, child: u32) {
        self.ops.clear();
        self.os.fork_ops(Asid(parent), Asid(child), &mut self.ops);
        for &op in &self.ops {
            assert!(matches!(op, PtOp::Map(Asid(c), ..) if c == child), "fork only maps the child: {op:?}");
            self.pt.apply(op);
        }
        let pages: Vec<(u64, u64)> =
            self.resident.range((parent, 0)..=(parent, u64::MAX)).map(|(&(_, v), &f)| (v, f)).collect();
        for (v, f) in pages {
            self.resident.insert((child, v), f);
            let (p, c) = (self.pt.lookup(parent, v).unwrap().1, self.pt.lookup(child, v).unwrap().1);
            assert_eq!((p.pages, p.valid), (c.pages, c.valid), "the child's mapping kind is the parent's");
        }
        self.forked = true;
        self.check();
    }

    /// Every invariant of the state.
    fn check(&self) {
        let (bp, os) = (self.bp, &self.os);
        // Each resident page maps to its frame through exactly one mapping; nothing else is mapped.
        for (&(a, v), &f) in &self.resident {
            let (g, m) = self.pt.lookup(a, v).unwrap_or_else(|| panic!("resident {a}:{v:#x} not mapped"));
            assert_eq!(g, f, "{a}:{v:#x} maps to the wrong frame");
            let want = Pte { pfn: Pfn(f), size: PageSize::from_bytes(m.pages * PAGE).unwrap(), valid: m.valid };
            assert_eq!(os.mapping(Asid(a), Vpn(v)), Some(want), "os mapping of {a}:{v:#x}");
        }
        assert_eq!(self.pt.covered(), self.resident.len() as u64, "mappings cover only resident pages");
        // Frames: shared only after fork; single frames never inside a live reservation.
        let mut owners: HashMap<u64, u32> = HashMap::new();
        for &f in self.resident.values() {
            *owners.entry(f).or_default() += 1;
        }
        if !self.forked {
            assert!(owners.values().all(|&n| n == 1), "a frame handed out twice");
        }
        let live: BTreeSet<u64> =
            self.resident.keys().filter_map(|&(a, v)| os.reservation(Asid(a), Vpn(v)).map(|p| p.0)).collect();
        assert!(live.iter().all(|b| b % bp == 0), "reservations are aligned");
        let mut placed = 0;
        for (&(a, v), &f) in &self.resident {
            match os.reservation(Asid(a), Vpn(v)) {
                Some(Pfn(base)) if f - f % bp == base => {
                    assert_eq!(f, base + v % bp, "{a}:{v:#x} in its reservation but not properly placed");
                    placed += 1;
                }
                r => {
                    assert!(self.forked || r.is_none(), "{a}:{v:#x} has a reservation but frame {f} outside it");
                    assert!(!live.contains(&(f - f % bp)), "single frame {f} carved out of a live reservation");
                }
            }
        }
        if !self.policy.reservation {
            assert!(live.is_empty());
        }
        // Each block's mapping is what the policy calls for.
        let blocks: BTreeSet<(u32, u64)> = self.resident.keys().map(|&(a, v)| (a, v - v % bp)).collect();
        let (mut supers, mut partials) = (0, 0);
        for &(a, first) in &blocks {
            let here: Vec<(u64, u64)> =
                self.resident.range((a, first)..=(a, first + bp - 1)).map(|(&(_, v), &f)| (v, f)).collect();
            let resv = os.reservation(Asid(a), Vpn(first)).map(|p| p.0);
            let all_placed = resv.is_some_and(|b| here.iter().all(|&(v, f)| f == b + v % bp));
            let expect = if !self.policy.reservation || !all_placed {
                (1, 0)
            } else if here.len() as u64 == bp && self.policy.superpages != Superpages::None {
                (bp, 0)
            } else if self.policy.partial {
                let valid = here.iter().fold(0u64, |m, &(v, _)| m | 1 << (v % bp));
                (bp, valid)
            } else {
                (1, 0)
            };
            for &(v, _) in &here {
                let m = self.pt.lookup(a, v).unwrap().1;
                assert_eq!((m.pages, m.valid), expect, "mapping of {a}:{v:#x} ({} pages resident)", here.len());
            }
            if expect.0 == bp {
                assert_eq!(self.pt.maps[&(a, first)].frame0, resv.unwrap(), "block PTE in the block's reservation");
                if expect.1 == 0 {
                    supers += 1;
                } else {
                    partials += 1;
                }
            }
        }
        let st = os.stats();
        let singles = owners.keys().filter(|&&f| !live.contains(&(f - f % bp))).count() as u64;
        assert_eq!(st.frames_in_use, singles + bp * live.len() as u64, "frames in use");
        assert_eq!(st.resident_pages, self.resident.len() as u64);
        assert_eq!(st.live_reservations, live.len() as u64);
        assert_eq!((st.superpages, st.partial_subblock_ptes), (supers, partials));
        assert_eq!(st.placed_pages, placed);
    }

    /// Unmaps everything; memory must be entirely free again.
    fn finish(&mut self) {
        let asids: BTreeSet<u32> = self.resident.keys().map(|k| k.0).collect();
        for a in asids {
            self.unmap(a, 0, u64::MAX);
        }
        assert!(self.pt.maps.is_empty());
        let st = self.os.stats();
        assert_eq!((st.frames_in_use, st.resident_pages, st.live_reservations), (0, 0, 0));
    }
}

#[derive(Clone, Debug)]
enum Op {
    Fault(usize, u64),
    /// Faults every missing page of a block, starting at an offset.
    Fill(usize, u64, u64),
    Unmap(usize, u64, u64),
    Fork(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..8usize, 0..4096u64).prop_map(|(p, x)| Op::Fault(p, x)),
        2 => (0..8usize, 0..4u64, 0..64u64).prop_map(|(p, b, o)| Op::Fill(p, b, o)),
        3 => (0..8usize, 0..4096u64, 1..=2u64).prop_map(|(p, x, l)| Op::Unmap(p, x, l)),
        1 => (0..8usize).prop_map(Op::Fork),
    ]
}

fn run(policy: Policy, kind: AllocatorKind, bp: u64, failure: f64, frames: u64, seed: u64, ops: &[Op]) {
    let mut w = World::new(policy, kind, frames, bp, failure, seed);
    let span = 4 * bp; // pages 0x100 .. 0x100 + span: four blocks
    let base = 0x100;
    let mut procs = vec![1u32, 2];
    for o in ops {
        match *o {
            Op::Fault(p, x) => {
                let (a, v) = (procs[p % procs.len()], base + x % span);
                if !w.resident.contains_key(&(a, v)) {
                    w.fault(a, v);
                }
            }
            Op::Fill(p, b, o) => {
                let a = procs[p % procs.len()];
                for j in 0..bp {
                    let v = base + b * bp + (o + j) % bp;
                    if !w.resident.contains_key(&(a, v)) && w.fault(a, v).is_none() {
                        break;
                    }
                }
            }
            Op::Unmap(p, x, l) => {
                let first = base + x % span;
                w.unmap(procs[p % procs.len()], first, first + (l * x) % (2 * bp));
            }
            Op::Fork(p) if procs.len() < 5 => {
                let child = 10 + procs.len() as u32;
                w.fork(procs[p % procs.len()], child);
                procs.push(child);
            }
            Op::Fork(_) => {}
        }
    }
    w.finish();
}

proptest! {
    #![proptest_config(crate::proptest_cases(256))]

    #[test]
    fn every_policy_keeps_os_and_page_table_consistent(
        pol in 0..POLICIES.len(),
        kind in 0..3usize,
        bp in prop::sample::select(vec![2u64, 4, 16, 64]),
        failure in prop::sample::select(vec![0.0, 0.3]),
        small in any::<bool>(),
        seed in 0..1000u64,
        ops in prop::collection::vec(op(), 1..120),
    ) {
        // Small memory: a few blocks, so reservations fail for real and faults run out of memory.
        let frames = if small { 3 * bp + 5 } else { 1 << 14 };
        run(POLICIES[pol], KINDS[kind], bp, failure, frames, seed, &ops);
    }
}

#[test]
fn each_policy_survives_a_fixed_mixed_sequence() {
    let ops: Vec<Op> = (0..300u64)
        .map(|i| match i % 7 {
            0..=2 => Op::Fault(i as usize, i * 37),
            3 => Op::Fill(i as usize, i % 4, i),
            4 | 5 => Op::Unmap(i as usize, i * 11, 1 + i % 2),
            _ => Op::Fork(i as usize),
        })
        .collect();
    for policy in POLICIES {
        for kind in KINDS {
            run(policy, kind, 16, 0.2, 1 << 12, 7, &ops);
        }
    }
}

/// A world for the exact cases: 16-page blocks, buddy allocator, ample memory.
fn world(policy: Policy, failure: f64, seed: u64) -> World {
    World::new(policy, AllocatorKind::Buddy, 1 << 12, 16, failure, seed)
}

const SP64K: u64 = 16 * PAGE;

#[test]
fn promotion_after_the_sixteenth_page() {
    for partial in [false, true] {
        let mut w = world(Policy { reservation: true, superpages: Superpages::Promote, partial }, 0.0, 1);
        let first = 0x40;
        let order: Vec<u64> = (0..16).map(|j| (j * 7) % 16).collect(); // every page once
        let mut frames = Vec::new();
        for (n, &j) in order.iter().enumerate() {
            frames.push((j, w.fault(1, first + j).unwrap()));
            let st = w.os.stats();
            if n < 15 {
                assert_eq!((st.superpages, st.promotions), (0, 0));
                assert_eq!(st.partial_subblock_ptes, partial as u64);
            }
        }
        let base = w.os.reservation(Asid(1), Vpn(first)).unwrap().0;
        assert_eq!(base % 16, 0);
        assert!(frames.iter().all(|&(j, f)| f == base + j), "every page properly placed");
        // The 16th fault: the old PTEs go, then one superpage PTE.
        let (last, unmaps) = w.ops.split_last().unwrap();
        assert_eq!(*last, PtOp::Map(Asid(1), Vpn(first), Pte { pfn: Pfn(base), size: sp64k(), valid: 0 }));
        let mut unmapped: Vec<u64> = unmaps
            .iter()
            .map(|op| match *op {
                PtOp::Unmap(Asid(1), Vpn(v)) => v,
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        unmapped.sort_unstable();
        if partial {
            assert_eq!(unmapped.len(), 1, "one partial-subblock PTE replaced");
        } else {
            let last_page = first + order[15];
            let want: Vec<u64> = (first..first + 16).filter(|&v| v != last_page).collect();
            assert_eq!(unmapped, want, "the 15 base PTEs replaced");
        }
        assert!(w.sd.contains(&(Asid(1), Vpn(first), Vpn(first + 15))), "the block is shot down");
        let st = w.os.stats();
        assert_eq!((st.superpages, st.promotions, st.partial_subblock_ptes), (1, 1, 0));
        w.finish();
    }
}

fn sp64k() -> PageSize {
    PageSize::from_bytes(SP64K).unwrap()
}

#[test]
fn unmapping_one_page_demotes_the_superpage() {
    for partial in [false, true] {
        let mut w = world(Policy { reservation: true, superpages: Superpages::Promote, partial }, 0.0, 1);
        for v in 0x80..0x90 {
            w.fault(1, v);
        }
        let base = w.os.reservation(Asid(1), Vpn(0x80)).unwrap().0;
        assert_eq!(w.unmap(1, 0x85, 0x85), 1);
        assert!(matches!(w.ops[0], PtOp::Unmap(Asid(1), Vpn(v)) if (0x80..0x90).contains(&v)));
        let maps: Vec<(u64, Pte)> = w.ops[1..]
            .iter()
            .map(|op| match *op {
                PtOp::Map(Asid(1), Vpn(v), p) => (v, p),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        if partial {
            assert_eq!(maps.len(), 1);
            let (v, p) = maps[0];
            assert_eq!((p.size, p.valid, p.pfn.0), (sp64k(), 0xffff & !(1 << 5), base + (v - 0x80)));
        } else {
            let want: Vec<(u64, Pte)> = (0x80..0x90)
                .filter(|&v| v != 0x85)
                .map(|v| (v, Pte::base(Pfn(base + v - 0x80), PageSize::SIZE_4K)))
                .collect();
            assert_eq!(maps, want, "15 base pages remain, properly placed");
        }
        assert!(w.sd.contains(&(Asid(1), Vpn(0x80), Vpn(0x8f))), "the whole superpage is shot down");
        let st = w.os.stats();
        assert_eq!((st.demotions, st.superpages, st.resident_pages), (1, 0, 15));
        assert_eq!(st.partial_subblock_ptes, partial as u64);
        assert_eq!(st.frames_in_use, 16, "the reservation keeps the freed frame");
        // Faulting the page back in promotes again.
        assert_eq!(w.fault(1, 0x85), Some(base + 5));
        assert_eq!(w.os.stats().promotions, 2);
        w.finish();
    }
}

#[test]
fn static_superpage_on_first_touch() {
    for partial in [false, true] {
        let mut w = world(Policy { reservation: true, superpages: Superpages::Static, partial }, 0.0, 1);
        let f = w.fault(2, 0x123).unwrap();
        let base = w.os.reservation(Asid(2), Vpn(0x123)).unwrap().0;
        assert_eq!(f, base + 3);
        assert_eq!(w.ops, vec![PtOp::Map(Asid(2), Vpn(0x120), Pte { pfn: Pfn(base), size: sp64k(), valid: 0 })]);
        let st = w.os.stats();
        assert_eq!((st.resident_pages, st.frames_in_use, st.superpages, st.promotions), (16, 16, 1, 0));
        // Demotion, then the next fault brings the block back in whole.
        w.unmap(2, 0x12f, 0x12f);
        assert_eq!(w.os.stats().demotions, 1);
        w.fault(2, 0x12f);
        assert_eq!(w.os.stats().superpages, 1);
        w.finish();
    }
}

#[test]
fn reservations_that_always_fail_leave_no_page_properly_placed() {
    let policy = Policy { reservation: true, superpages: Superpages::Promote, partial: true };
    let mut w = World::new(policy, AllocatorKind::Random, 1 << 12, 16, 1.0, 3);
    for v in 0..160 {
        w.fault(1, 0x400 + v);
    }
    let st = w.os.stats();
    assert_eq!((st.reservations, st.reservation_failures), (0, 10));
    assert_eq!((st.placed_pages, st.superpages, st.partial_subblock_ptes), (0, 0, 0));
    assert!(w.pt.maps.values().all(|m| m.pages == 1), "only base PTEs");
    w.finish();
}

/// Which of 400 blocks got a reservation, with a failure probability of one half.
fn half_failing(seed: u64) -> Vec<bool> {
    let policy = Policy { reservation: true, superpages: Superpages::None, partial: false };
    let mut w = World::new(policy, AllocatorKind::Sequential, 1 << 14, 16, 0.5, seed);
    let got: Vec<bool> = (0..400u64)
        .map(|b| {
            w.fault(1, b * 16 + 5);
            w.os.reservation(Asid(1), Vpn(b * 16)).is_some()
        })
        .collect();
    let st = w.os.stats();
    let n = got.iter().filter(|&&r| r).count() as u64;
    assert_eq!((st.reservations, st.reservation_failures), (n, 400 - n));
    assert_eq!(st.placed_pages, n);
    got
}

#[test]
fn half_of_the_reservations_fail_deterministically() {
    let a = half_failing(1);
    let n = a.iter().filter(|&&r| r).count();
    // Binomial(400, 1/2): standard deviation 10.
    assert!((150..=250).contains(&n), "{n} of 400 reservations succeeded");
    assert_eq!(a, half_failing(1), "same seed, same outcome");
    assert_ne!(a, half_failing(2), "another seed, another outcome");
}

#[test]
fn fork_of_a_superpage() {
    let mut w = world(Policy { reservation: true, superpages: Superpages::Promote, partial: false }, 0.0, 1);
    for v in 0x200..0x210 {
        w.fault(1, v);
    }
    let base = w.os.reservation(Asid(1), Vpn(0x200)).unwrap().0;
    w.fork(1, 2);
    assert_eq!(w.ops, vec![PtOp::Map(Asid(2), Vpn(0x200), Pte { pfn: Pfn(base), size: sp64k(), valid: 0 })]);
    let st = w.os.stats();
    assert_eq!((st.frames_in_use, st.live_reservations, st.superpages), (16, 1, 2));
    // The parent leaves: the child still holds the block.
    w.unmap(1, 0, u64::MAX);
    assert_eq!(w.os.stats().frames_in_use, 16);
    // The child demotes its own superpage; its pages stay where they were.
    w.unmap(2, 0x203, 0x203);
    assert_eq!(w.os.stats().demotions, 1);
    assert_eq!(w.os.mapping(Asid(2), Vpn(0x204)), Some(Pte::base(Pfn(base + 4), PageSize::SIZE_4K)));
    w.finish();
}

#[test]
fn after_fork_a_page_taken_by_the_other_process_is_not_placed() {
    let mut w = world(Policy { reservation: true, superpages: Superpages::Promote, partial: true }, 0.0, 1);
    w.fault(1, 0x300);
    w.fork(1, 2);
    let base = w.os.reservation(Asid(2), Vpn(0x300)).unwrap().0;
    assert_eq!(w.fault(1, 0x301), Some(base + 1), "the parent takes the reserved frame");
    let f = w.fault(2, 0x301).unwrap();
    assert_ne!(f, base + 1, "the child cannot share a frame neither had at fork");
    assert!(w.pt.lookup(2, 0x300).unwrap().1.pages == 1, "a block not properly placed uses base PTEs");
    w.finish();
}
