//! Caches end to end: exact access, miss and writeback counts of 1- to 3-level hierarchies against
//! an independent reference on a real trace, page walks through the data caches, and the timing
//! model against its closed form.
//!
//! The reference shares no code with the engine: it parses the lackey text itself, keeps each set
//! as a vector in recency (LRU) or insertion (FIFO) order, and knows the frame mapping from the
//! OS policy written out (the sequential allocator gives frame n to the n-th page touched).

use proptest::prelude::*;
use std::collections::HashMap;
use std::io::Read;
use xlat::config::Config;
use xlat::engine::{self, RunOptions, System};
use xlat::stats::SystemStats;
use xlat::trace::{Kind, ReaderStats, Record, TraceError, TraceReader};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/sort-400.lackey.zst");

/// (kind code: 0 I, 1 L, 2 S, 3 M; address; size) of every reference of the fixture.
fn fixture() -> Vec<(u8, u64, u64)> {
    let mut text = String::new();
    zstd::Decoder::new(std::fs::File::open(FIXTURE).expect("fixture present"))
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    let mut refs = Vec::new();
    for line in text.lines() {
        let kind = match line.get(..2) {
            Some("I ") => 0,
            Some(" L") => 1,
            Some(" S") => 2,
            Some(" M") => 3,
            _ => continue,
        };
        let (addr, size) = line[2..].trim().split_once(',').expect("addr,size");
        refs.push((
            kind,
            u64::from_str_radix(addr.trim_start_matches("0x"), 16).unwrap(),
            size.trim().parse().unwrap(),
        ));
    }
    assert!(refs.len() > 500_000);
    refs
}

fn records(refs: &[(u8, u64, u64)]) -> Vec<Record> {
    refs.iter()
        .map(|&(k, addr, size)| Record::Access { kind: Kind::from_code(k).unwrap(), size: size as u32, addr })
        .collect()
}

struct VecReader(Vec<Record>, usize);

impl TraceReader for VecReader {
    fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, TraceError> {
        out.clear();
        let n = (self.0.len() - self.1).min(max);
        out.extend_from_slice(&self.0[self.1..self.1 + n]);
        self.1 += n;
        Ok(n)
    }
    fn stats(&self) -> ReaderStats {
        ReaderStats::default()
    }
}

fn run(config: &str, records: Vec<Record>) -> SystemStats {
    let c = Config::from_toml(config, "test").unwrap_or_else(|e| panic!("{e}\n{config}"));
    let mut systems = vec![System::new(&c).unwrap()];
    engine::run(&mut VecReader(records, 0), &mut systems, RunOptions::default(), |_| {}).unwrap();
    assert!(systems[0].failure().is_none());
    systems[0].stats()
}

// ---------------------------------------------------------------------------------------------
// The reference.

#[derive(Clone, Copy, PartialEq, Debug)]
enum Idx {
    Phys,
    Virt,
    Vipt,
}

#[derive(Clone, Copy, Debug)]
struct RLine {
    tag: u64,
    va_line: u64,
    pa_line: u64,
    dirty: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct RStats {
    accesses: u64,
    misses: u64,
    read_misses: u64,
    write_misses: u64,
    writebacks: u64,
}

struct RLevel {
    /// 'I', 'D' or 'U'.
    serves: char,
    level: u32,
    line: u64,
    ways: usize,
    fifo: bool,
    write_back: bool,
    idx: Idx,
    sets: Vec<Vec<RLine>>,
    stats: RStats,
}

impl RLevel {
    #[allow(clippy::too_many_arguments)]
    fn new(
        serves: char,
        level: u32,
        size: u64,
        line: u64,
        ways: usize,
        fifo: bool,
        write_back: bool,
        idx: Idx,
    ) -> RLevel {
        let nsets = (size / line) as usize / ways;
        RLevel {
            serves,
            level,
            line,
            ways,
            fifo,
            write_back,
            idx,
            sets: vec![Vec::new(); nsets],
            stats: RStats::default(),
        }
    }

