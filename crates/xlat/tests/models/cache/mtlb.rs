//! The memory controller's TLB (swanson98 §2.2), checked request for request against a
//! reference written here: per-set LRU queues over shadow page indexes, a table of real frames,
//! referenced bits from fills and dirty bits from writebacks.

use std::collections::{HashMap, VecDeque};
use xlat::mtlb::{Mtlb, MtlbConfig};
use xlat::tlb::Policy;

const DRAM: u64 = 1 << 30;
const PAGE: u64 = 4096;

struct Reference {
    sets: Vec<VecDeque<u64>>,
    ways: usize,
    table: HashMap<u64, u64>,
    hits: u64,
    misses: u64,
    referenced: std::collections::HashSet<u64>,
    dirty: std::collections::HashSet<u64>,
}

impl Reference {
    /// The real address of `pa`, and whether the table was read.
    fn access(&mut self, write: bool, pa: u64) -> (Option<u64>, bool) {
        if pa < DRAM {
            return (Some(pa), false);
        }
        let i = pa / PAGE - DRAM / PAGE;
        if write {
            self.dirty.insert(i);
        } else {
            self.referenced.insert(i);
        }
        let n = self.sets.len() as u64;
        let set = &mut self.sets[(i % n) as usize];
        if let Some(p) = set.iter().position(|&x| x == i) {
            set.remove(p);
            set.push_back(i);
            self.hits += 1;
            return (Some(self.table[&i] * PAGE + pa % PAGE), false);
        }
        self.misses += 1;
        let Some(&real) = self.table.get(&i) else {
            return (None, true);
        };
        if set.len() == self.ways {
            set.pop_front();
        }
        set.push_back(i);
        (Some(real * PAGE + pa % PAGE), true)
    }

    fn map(&mut self, i: u64, real: Option<u64>) {
        match real {
            Some(r) => self.table.insert(i, r),
            None => self.table.remove(&i),
        };
        for s in &mut self.sets {
            s.retain(|&x| x != i);
        }
    }
}

#[test]
fn the_mtlb_retranslates_shadow_addresses_as_the_reference_does() {
    for (entries, ways) in [(128u32, 2u32), (16, 4), (8, 8), (64, 1)] {
        let cfg = MtlbConfig { entries, ways, policy: Policy::Lru, ..MtlbConfig::default() };
        let mut m = Mtlb::new(&cfg, DRAM, 32, PAGE).unwrap();
        let (base, pages) = m.shadow_frames();
        assert_eq!((base, pages), (DRAM / PAGE, (3 << 30) / PAGE));
        let mut r = Reference {
            sets: vec![VecDeque::new(); (entries / ways) as usize],
            ways: ways as usize,
            table: HashMap::new(),
            hits: 0,
            misses: 0,
            referenced: Default::default(),
            dirty: Default::default(),
        };
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // 600 shadow pages (beyond the MTLB's reach), mapped to scattered real frames.
        for i in 0..600 {
            let real = (i * 7919 + 13) % (DRAM / PAGE);
            m.map(base + i, Some(real));
            r.map(i, Some(real));
        }
        for _ in 0..50_000 {
            let v = next();
            match v % 50 {
                0 => {
                    // The OS remaps (or unmaps) a page.
                    let (i, real) = ((v >> 8) % 600, (v >> 20) % (DRAM / PAGE));
                    let real = (v % 7 != 0).then_some(real);
                    m.map(base + i, real);
                    r.map(i, real);
                }
                1..=5 => {
                    let pa = (v >> 8) % DRAM;
                    assert_eq!(m.access(v % 2 == 0, pa).dram, Some(pa), "DRAM addresses pass unchanged");
                }
                _ => {
                    // Skewed over the shadow pages: a hot set and a long tail.
                    let i = if v % 3 == 0 { (v >> 8) % 600 } else { (v >> 8) % 40 };
                    let pa = DRAM + i * PAGE + (v >> 40) % PAGE;
                    let write = v % 5 == 0;
                    let got = m.access(write, pa);
                    let (want, read) = r.access(write, pa);
                    assert_eq!(got.dram, want, "entries {entries} ways {ways}: page {i}");
                    assert_eq!(got.table_read.is_some(), read);
                    if read {
                        assert_eq!(got.table_read, Some(DRAM - pages * 4 + 4 * i), "the table sits at the top of DRAM");
                    }
                    assert_eq!(got.cycles, 1);
                }
            }
        }
        let s = m.stats();
        assert_eq!((s.hits, s.misses), (r.hits, r.misses), "entries {entries} ways {ways}");
        assert_eq!(s.lookups, s.hits + s.misses);
        assert!(s.hits > 0 && s.misses > 0 && s.unmapped > 0);
        assert_eq!(m.marked_pages(), (r.referenced.len() as u64, r.dirty.len() as u64));
        for i in 0..600 {
            assert_eq!(m.bits(base + i), (r.referenced.contains(&i), r.dirty.contains(&i)));
        }
    }
}

