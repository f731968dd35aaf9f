//! The Mach 3.0 personality (bala94): miss types and cascades of Mach's page-table hierarchy,
//! the partitioned R3000 TLB and the STLB, checked count for count against a reference model
//! written here from the paper's Figure 1 and §2-4 (queues and a hash set, nothing of the
//! engine's); the IPC path and the PTLB checked for what they must do; a property test that no
//! TLB or STLB entry ever translates differently from the page tables.

use std::collections::{HashMap, HashSet, VecDeque};

use proptest::prelude::*;
use xlat::config::Config;
use xlat::engine::System;
use xlat::trace::{fd_kind, Kind, Record};

const GLOBAL: u32 = u32::MAX;

fn design(stlb: Option<u32>, ptlb: bool, extra: &str) -> Config {
    checked_design(stlb, ptlb, extra).unwrap()
}

fn checked_design(stlb: Option<u32>, ptlb: bool, extra: &str) -> Result<Config, xlat::config::ConfigError> {
    let stlb = stlb.map(|n| format!("[stlb]\nentries = {n}\nways = 1\n")).unwrap_or_default();
    let ptlb = if ptlb { "[ptlb]\nentries = 4096\n" } else { "" };
    let text = format!(
        r#"
name = "mach3-test"
page_size = 4096
[[tlb]]
name = "TLB"
entries = 64
reserved = 8
reserved_policy = "fifo"
policy = "fifo"
[page_table]
kind = "linear"
va_bits = 32
pte_bytes = 4
bits_per_level = 10
[os]
personality = "mach3"
memory_bytes = 1073741824
[layout]
kind = "identity"
{stlb}{ptlb}{extra}"#
    );
    Config::from_toml(&text, "mach3-test.toml")
}

/// A FIFO TLB partition: (tag, page) in insertion order.
struct Queue {
    cap: usize,
    q: VecDeque<(u32, u64)>,
}

impl Queue {
    fn has(&self, tag: u32, page: u64) -> bool {
        self.q.contains(&(tag, page))
    }
    fn push(&mut self, tag: u32, page: u64) -> Option<(u32, u64)> {
        let out = if self.q.len() == self.cap { self.q.pop_front() } else { None };
        self.q.push_back((tag, page));
        out
    }
}

/// bala94's machine as the paper describes it: user page tables of 2 MB per task from
/// 0xC0400000, the kernel page table over kseg2 at 0xC0000000, kernel data from 0xE0000000;
/// L1U, L1K and L3 entries in the upper 56 TLB entries, L2 entries in the lower 8; Table 1
/// and Table 5 costs.
struct Reference {
    upper: Queue,
    lower: Queue,
    stlb: Option<Vec<Option<u64>>>,
    slots: HashMap<u32, u32>,
    resident: HashSet<(u32, u64)>,
    /// Allocated pages of the user page tables (their L2 PTEs are valid).
    tables: HashSet<u64>,
    /// Cycles the STLB's code adds to page faults (§4.1: 11 per trap it does not serve).
    overhead: u64,
    /// l1u, l1k, l2, l3, invalid.
    misses: [u64; 5],
    nested: u64,
    stlb_lookups: u64,
    stlb_hits: u64,
    cycles: u64,
}

impl Reference {
    fn new(stlb: Option<u32>) -> Reference {
        Reference {
            upper: Queue { cap: 56, q: VecDeque::new() },
            lower: Queue { cap: 8, q: VecDeque::new() },
            stlb: stlb.map(|n| vec![None; n as usize]),
            slots: HashMap::new(),
            resident: HashSet::new(),
            tables: HashSet::new(),
            overhead: 0,
            misses: [0; 5],
            nested: 0,
            stlb_lookups: 0,
            stlb_hits: 0,
            cycles: 0,
        }
    }