    fn toml(&self, i: usize) -> String {
        format!(
            "[[cache]]\nname = \"C{i}\"\nsize = {}\nline = {}\nways = {}\npolicy = \"{}\"\nserves = \"{}\"\nlevel = {}\nlatency = {}\nwrite = \"{}\"\nindex = \"{}\"\nwalker = false\n",
            self.sets.len() as u64 * self.ways as u64 * self.line,
            self.line,
            self.ways,
            if self.fifo { "fifo" } else { "lru" },
            match self.serves {
                'I' => "instruction",
                'D' => "data",
                _ => "unified",
            },
            self.level,
            self.level * 4,
            if self.write_back { "back" } else { "through" },
            match self.idx {
                Idx::Phys => "physical",
                Idx::Virt => "virtual",
                Idx::Vipt => "vipt",
            }
        )
    }
}

struct RHierarchy {
    levels: Vec<RLevel>,
    mem_reads: u64,
    mem_writes: u64,
}

impl RHierarchy {
    fn path(&self, instruction: bool) -> Vec<usize> {
        let mut p: Vec<usize> = (0..self.levels.len())
            .filter(|&i| self.levels[i].serves == 'U' || self.levels[i].serves == if instruction { 'I' } else { 'D' })
            .collect();
        p.sort_by_key(|&i| self.levels[i].level);
        p
    }

    /// One line access at position `k` of `path`.
    fn go(&mut self, path: &[usize], k: usize, write: bool, from_above: bool, va: u64, pa: u64) {
        if k == path.len() {
            if write {
                self.mem_writes += 1;
            } else {
                self.mem_reads += 1;
            }
            return;
        }
        let i = path[k];
        let (line, nsets, idx, fifo, wb, ways) = {
            let l = &self.levels[i];
            (l.line, l.sets.len() as u64, l.idx, l.fifo, l.write_back, l.ways)
        };
        let (va_line, pa_line) = (va / line, pa / line);
        let (set, tag) = match idx {
            Idx::Phys => (pa_line % nsets, pa_line),
            Idx::Virt => (va_line % nsets, va_line),
            Idx::Vipt => (va_line % nsets, pa_line),
        };
        self.levels[i].stats.accesses += 1;
        let lines = &mut self.levels[i].sets[set as usize];
        if let Some(pos) = lines.iter().position(|l| l.tag == tag) {
            if !fifo {
                let l = lines.remove(pos);
                lines.insert(0, l);
            }
            if write {
                if wb {
                    let p = if fifo { pos } else { 0 };
                    lines[p].dirty = true;
                } else {
                    self.go(path, k + 1, true, true, va, pa);
                }
            }
            return;
        }
        let st = &mut self.levels[i].stats;
        st.misses += 1;
        if write {
            st.write_misses += 1;
        } else {
            st.read_misses += 1;
        }
        if write && !wb {
            self.go(path, k + 1, true, true, va, pa);
            return;
        }
        if !from_above {
            // Read the line from below: each next-level line inside it.
            let next_line = path.get(k + 1).map_or(line, |&n| self.levels[n].line).min(line);
            let mut off = 0;
            while off < line {
                self.go(path, k + 1, false, false, va_line * line + off, pa_line * line + off);
                off += next_line;
            }
        }
        let lines = &mut self.levels[i].sets[set as usize];
        let mut victim = None;
        if lines.len() == ways {
            victim = lines.pop();
        }
        lines.insert(0, RLine { tag, va_line, pa_line, dirty: write && wb });
        if let Some(v) = victim {
            if v.dirty {
                self.levels[i].stats.writebacks += 1;
                let va = if idx == Idx::Virt { v.va_line * line } else { v.pa_line * line };
                self.go(path, k + 1, true, true, va, v.pa_line * line);
            }
        }
    }

