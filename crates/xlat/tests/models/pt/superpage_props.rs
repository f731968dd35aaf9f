//! Random map / unmap sequences of base, superpage and partial-subblock mappings (non-overlapping,
//! as the `PageTable` contract requires) against a plain `HashMap<(asid, vpn), frame>` reference,
//! for clustered tables and both hashed stores. Sizes are checked against node counts derived
//! here from the live mappings.

use proptest::prelude::*;
use std::collections::{BTreeSet, HashMap};
use xlat::addr::{Asid, PageSize, Pfn, Vpn};
use xlat::pt::{HashFn, Kind, LineAccounting, NoTlb, PageTable, PageTableConfig, Pte, SuperpageStore, WalkRecord};

/// Base pages per page block.
const S: u64 = 16;
/// VPNs generated: 16 page blocks.
const SPACE: u64 = 256;
const ASIDS: u32 = 2;

#[derive(Clone, Debug)]
enum Op {
    /// (asid, vpn, log2 pages, frame seed, valid vector): log2 0 = base page, valid != 0 =
    /// partial-subblock PTE of the block.
    Map(u32, u64, u32, u64, u16),
    Unmap(u32, u64),
    RemoveAsid(u32),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = (0u8..20, 0..ASIDS, 0..SPACE, prop::sample::select(vec![0u32, 0, 1, 2, 4, 6]), 0u64..1000, any::<u16>())
        .prop_map(|(what, asid, vpn, log2, seed, valid)| match what {
            0..=7 => Op::Map(asid, vpn, log2, seed, 0),
            8..=10 => Op::Map(asid, vpn, 4, seed, valid | 1 << (vpn % S)),
            11..=18 => Op::Unmap(asid, vpn),
            _ => Op::RemoveAsid(asid),
        });
    prop::collection::vec(op, 1..120)
}

/// One live mapping of the reference.
#[derive(Clone, Copy, Debug, PartialEq)]
struct M {
    asid: u32,
    start: u64,
    log2: u32,
    first: u64,
    valid: u64,
}

impl M {
    fn covers(&self, asid: u32, vpn: u64) -> bool {
        self.asid == asid && vpn >> self.log2 == self.start >> self.log2
    }
    fn maps(&self, asid: u32, vpn: u64) -> bool {
        self.covers(asid, vpn) && (self.valid == 0 || self.valid >> (vpn - self.start) & 1 == 1)
    }
    fn pte(&self, vpn: u64) -> Pte {
        Pte {
            pfn: Pfn(self.first + vpn - self.start),
            size: PageSize::from_shift(12 + self.log2).unwrap(),
            valid: self.valid,
        }
    }
    fn pages(&self) -> impl Iterator<Item = u64> + '_ {
        (self.start..self.start + (1 << self.log2)).filter(move |&v| self.maps(self.asid, v))
    }
}

struct Reference {
    maps: Vec<M>,
    frames: HashMap<(u32, u64), u64>,
    /// log2 pages of every size ever mapped (hashed `multiple` tables are never dropped).
    sizes: BTreeSet<u32>,
}

impl Reference {
    fn remove(&mut self, i: usize) -> M {
        let m = self.maps.swap_remove(i);
        for v in m.pages() {
            self.frames.remove(&(m.asid, v));
        }
        m
    }
}

fn configs() -> Vec<PageTableConfig> {
    let base = PageTableConfig { buckets: 8, ..Default::default() };
    vec![
        PageTableConfig { kind: Kind::Clustered, ..base.clone() },
        PageTableConfig {
            kind: Kind::Clustered,
            buckets: 3,
            hash: HashFn::Mult,
            accounting: LineAccounting::Layout,
            ..base.clone()
        },
        PageTableConfig { kind: Kind::Hashed, ..base.clone() },
        PageTableConfig { kind: Kind::Hashed, search_order: vec![65536, 4096], buckets: 5, ..base.clone() },
        PageTableConfig { kind: Kind::Hashed, superpage_store: Some(SuperpageStore::SuperpageIndex), ..base.clone() },
        PageTableConfig {
            kind: Kind::Hashed,
            superpage_store: Some(SuperpageStore::SuperpageIndex),
            index_page: Some(16384),
            hash: HashFn::Mult,
            ..base
        },
    ]
}