    fn user(&mut self, asid: u32, page: u64) {
        if self.upper.has(asid, page) {
            return;
        }
        self.misses[0] += 1;
        self.cycles += 10;
        let n = self.slots.len() as u32;
        let slot = *self.slots.entry(asid).or_insert(n) as u64;
        let pte = 0xC040_0000 + slot * 0x20_0000 + page * 4;
        // A page of the user page table not allocated yet: the L2 miss finds no valid L2 PTE
        // and enters nothing; the fault allocates it.
        let fresh = self.tables.insert(pte >> 12);
        self.kernel(pte >> 12, false, false, fresh);
        if self.resident.insert((asid, page)) {
            self.misses[4] += 1;
            self.cycles += 338;
            if self.stlb.is_some() {
                self.overhead += 11;
            }
            // The VM system stores the new page-table page's L2 PTE, then the page's PTE.
            if fresh {
                let l2 = 0xC000_0000 + ((pte >> 12) - 0xC0000) * 4;
                self.kernel(l2 >> 12, false, true, false);
            }
            self.kernel(pte >> 12, false, true, false);
        }
        if let Some(e) = self.upper.push(asid, page) {
            self.evicted(e);
        }
    }

    fn evicted(&mut self, (tag, page): (u32, u64)) {
        if let (GLOBAL, Some(s)) = (tag, &mut self.stlb) {
            let n = s.len() as u64;
            s[(page % n) as usize] = Some(page);
        }
    }

    /// A kernel miss on `page` (`kmode`: taken in the kernel, not from the L1U handler;
    /// `absent`: its PTE is not valid, nothing is entered).
    fn kernel(&mut self, page: u64, nested: bool, kmode: bool, absent: bool) {
        let va = page << 12;
        let (kind, l2) = if va < 0xC040_0000 {
            (3, false)
        } else if va < 0xE000_0000 {
            (2, true)
        } else {
            (1, false)
        };
        let has = if l2 { self.lower.has(GLOBAL, page) } else { self.upper.has(GLOBAL, page) };
        if has {
            return;
        }
        self.misses[kind] += 1;
        self.nested += nested as u64;
        let mut hit = false;
        if let Some(s) = &self.stlb {
            self.stlb_lookups += 1;
            if s[(page % s.len() as u64) as usize] == Some(page) {
                self.stlb_hits += 1;
                // Table 5: L2 hits from user space 114, in the kernel 160, L1K and L3 105.
                self.cycles += if kind != 2 {
                    105
                } else if kmode {
                    160
                } else {
                    114
                };
                hit = true;
            } else {
                self.cycles += 70;
            }
        }
        if !hit {
            self.cycles += [0, 512, 555, 407][kind];
            if kind != 3 {
                let pte = 0xC000_0000 + (page - 0xC0000) * 4;
                self.kernel(pte >> 12, true, kmode, false);
            }
        }
        if absent {
            return;
        }
        let out = if l2 { self.lower.push(GLOBAL, page) } else { self.upper.push(GLOBAL, page) };
        if let Some(e) = out {
            self.evicted(e);
        }
    }
}

/// A deterministic multi-process reference stream over a wide 2 GB space: runs of nearby pages
/// and jumps, so that user page-table pages (L2) and kernel page-table pages (L3) miss too.
fn stream(seed: u64, n: usize, procs: u32) -> Vec<(u32, u64)> {
    let mut x = seed | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::with_capacity(n);
    let mut page = vec![0x10u64; procs as usize];
    for _ in 0..n {
        let p = (next() % procs as u64) as usize;
        let r = next();
        page[p] = match r % 8 {
            0 => (r >> 8) % 0x7_ff00 + 0x10,
            1..=4 => (page[p] + (r >> 8) % 4) % 0x7_fff0 + 1,
            _ => page[p],
        };
        out.push((p as u32 + 1, page[p]));
    }
    out
}

fn records(s: &[(u32, u64)]) -> Vec<Record> {
    let mut out = Vec::new();
    let mut cur = 0;
    for &(asid, page) in s {
        if asid != cur {
            out.push(Record::Process { asid });
            cur = asid;
        }
        out.push(Record::Access { kind: Kind::Load, size: 4, addr: (page << 12) | 0x10 });
    }
    out
}

fn check_against_reference(stlb: Option<u32>, seed: u64) {
    let s = stream(seed, 40_000, 5);
    let mut sys = System::new(&design(stlb, false, "")).unwrap();
    sys.process(&records(&s)).unwrap();
    let mut r = Reference::new(stlb);
    for &(asid, page) in &s {
        r.user(asid, page);
    }
    let m = sys.mach_stats().unwrap();
    assert_eq!([m.l1u, m.l1k, m.l2, m.l3, m.invalid], r.misses, "misses by type, stlb {stlb:?}");
    assert_eq!(m.nested, r.nested, "nested misses");
    assert!(r.misses[2] > 100 && r.misses[3] > 10, "the stream exercises the cascade: {:?}", r.misses);
    if stlb.is_some() {
        assert_eq!(sys.stlb_stats(), Some((r.stlb_lookups, r.stlb_hits)));
        assert!(r.stlb_hits > 0);
    }
    assert_eq!(m.miss_cycles, r.cycles, "Table 1 and Table 5 cycles");
    assert_eq!(m.stlb_overhead_cycles, r.overhead, "§4.1: 11 cycles per page fault with an STLB");
    assert_eq!(sys.stats().cycles.refill_overhead, r.cycles + r.overhead);
    sys.check_translations().unwrap();
}