    /// Runs the references: frames from the sequential allocator in first-touch order (4 KB
    /// pages), a modify is a load then a store, accesses split at level-1 line boundaries.
    fn run(&mut self, refs: &[(u8, u64, u64)]) {
        let mut frames: HashMap<u64, u64> = HashMap::new();
        let paths = [self.path(true), self.path(false)];
        for &(kind, addr, size) in refs {
            let last = addr + size.max(1) - 1;
            // Pages are touched (faulted in) in ascending order, before any line of the access.
            for page in (addr >> 12)..=(last >> 12) {
                let n = frames.len() as u64;
                frames.entry(page).or_insert(n);
            }
            let path = &paths[(kind != 0) as usize];
            if path.is_empty() {
                continue;
            }
            let l1 = self.levels[path[0]].line;
            let mut a = addr;
            loop {
                let pa = frames[&(a >> 12)] * 4096 + (a & 4095);
                if kind != 2 {
                    self.go(path, 0, false, false, a, pa);
                }
                if kind == 2 || kind == 3 {
                    self.go(path, 0, true, false, a, pa);
                }
                let next = (a / l1 + 1) * l1;
                if next > last {
                    break;
                }
                a = next;
            }
        }
    }
}

const TLB: &str =
    "name = \"t\"\n[[tlb]]\nname = \"L1\"\nentries = 64\n[page_table]\nkind = \"radix\"\n[memory]\nlatency = 90\n";

fn check(name: &str, levels: Vec<RLevel>, refs: &[(u8, u64, u64)], recs: &[Record]) {
    let mut config = TLB.to_string();
    for (i, l) in levels.iter().enumerate() {
        config += &l.toml(i);
    }
    let s = run(&config, recs.to_vec());
    let mut r = RHierarchy { levels, mem_reads: 0, mem_writes: 0 };
    r.run(refs);
    for (i, (l, c)) in r.levels.iter().zip(&s.caches).enumerate() {
        let got = RStats {
            accesses: c.accesses,
            misses: c.misses,
            read_misses: c.read_misses,
            write_misses: c.write_misses,
            writebacks: c.writebacks,
        };
        assert_eq!(got, l.stats, "{name}: level C{i}");
        assert_eq!(c.hits + c.misses, c.accesses, "{name}: C{i}");
        assert!(l.stats.misses > 0, "{name}: C{i} never misses: not a test");
    }
    assert_eq!(s.memory.writes, r.mem_writes, "{name}: memory writes");
    // Walks skip every level (walker = false): their references are memory reads of their own.
    assert_eq!(s.memory.reads, r.mem_reads + s.walks.memory_refs, "{name}: memory reads");
}

#[test]
fn hierarchies_count_exactly_what_the_reference_counts_on_a_real_trace() {
    let refs = fixture();
    let recs = records(&refs);
    use Idx::*;
    let cases: Vec<(&str, Vec<RLevel>)> = vec![
        ("1 level, unified, LRU, write-back", vec![RLevel::new('U', 1, 8192, 64, 4, false, true, Phys)]),
        ("1 level, direct-mapped, FIFO, write-through", vec![RLevel::new('U', 1, 4096, 32, 1, true, false, Phys)]),
        (
            "2 levels: split L1 (FIFO, write-through data) over a unified L2 with larger lines",
            vec![
                RLevel::new('I', 1, 4096, 32, 2, true, true, Phys),
                RLevel::new('D', 1, 4096, 32, 4, false, false, Phys),
                RLevel::new('U', 2, 32768, 64, 8, false, true, Phys),
            ],
        ),
        (
            "3 levels: fully associative L1D, L2 and FIFO L3 of 128-byte lines, perfect I-cache",
            vec![
                RLevel::new('D', 1, 2048, 64, 32, false, true, Phys),
                RLevel::new('D', 2, 16384, 128, 8, false, true, Phys),
                RLevel::new('D', 3, 49152, 128, 6, true, true, Phys),
            ],
        ),
        (
            "virtually indexed and tagged L1 over a physical L2",
            vec![
                RLevel::new('U', 1, 8192, 64, 2, false, true, Virt),
                RLevel::new('U', 2, 65536, 64, 4, true, true, Phys),
            ],
        ),
        (
            "VIPT, direct-mapped, indexed with virtual bits above the page offset",
            vec![RLevel::new('U', 1, 32768, 32, 1, false, true, Vipt)],
        ),
    ];
    for (name, levels) in cases {
        check(name, levels, &refs, &recs);
    }
}

#[test]
fn walks_read_page_table_entries_through_the_data_caches() {
    let refs = fixture();
    let recs = records(&refs);
    let levels = "[[cache]]\nname = \"L1\"\nsize = 8192\nline = 64\nways = 4\nlevel = 1\nwalker = WALK\n\
                  [[cache]]\nname = \"L2\"\nsize = 65536\nline = 64\nways = 8\nlevel = 2\n";
    let off = run(&format!("{TLB}{}", levels.replace("WALK", "false")), recs.clone());
    let on = run(&format!("{TLB}{}", levels.replace("WALK", "true")), recs.clone());
    assert_eq!(on.walks.memory_refs, off.walks.memory_refs, "the same walks");
    assert!(on.walks.memory_refs > 1000);
    // Every walk reference is one more level-1 access; the walker of `off` starts at level 2.
    assert_eq!(on.caches[0].accesses, off.caches[0].accesses + on.walks.memory_refs);
    assert_eq!(on.caches[1].accesses - on.caches[0].misses - on.caches[0].writebacks, 0);
    assert_eq!(
        off.caches[1].accesses,
        off.caches[0].misses + off.caches[0].writebacks + off.walks.memory_refs,
        "L2 sees level-1 fills and writebacks, and the walks"
    );
}

/// Hand-made records: one page loaded three times with a TLB flush between (flush-on-switch).
#[test]
fn walks_that_hit_in_the_cache_cost_its_latency() {
    let config = "name = \"t\"\nasid = \"flush\"\n[[tlb]]\nname = \"L1\"\nentries = 4\n\
                  [page_table]\nkind = \"radix\"\n\
                  [[cache]]\nname = \"L1D\"\nsize = 4096\nline = 64\nways = 64\nlatency = 3\nserves = \"data\"\n\
                  [memory]\nlatency = 70\n[time]\ncpi = 2.0\n";
    let load = Record::Access { kind: Kind::Load, size: 8, addr: 0x1234_5000 };
    let switch = |asid| Record::ContextSwitch { asid };
    let s = run(config, vec![load, switch(1), switch(0), load, switch(1), switch(0), load]);
    // Walk 1 finds no table for the process, reads nothing and faults. Walk 2 (after a flush)
    // reads the 4 levels' entries, none of them cached: 70 cycles each. Walk 3 reads the same 4
    // lines, now cached: 3 cycles each.
    assert_eq!((s.walks.count, s.page_faults, s.walks.memory_refs), (3, 1, 8));
    assert_eq!(s.cycles.walk_memory, 4 * 70 + 4 * 3);
    let t = s.time.expect("timed");
    assert_eq!((t.instructions, t.base, t.icache), (0, 0, 0));
    // The load's line misses once: 70 cycles, 3 of which a level-1 hit would have taken anyway.
    assert_eq!(t.dcache, 70 - 3);
    assert_eq!(t.translation, 4 * 70 + 4 * 3);
    assert_eq!(t.cycles, 67 + 292);
    assert_eq!((s.caches[0].accesses, s.caches[0].misses), (3 + 8, 1 + 4));
}

/// References the OS injects go through the caches at their physical address and count as
/// translation time.
#[test]
fn kernel_references_go_through_the_caches_as_translation_time() {
    let config = "name = \"t\"\n[[tlb]]\nname = \"L1\"\nentries = 4\n[page_table]\nkind = \"radix\"\n\
                  [[cache]]\nname = \"L1\"\nsize = 4096\nline = 64\nways = 4\nlatency = 2\n\
                  [memory]\nlatency = 50\n";
    let mut sys = System::new(&Config::from_toml(config, "t").unwrap()).unwrap();
    assert_eq!(sys.kernel_access(Kind::Load, 0x9000), 50, "a miss reads memory");
    assert_eq!(sys.kernel_access(Kind::Load, 0x9008), 2, "the same line now hits");
    assert_eq!(sys.kernel_access(Kind::Ifetch, 0x9010), 2, "a unified level serves fetches too");
    let s = sys.stats();
    assert_eq!(s.time.unwrap().translation, 54);
    assert_eq!((s.caches[0].accesses, s.caches[0].misses, s.memory.reads), (3, 1, 1));
    let plain = "name = \"t\"\n[[tlb]]\nname = \"L1\"\nentries = 4\n[page_table]\nkind = \"radix\"\n";
    let mut untimed = System::new(&Config::from_toml(plain, "t").unwrap()).unwrap();
    assert_eq!(untimed.kernel_access(Kind::Load, 0x9000), 0);
}

/// A design without caches reports no caches and no time, and counts exactly as before.
#[test]
fn designs_without_caches_are_unchanged() {
    let refs = fixture();
    let recs = records(&refs[..100_000]);
    for preset in ["x86-64", "itanium2", "mips-r3000", "talluri95"] {
        let mut c = Config::preset(preset).unwrap();
        c.cache.clear();
        c.memory = None;
        c.time = None;
        c.page_table.va_bits = c.page_table.va_bits.max(48);
        let mut timed = c.clone();
        timed.time = Some(Default::default());
        timed.cost.cache = None;
        let run_cfg = |c: &Config| {
            let mut systems = vec![System::new(c).unwrap()];
            engine::run(&mut VecReader(recs.clone(), 0), &mut systems, RunOptions::default(), |_| {}).unwrap();
            systems.pop().unwrap()
        };
        let (plain, t) = (run_cfg(&c), run_cfg(&timed));
        let (a, b) = (plain.stats(), t.stats());
        assert!(plain.caches().is_none() && a.time.is_none() && a.caches.is_empty(), "{preset}");
        assert!(b.time.is_some());
        // Timing changes no translation counter.
        assert_eq!(a.tlb, b.tlb, "{preset}");
        assert_eq!(
            (a.walks.count, a.walks.memory_refs, a.page_faults),
            (b.walks.count, b.walks.memory_refs, b.page_faults)
        );
    }
}

proptest! {
    #![proptest_config(crate::proptest_cases(48))]

    /// With a perfect cache (no levels) time has a closed form in the translation counters; and
    /// at every level of any hierarchy, hits + misses == accesses.
    #[test]
    fn time_has_its_closed_form_and_levels_add_up(
        refs in prop::collection::vec((0u8..4, 0u64..64, 0u64..4096, 1u32..16), 1..400),
        cpi in 0.5f64..3.0,
        mem in 1u64..300,
        walker in 0u64..50,
        fault in 0u64..1000,
        l2_latency in 1u64..20,
        policy in prop::sample::select(vec!["lru", "fifo", "random", "nru", "plru"]),
        write in prop::sample::select(vec!["back", "through"]),
    ) {
        let recs: Vec<Record> = refs
            .iter()
            .map(|&(k, page, off, size)| Record::Access { kind: Kind::from_code(k).unwrap(), size, addr: page * 4096 + off })
            .collect();
        let base = format!(
            "name = \"t\"\n[[tlb]]\nname = \"L1\"\nentries = 8\nways = 2\n[[tlb]]\nname = \"L2\"\nentries = 32\nlevel = 2\nlatency = 7\n\
             [page_table]\nkind = \"radix\"\n[cost]\nwalker_cycles = {walker}\npage_fault_cycles = {fault}\n\
             [memory]\nlatency = {mem}\n[time]\ncpi = {cpi}\n"
        );
        let s = run(&base, recs.clone());
        let t = s.time.unwrap();
        let ifetches = refs.iter().filter(|r| r.0 == 0).count() as u64;
        let expect = (ifetches as f64 * cpi).round() as u64
            + s.tlb[1].accesses * 7
            + s.walks.count * walker
            + s.walks.memory_refs * mem
            + s.page_faults * fault;
        prop_assert_eq!(t.cycles, expect);
        prop_assert_eq!((t.icache, t.dcache), (0, 0));
        prop_assert_eq!(s.memory.reads, s.walks.memory_refs);

        let cached = format!(
            "{base}[[cache]]\nname = \"L1\"\nsize = 512\nline = 32\nways = 4\npolicy = \"{policy}\"\nwrite = \"{write}\"\n\
             [[cache]]\nname = \"L2\"\nsize = 2048\nline = 64\nways = 2\nlevel = 2\nlatency = {l2_latency}\n"
        );
        let c = run(&cached, recs);
        for l in &c.caches {
            prop_assert_eq!(l.hits + l.misses, l.accesses);
            prop_assert_eq!(l.read_misses + l.write_misses, l.misses);
        }
        let t = c.time.unwrap();
        prop_assert_eq!(t.cycles, t.base + t.icache + t.dcache + t.translation + t.faults);
        // Each level-1 read miss of a reference (not of a walk) costs at least the L2's latency
        // beyond the level-1 hit.
        prop_assert!(t.icache + t.dcache >= c.caches[0].read_misses.saturating_sub(c.walks.memory_refs) * (l2_latency - 1));
        prop_assert_eq!(c.tlb.clone(), s.tlb.clone());
    }
}