#[test]
fn impossible_shadow_spaces_name_their_key() {
    let err = |dram: u64, bits: u32, cfg: MtlbConfig| Mtlb::new(&cfg, dram, bits, PAGE).err().unwrap().to_string();
    let d = MtlbConfig::default;
    assert!(err(1 << 32, 32, d()).contains("memory.dram_bytes"));
    assert!(err(DRAM + 1, 32, d()).contains("memory.dram_bytes"));
    assert!(err(DRAM, 60, d()).contains("memory.pa_bits"));
    assert!(err(DRAM, 32, MtlbConfig { ways: 3, ..d() }).contains("mtlb.ways"));
    assert!(err(DRAM, 32, MtlbConfig { table_base: Some(DRAM - 8), ..d() }).contains("mtlb.table_base"));
}

#[test]
fn a_design_with_an_mtlb_passes_every_memory_request_through_it() {
    use xlat::config::Config;
    use xlat::engine::System;
    use xlat::trace::{Kind, Record};
    let base = "name='m'\n[[tlb]]\nname='T'\nentries=64\n[page_table]\nkind='radix'\n\
                [[cache]]\nname='D'\nsize=4096\nline=32\nways=1\nserves='unified'\nlevel=1\nlatency=1\n";
    let with = format!(
        "{base}[memory]\nlatency=60\ndram_bytes=1073741824\npa_bits=32\n[mtlb]\nentries=128\nways=2\n[os]\nmemory_bytes=1056964608\n"
    );
    let recs: Vec<Record> = (0..20_000u64)
        .map(|i| Record::Access {
            kind: if i % 3 == 0 { Kind::Store } else { Kind::Load },
            size: 8,
            addr: (i * 4104) % (1 << 22),
        })
        .collect();
    let run = |text: &str| {
        let mut s = System::new(&Config::from_toml(text, "m.toml").unwrap()).unwrap();
        s.process(&recs).unwrap();
        s
    };
    let (plain, mtlb) = (run(&format!("{base}[memory]\nlatency=60\n")), run(&with));
    let (p, m) = (plain.stats(), mtlb.stats());
    // The OS gives real frames only: every request passes the controller, none is a shadow one.
    let h = mtlb.caches().unwrap().mtlb().unwrap().stats();
    assert_eq!(h.requests, m.memory.reads + m.memory.writes);
    assert!(h.requests > 1000 && h.lookups == 0);
    assert_eq!(p.memory.reads, m.memory.reads);
    // ... and pays the controller's cycle.
    let (tp, tm) = (p.time.unwrap().cycles, m.time.unwrap().cycles);
    assert!(tm > tp && tm - tp <= h.requests, "{tp} {tm} {}", h.requests);
    let json = xlat::report::design_json(&mtlb);
    assert_eq!(json["mtlb"]["requests"], h.requests);
    assert_eq!(json["mtlb"]["policy"], "nru");
    // Without DRAM size or caches there is nothing to retranslate: the config is refused.
    let err = |t: &str| Config::from_toml(t, "m.toml").unwrap_err().to_string();
    assert!(err(&format!("{base}[mtlb]\nentries=128\n")).contains("memory.dram_bytes"));
    assert!(err("name='m'\n[[tlb]]\nname='T'\nentries=64\n[page_table]\nkind='radix'\n[mtlb]\nentries=128\n")
        .contains("mtlb"));
}