/// Worked by hand (bala94 Figure 1's addresses, FIFO partitions): task 1's first touch of user
/// page 0x10 takes an L1U miss, an L2 miss on its page-table page (0xC0400, not allocated: the
/// handler loads the L2 PTE from kernel page-table page 0xC0001, an L3 miss nested in it, and
/// enters nothing), and a TLB-invalid miss; the fault stores the L2 PTE (page 0xC0001: a hit)
/// and the page's PTE (page 0xC0400: one L2 miss, in the kernel). Page 0x11 then misses only
/// L1U and TLB-invalid. A fork copies both PTEs into task 2's table (slot 1, page 0xC0600,
/// whose L2 PTE is on page 0xC0001 too): one kernel L2 miss. Task 3's (slot 2, page 0xC0800)
/// has its L2 PTE on page 0xC0002: an L3 miss outside any handler (not nested), then an L2
/// miss.
#[test]
fn the_kernel_writing_ptes_takes_kernel_l2_and_non_nested_l3_misses() {
    let load = |page: u64| Record::Access { kind: Kind::Load, size: 4, addr: page << 12 };
    let mut sys = System::new(&design(None, false, "")).unwrap();
    sys.process(&[Record::Process { asid: 1 }, load(0x10)]).unwrap();
    let m = sys.mach_stats().unwrap();
    assert_eq!([m.l1u, m.l1k, m.l2, m.l3, m.invalid], [1, 0, 2, 1, 1]);
    assert_eq!(m.nested, 1);
    assert_eq!(m.by_depth, [2, 1, 1, 0], "the L1U and the kernel's L2 miss at depth 0");
    assert_eq!(m.pte_writes, 2);
    assert_eq!(m.miss_cycles, 10 + 555 + 407 + 338 + 555);
    sys.process(&[load(0x11)]).unwrap();
    let m = sys.mach_stats().unwrap();
    assert_eq!([m.l1u, m.l1k, m.l2, m.l3, m.invalid], [2, 0, 2, 1, 2]);
    assert_eq!(m.pte_writes, 3);
    sys.process(&[Record::Fork { child: 2 }, Record::Fork { child: 3 }]).unwrap();
    let m = sys.mach_stats().unwrap();
    assert_eq!([m.l1u, m.l1k, m.l2, m.l3, m.invalid], [2, 0, 4, 2, 2]);
    assert_eq!(m.nested, 1, "the kernel's own L3 miss is not nested");
    assert_eq!(m.pte_writes, 9);
    assert_eq!(m.references, 0, "PTE stores are apart from the kernel's references");
    sys.check_translations().unwrap();
}

/// §4.1: with an STLB, a system call and an IPC trap cost 4 cycles more each, a page fault
/// (another trap through the generic handler) 11; without one, nothing.
#[test]
fn the_stlb_taxes_system_calls_4_and_other_traps_11_cycles() {
    let recs = [
        Record::Process { asid: 1 },
        Record::Access { kind: Kind::Load, size: 4, addr: 0x1_0000 },
        Record::Syscall { nr: 39, fd: 0, object: 0, buf: 0, len: 0 },
        Record::Ipc { to: 2 },
    ];
    let run = |stlb, extra: &str| {
        let mut sys = System::new(&design(stlb, false, extra)).unwrap();
        sys.process(&recs).unwrap();
        let m = sys.mach_stats().unwrap();
        assert_eq!(sys.stats().cycles.refill_overhead, m.miss_cycles + m.stlb_overhead_cycles);
        m.stlb_overhead_cycles
    };
    assert_eq!(run(None, ""), 0);
    assert_eq!(run(Some(4096), ""), 4 + 4 + 11);
    assert_eq!(run(Some(1024), "[mach3]\nstlb_syscall_cycles = 7\nstlb_trap_cycles = 0\n"), 7 + 7);
}