/// (table bytes, objects, bucket bytes) the table should have for the live mappings.
fn expected_size(cfg: &PageTableConfig, r: &Reference) -> (u64, u64, u64) {
    match cfg.kind {
        Kind::Clustered => {
            // Nodes per (asid, block, kind): base node (log2 0), SZ node per smaller size, or the
            // S node (block superpage, partial-subblock, or one copy per block of a larger one).
            let mut nodes = BTreeSet::new();
            for m in &r.maps {
                if m.valid != 0 || m.log2 >= 4 {
                    for b in 0..(1u64 << m.log2).div_ceil(S) {
                        nodes.insert((m.asid, m.start / S + b, 4));
                    }
                } else {
                    nodes.insert((m.asid, m.start / S, m.log2));
                }
            }
            let bytes = nodes.iter().map(|&(_, _, l)| if l == 4 { 24 } else { 16 + 8 * (S >> l) }).sum();
            (bytes, nodes.len() as u64, cfg.buckets * 8)
        }
        _ => {
            let n = r.maps.len() as u64;
            let tables = if cfg.superpage_store == Some(SuperpageStore::SuperpageIndex) {
                let ishift = cfg.index_page.unwrap_or(65536).trailing_zeros() - 12;
                1 + r.sizes.iter().filter(|&&l| l > ishift).count() as u64
            } else {
                r.sizes.iter().chain([0].iter()).collect::<BTreeSet<_>>().len() as u64
            };
            (24 * n, n, tables * cfg.buckets * 8)
        }
    }
}

fn check(pt: &mut PageTable, cfg: &PageTableConfig, r: &Reference, block: u64) -> Result<(), TestCaseError> {
    for asid in 0..ASIDS {
        for vpn in 0..SPACE + 32 {
            let want = r.frames.get(&(asid, vpn)).copied();
            let got = pt.get(Asid(asid), Vpn(vpn));
            prop_assert_eq!(got.map(|p| p.pfn.0), want, "get {} {:#x}", asid, vpn);
            if let Some(p) = got {
                let m = r.maps.iter().find(|m| m.maps(asid, vpn)).unwrap();
                prop_assert_eq!(p, m.pte(vpn));
            }
            let mut rec = WalkRecord::default();
            prop_assert_eq!(pt.walk(Asid(asid), Vpn(vpn), &mut NoTlb, &mut rec), got);
            prop_assert!(rec.mem_refs >= 1);
        }
        let mut out = [None; S as usize];
        let mut rec = WalkRecord::default();
        pt.walk_block(Asid(asid), Vpn(block * S + 3), &mut NoTlb, &mut rec, &mut out);
        for (i, o) in out.iter().enumerate() {
            prop_assert_eq!(*o, pt.get(Asid(asid), Vpn(block * S + i as u64)), "walk_block page {}", i);
        }
    }
    let (bytes, objects, buckets) = expected_size(cfg, r);
    let size = pt.size();
    prop_assert_eq!((size.table_bytes, size.objects, size.bucket_bytes), (bytes, objects, buckets));
    Ok(())
}

fn run(cfg: &PageTableConfig, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut pt = PageTable::new(cfg, PageSize::SIZE_4K).unwrap();
    let mut r = Reference { maps: Vec::new(), frames: HashMap::new(), sizes: BTreeSet::new() };
    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Map(asid, vpn, log2, seed, valid) => {
                let start = vpn & !((1 << log2) - 1);
                let first = (seed << 6) + (1 << 20);
                let m = M { asid, start, log2, first, valid: valid as u64 };
                // Overlapping mappings: a superpage / partial-subblock PTE of the same place and
                // size is replaced by `map` itself; others are unmapped first, as the OS does.
                let mut i = 0;
                while i < r.maps.len() {
                    let o = r.maps[i];
                    let overlap = o.asid == asid && o.start < start + (1 << log2) && start < o.start + (1 << o.log2);
                    if !overlap {
                        i += 1;
                    } else if o.start == start && o.log2 == log2 && log2 > 0 {
                        r.remove(i);
                    } else {
                        let v = o.pages().next().unwrap();
                        let got = pt.unmap(Asid(asid), Vpn(v));
                        prop_assert_eq!(got, Some(o.pte(v)), "step {}: unmap overlap", step);
                        r.remove(i);
                    }
                }
                pt.map(Asid(asid), Vpn(vpn), m.pte(vpn));
                for v in m.pages() {
                    r.frames.insert((asid, v), m.first + v - start);
                }
                r.maps.push(m);
                r.sizes.insert(log2);
            }
            Op::Unmap(asid, vpn) => {
                let want = r.maps.iter().position(|m| m.maps(asid, vpn));
                let got = pt.unmap(Asid(asid), Vpn(vpn));
                match want {
                    Some(i) => {
                        let m = r.remove(i);
                        prop_assert_eq!(got, Some(m.pte(vpn)), "step {}", step);
                    }
                    None => prop_assert_eq!(got, None, "step {}", step),
                }
            }
            Op::RemoveAsid(asid) => {
                pt.remove_asid(Asid(asid));
                while let Some(i) = r.maps.iter().position(|m| m.asid == asid) {
                    r.remove(i);
                }
            }
        }
        check(&mut pt, cfg, &r, (step as u64) % (SPACE / S))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(crate::proptest_cases(48))]

    #[test]
    fn superpage_tables_agree_with_a_reference_map(ops in ops()) {
        for cfg in configs() {
            run(&cfg, &ops)?;
        }
    }
}