#[test]
fn miss_types_and_cascades_match_the_reference() {
    check_against_reference(None, 7);
    check_against_reference(None, 99);
}

#[test]
fn stlb_hits_and_cascades_match_the_reference() {
    check_against_reference(Some(1024), 7);
    check_against_reference(Some(4096), 99);
    check_against_reference(Some(64), 3);
}

#[test]
fn a_larger_stlb_removes_nested_misses() {
    let s = records(&stream(11, 60_000, 8));
    let run = |stlb| {
        let mut sys = System::new(&design(stlb, false, "")).unwrap();
        sys.process(&s).unwrap();
        sys.mach_stats().unwrap()
    };
    let (mach, dm4k) = (run(None), run(Some(4096)));
    assert!(mach.nested > 0);
    assert!(dm4k.nested < mach.nested, "nested: mach {} dm4k {}", mach.nested, dm4k.nested);
    assert!(dm4k.l1k + dm4k.l2 + dm4k.l3 < mach.l1k + mach.l2 + mach.l3);
}

/// Two tasks ping-ponging messages through a pipe, as the tracer records them.
fn ping_pong(rounds: u32, len: u64) -> Vec<Record> {
    let mut out = Vec::new();
    let pipe = fd_kind::PIPE;
    for i in 0..rounds {
        for (me, other) in [(1u32, 2u32), (2, 1)] {
            out.push(Record::ContextSwitch { asid: me });
            // Some work of its own over a spread of pages.
            for k in 0..40u64 {
                let page = 0x100 + (me as u64) * 0x4000 + (k * 97 + i as u64) % 600;
                out.push(Record::Access { kind: Kind::Load, size: 4, addr: page << 12 });
                out.push(Record::Access { kind: Kind::Ifetch, size: 4, addr: (0x10 + k % 8) << 12 });
            }
            out.push(Record::Syscall {
                nr: 0,
                fd: pipe | fd_kind::INTO_BUF,
                object: 1,
                buf: 0x7000_0000 + 0x1000 * me as u64,
                len,
            });
            out.push(Record::Syscall {
                nr: 1,
                fd: pipe | fd_kind::FROM_BUF,
                object: 2,
                buf: 0x6000_0000 + 0x1000 * me as u64,
                len,
            });
            out.push(Record::Ipc { to: other });
        }
    }
    out
}

#[test]
fn ipc_makes_kernel_references_and_the_ptlb_prefetches_them() {
    let recs = ping_pong(300, 256);
    let run = |stlb, ptlb| {
        let mut sys = System::new(&design(stlb, ptlb, "")).unwrap();
        sys.process(&recs).unwrap();
        sys.check_translations().unwrap();
        sys.mach_stats().unwrap()
    };
    let mach = run(None, false);
    let ptlb = run(None, true);
    let both = run(Some(4096), true);
    assert_eq!(mach.ipc, 600);
    assert_eq!(mach.syscalls, 1200);
    // The kernel's references depend on the trace, not on the TLB.
    assert_eq!(mach.references, ptlb.references);
    assert!(mach.references > 600 * 256 / 16);
    assert!(mach.l1k > 0, "IPC structures miss in the TLB: {mach:?}");
    assert!(ptlb.ptlb_prefetches > 0 && ptlb.ptlb_useful > 0, "{ptlb:?}");
    assert!(ptlb.ptlb_useful <= ptlb.ptlb_prefetches);
    let kernel = |m: &xlat::os::mach3::Mach3Stats| m.l1k + m.l2 + m.l3;
    assert!(kernel(&ptlb) < kernel(&mach), "prefetching removes kernel misses: {} vs {}", kernel(&ptlb), kernel(&mach));
    // With the STLB, L3 entries are not prefetched (bala94 §5).
    assert!(both.ptlb_prefetches + both.ptlb_present > 0);
    assert!(kernel(&both) <= kernel(&ptlb));
    // Without IPC or system calls, the personality adds no references.
    let quiet: Vec<Record> =
        recs.iter().filter(|r| matches!(r, Record::Access { .. } | Record::Process { .. })).cloned().collect();
    let mut sys = System::new(&design(None, true, "")).unwrap();
    sys.process(&quiet).unwrap();
    assert_eq!(sys.mach_stats().unwrap().references, 0);
}

#[test]
fn trap_model_projects_costs_to_a_faster_clock() {
    let recs = ping_pong(50, 64);
    let cycles = |extra: &str| {
        let mut sys = System::new(&design(None, false, extra)).unwrap();
        sys.process(&recs).unwrap();
        let m = sys.mach_stats().unwrap();
        (m, m.miss_cycles)
    };
    let (m40, c40) = cycles("[mach3]\ncost_model = \"trap\"\n");
    let (m200, c200) = cycles("[mach3]\ncost_model = \"trap\"\nclock_ratio = 5.0\n");
    assert_eq!(m40.l1k, m200.l1k);
    // §6.2: each kernel miss grows by (m x 24 x (5 - 1)) cycles.
    let grow = m40.l1k * 14 * 96 + m40.l2 * 14 * 96 + m40.l3 * 10 * 96;
    assert_eq!(c200 - c40, grow);
}

#[test]
fn cache_model_measures_the_handlers_misses() {
    // Loads only (no user instruction fetches), fully associative caches large enough never to
    // evict: the
    // instruction cache sees nothing but the handlers' code, and each of its lines misses once;
    // the data cache's misses beyond the user's distinct lines are the handlers' loads.
    let s = stream(5, 20_000, 4);
    let recs = records(&s);
    let caches = "[[cache]]\nname='L1I'\nsize=65536\nline=16\nways=4096\nserves='instruction'\nlevel=1\nlatency=1\n\
                  [[cache]]\nname='L1D'\nsize=1048576\nline=16\nways=65536\nserves='data'\nlevel=1\nlatency=1\n\
                  [memory]\nlatency=24\n";
    let run = |ratio: f64| {
        let extra = format!("[mach3]\ncost_model = \"cache\"\nclock_ratio = {ratio}\n{caches}");
        let mut sys = System::new(&design(None, false, &extra)).unwrap();
        sys.process(&recs).unwrap();
        sys.check_translations().unwrap();
        (sys.mach_stats().unwrap(), sys.stats())
    };
    let user_lines = s.iter().map(|&(a, p)| (a, p)).collect::<HashSet<_>>().len() as u64;
    for ratio in [1.0, 5.0] {
        let (m, st) = run(ratio);
        assert!(m.l1k + m.l3 > 0 && m.l2 > 0, "every generic path runs: {m:?}");
        let t = (24.0 * ratio) as u64;
        // Straight-line paths from the vectors, 4-byte instructions, 16-byte lines: the
        // longest generic path (L2, 207 instructions from the general vector at +0x80) covers
        // 52 lines, the fast handler (9 from the UTLB vector at +0) 3 others.
        let (i_misses, d_misses) = (st.caches[0].misses, st.caches[1].misses);
        assert_eq!(i_misses, 52 + 3, "{:?}", st.caches);
        let handler_loads = d_misses - user_lines;
        // §6.2: i per path, plus m x t with m measured; L1U: Table 1's 10 plus its misses.
        let i = m.l1u * 10 + m.l1k * 167 + m.l2 * 207 + m.l3 * 161 + m.invalid * 338;
        assert_eq!(
            m.miss_cycles,
            i + t * (i_misses + handler_loads),
            "ratio {ratio}: {m:?} {:?} {user_lines} {:?}",
            st.caches,
            st.walks
        );
    }
    // Without caches there is nothing to measure: the config is refused.
    let err = checked_design(None, false, "[mach3]\ncost_model = \"cache\"\n").unwrap_err().to_string();
    assert!(err.contains("mach3.cost_model") && err.contains("[[cache]]"), "{err}");
}

#[test]
fn designs_mach3_cannot_simulate_name_the_key() {
    let bad = |text: &str| match Config::from_toml(text, "x.toml") {
        Ok(c) => System::new(&c).err().map(|e| e.to_string()).unwrap_or_default(),
        Err(e) => e.to_string(),
    };
    let base = "name='x'\n[[tlb]]\nname='T'\nentries=64\nreserved=8\n[page_table]\nkind='linear'\nva_bits=32\npte_bytes=4\nbits_per_level=10\n";
    assert!(
        bad(&format!("{base}[os]\npersonality='mach3'\n[layout]\nkind='itanium-linux'\n")).contains("os.personality")
    );
    assert!(bad(&format!("{base}[ptlb]\nentries=4096\n")).contains("ptlb"));
    assert!(bad(&format!("{base}[os]\npersonality='mach3'\n[ptlb]\nentries=1000\n")).contains("ptlb.entries"));
    assert!(bad(&format!("{base}[os]\npersonality='mach4'\n")).contains("mach4"));
    assert!(bad(&format!("{base}[os]\npersonality='mach3'\n[mach3]\nmax_tasks=0\n")).contains("mach3.max_tasks"));
}

#[derive(Clone, Debug)]
enum Op {
    Touch(u32, u64),
    Ipc(u32, u32, u64),
    Unmap(u32, u64, u64),
    Exit(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u32..5, 0x10u64..0x2000).prop_map(|(a, p)| Op::Touch(a, p)),
        2 => (1u32..5, 1u32..5, 1u64..9000).prop_map(|(a, b, l)| Op::Ipc(a, b, l)),
        1 => (1u32..5, 0x10u64..0x2000, 1u64..64).prop_map(|(a, p, n)| Op::Unmap(a, p, n)),
        1 => (1u32..5).prop_map(Op::Exit),
    ]
}

proptest! {
    #![proptest_config(crate::proptest_cases(48))]
    #[test]
    fn no_entry_ever_translates_differently_from_the_page_tables(ops in prop::collection::vec(op(), 1..150), stlb in prop::option::of(prop::sample::select(vec![16u32, 1024])), ptlb in any::<bool>()) {
        let mut sys = System::new(&design(stlb, ptlb, "")).unwrap();
        for o in ops {
            let recs = match o {
                Op::Touch(a, p) => vec![Record::ContextSwitch { asid: a }, Record::Access { kind: Kind::Store, size: 8, addr: p << 12 }],
                Op::Ipc(a, b, len) => vec![
                    Record::ContextSwitch { asid: b },
                    Record::Syscall { nr: 0, fd: fd_kind::PIPE | fd_kind::INTO_BUF, object: 1, buf: 0x300_0000, len },
                    Record::ContextSwitch { asid: a },
                    Record::Syscall { nr: 1, fd: fd_kind::PIPE | fd_kind::FROM_BUF, object: 1, buf: 0x200_0000, len },
                    Record::Ipc { to: b },
                ],
                Op::Unmap(a, p, n) => vec![Record::ContextSwitch { asid: a }, Record::Unmap { start: p << 12, len: n << 12 }],
                Op::Exit(a) => vec![Record::Exit { asid: a }],
            };
            sys.process(&recs).unwrap();
            prop_assert_eq!(sys.check_translations(), Ok(()));
        }
    }
}

/// `walks.by_depth` files every walk once, by the nested misses of its cascade: it sums to
/// `walks.count` for every preset (under mach3 it once copied `misses_by_depth`, which counts
/// misses, L2 misses and all), and under mach3 a walk with nested misses needs a kernel miss.
#[test]
fn walks_by_depth_sums_to_walks_for_every_preset() {
    use xlat::trace::gen::{GenSpec, Generator, Pattern};
    let spec = GenSpec {
        pattern: Pattern::Zipf,
        refs: 200_000,
        footprint: 64 << 20,
        store_fraction: 0.25,
        seed: 7,
        ..GenSpec::default()
    };
    let mut systems: Vec<System> =
        xlat::config::PRESETS.iter().map(|(n, _)| System::new(&Config::preset(n).unwrap()).unwrap()).collect();
    let mut reader = Generator::new(spec).unwrap();
    xlat::engine::run(&mut reader, &mut systems, xlat::engine::RunOptions::default(), |_| {}).unwrap();
    for s in &systems {
        let name = &s.config().name;
        assert!(s.failure().is_none(), "{name}: {:?}", s.failure());
        let st = s.stats();
        assert!(st.walks.count > 0, "{name}");
        assert_eq!(st.walks.by_depth.iter().sum::<u64>(), st.walks.count, "{name}: {:?}", st.walks.by_depth);
        if let Some(m) = s.mach_stats() {
            let nested: u64 = st.walks.by_depth[1..].iter().sum();
            assert!(nested > 0 && nested <= m.kernel_misses(), "{name}: {nested} walks with nested misses");
            assert_ne!(st.walks.by_depth, m.by_depth, "{name}: walks, not misses");
        }
    }
}
