//! Kernel time (`[os]`'s per-event costs) and the kernel's per-event footprint, on hand-built
//! traces whose counts are worked out by hand in the comments: each event costs exactly its
//! configured cycles, `kernel.cycles` is Σ count × cost, a timed design's time includes it, the
//! footprint's pages compete for TLB entries (an LRU TLB followed entry by entry) and its lines
//! go through the caches, and bad keys give one-line errors that name them.

use xlat::config::Config;
use xlat::engine::System;
use xlat::stats::SystemStats;
use xlat::trace::{Kind, Record};

/// Costs chosen so that every sum of counts × costs below is unambiguous.
const SYSCALL: u64 = 3;
const SWITCH: u64 = 50;
const MINOR: u64 = 700;
const MAJOR: u64 = 9_000;
const FLUSH: u64 = 110_000;
const IPC: u64 = 1_300_000;

/// One 8-entry fully associative LRU TLB over a radix table, 4 KB pages, `asid` tagged or
/// flush, every kernel cost set, and `extra` appended (more `[os]` keys, or other sections).
fn design(asid: &str, os_extra: &str, extra: &str) -> String {
    format!(
        "name = \"k\"\npage_size = 4096\nasid = \"{asid}\"\n\
         [[tlb]]\nname = \"TLB\"\nentries = 8\nways = 8\npolicy = \"lru\"\n\
         [page_table]\nkind = \"radix\"\n\
         [os]\nsyscall_cycles = {SYSCALL}\nswitch_cycles = {SWITCH}\nminor_fault_cycles = {MINOR}\n\
         major_fault_cycles = {MAJOR}\nflush_cycles = {FLUSH}\nipc_cycles = {IPC}\n{os_extra}\n{extra}"
    )
}

fn run(text: &str, records: &[Record]) -> (SystemStats, bool) {
    let c = Config::from_toml(text, "k.toml").unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut s = System::new(&c).unwrap();
    let plain = s.is_plain_loop();
    s.process(records).unwrap();
    assert!(s.failure().is_none());
    (s.stats(), plain)
}

fn load(addr: u64) -> Record {
    Record::Access { kind: Kind::Load, size: 4, addr }
}

fn syscall() -> Record {
    Record::Syscall { nr: 39, fd: 0, object: 0, buf: 0, len: 0 }
}

/// A trace of its own, then the same with one event more: the event's kernel cycles.
fn added(asid: &str, base: &[Record], event: Record) -> (u64, SystemStats) {
    let text = design(asid, "", "[time]\ncpi = 1.0\n");
    let (before, _) = run(&text, base);
    let mut more = base.to_vec();
    more.push(event);
    let (after, _) = run(&text, &more);
    // The timed design's kernel time grows by the same cycles; an event other than an access
    // adds nothing else to its time.
    let (tb, ta) = (before.time.unwrap(), after.time.unwrap());
    assert_eq!(ta.kernel - tb.kernel, after.kernel.cycles - before.kernel.cycles);
    if !matches!(event, Record::Access { .. }) {
        assert_eq!(ta.cycles - tb.cycles, after.kernel.cycles - before.kernel.cycles);
    }
    (after.kernel.cycles - before.kernel.cycles, after)
}

#[test]
fn each_event_costs_exactly_its_configured_cycles() {
    let base = [load(0x1000)];
    let (c, s) = added("tagged", &base, syscall());
    assert_eq!((c, s.kernel.syscalls), (SYSCALL, 1));
    // A switch on a tagged TLB flushes nothing.
    let (c, s) = added("tagged", &base, Record::ContextSwitch { asid: 7 });
    assert_eq!((c, s.kernel.switches, s.kernel.flushes), (SWITCH, 1, 0));
    // On a flush-on-switch TLB the same switch also flushes: one switch and one flush.
    let (c, s) = added("flush", &base, Record::ContextSwitch { asid: 7 });
    assert_eq!((c, s.kernel.switches, s.kernel.flushes), (SWITCH + FLUSH, 1, 1));
    // A first touch of a page is a (minor) fault; a second touch of a resident page is none.
    let (c, s) = added("tagged", &base, load(0x2000));
    assert_eq!((c, s.kernel.faults, s.kernel.minor_faults, s.kernel.major_faults), (MINOR, 2, 2, 0));
    let (c, _) = added("tagged", &base, load(0x1ff0));
    assert_eq!(c, 0);
    let (c, s) = added("tagged", &base, Record::Ipc { to: 3 });
    assert_eq!((c, s.kernel.ipcs), (IPC, 1));
    // Events the kernel time does not charge cost nothing.
    let (c, _) = added("tagged", &base, Record::Marker { id: 1 });
    assert_eq!(c, 0);
}

#[test]
fn kernel_cycles_are_the_sum_of_count_times_cost_on_a_hand_built_trace() {
    // Process 0 (the first) touches pages 1, 2 and 1 again (2 faults), makes 3 system calls and
    // sends 2 messages; a switch to process 1 (flush 1) which touches page 5 (fault 3) and page
    // 1 of its own (fault 4); a switch back (flush 2) and a touch of page 2 (resident).
    let trace = vec![
        load(0x1000),
        load(0x2000),
        load(0x1008),
        syscall(),
        syscall(),
        Record::Ipc { to: 1 },
        syscall(),
        Record::Ipc { to: 1 },
        Record::ContextSwitch { asid: 1 },
        load(0x5000),
        load(0x1000),
        Record::ContextSwitch { asid: 0 },
        load(0x2004),
    ];
    for timed in [false, true] {
        let extra = if timed { "[time]\ncpi = 2.0\n" } else { "" };
        let (s, _) = run(&design("flush", "", extra), &trace);
        let k = s.kernel;
        assert_eq!((k.syscalls, k.switches, k.faults, k.minor_faults, k.major_faults), (3, 2, 4, 4, 0));
        assert_eq!((k.flushes, k.ipcs), (2, 2));
        let by_hand = 3 * SYSCALL + 2 * SWITCH + 4 * MINOR + 2 * FLUSH + 2 * IPC;
        assert_eq!(k.cycles, by_hand);
        assert_eq!(s.page_faults, 4);
        match s.time {
            None => assert!(!timed),
            Some(t) => {
                assert!(timed);
                assert_eq!(t.kernel, by_hand);
                assert_eq!(t.cycles, t.base + t.icache + t.dcache + t.translation + t.faults + t.remap + by_hand);
            }
        }
    }
}

#[test]
fn major_faults_are_charged_apart_from_minor_ones() {
    // What a page cache will count: 5 faults of which 2 read a page in.
    let mut s = SystemStats { page_faults: 5, major_faults: 2, ..SystemStats::default() };
    s.events.syscalls = 1;
    let p = xlat::cost::CostParams {
        cost: xlat::cost::CostConfig::default(),
        tlb_latency: vec![],
        refill: xlat::cost::RefillCost::Walker,
        stlb: None,
        itanium: None,
        cpi: None,
        clock_mhz: None,
        kernel: xlat::cost::KernelCosts {
            syscall: SYSCALL,
            switch: SWITCH,
            minor_fault: MINOR,
            major_fault: MAJOR,
            flush: FLUSH,
            ipc: IPC,
        },
    };
    let k = xlat::cost::kernel(&s, &p);
    assert_eq!((k.faults, k.minor_faults, k.major_faults), (5, 3, 2));
    assert_eq!(k.cycles, SYSCALL + 3 * MINOR + 2 * MAJOR);
}

#[test]
fn the_kernel_footprint_competes_for_tlb_entries() {
    // A 4-entry fully associative LRU TLB, 2 pages of kernel text (T0, T1) and 1 of data (D).
    // Footprint per fault and per system call: T0, T1, D.
    //   load A: miss, fault: T0 T1 D miss and fill; A filled          [T0 T1 D A]
    //   load B: miss, fault: T0 T1 D hit; B evicts A                   [T0 T1 D B]
    //   load A: miss, no fault; A evicts T0                            [T1 D B A]
    //   syscall: T0 evicts T1, T1 evicts D, D evicts B (all miss)      [A T0 T1 D]
    //   load B: miss, no fault; B evicts A
    // User: 4 lookups, 4 misses. Kernel: 9 lookups, 6 misses.
    let tlb = "[[tlb]]\nname = \"TLB\"\nentries = 4\nways = 4\npolicy = \"lru\"\n";
    let text = |footprint: &str| {
        format!("name = \"f\"\npage_size = 4096\n{tlb}[page_table]\nkind = \"radix\"\n[os]\n{footprint}\n")
    };
    let trace = [load(0x10_000), load(0x20_000), load(0x10_000), syscall(), load(0x20_000)];
    let (s, plain) = run(&text("kernel_text_bytes = 8192\nkernel_data_bytes = 4096"), &trace);
    assert!(!plain, "a footprint takes the general loop");
    assert_eq!((s.kernel.tlb_lookups, s.kernel.tlb_misses), (9, 6));
    assert_eq!((s.tlb[0].accesses, s.tlb[0].misses), (4 + 9, 4 + 6));
    assert_eq!(s.lookups, 4);
    assert_eq!(s.walks.count, 4, "kernel misses are refilled without a walk");
    // Without a footprint the same trace misses only on the two first touches, the design is
    // plain and the kernel makes no lookups.
    let (s, plain) = run(&text(""), &trace);
    assert!(plain, "no footprint: the plain loop");
    assert_eq!((s.kernel.tlb_lookups, s.tlb[0].accesses, s.tlb[0].misses), (0, 4, 2));
}

#[test]
fn the_kernel_footprint_goes_through_the_caches() {
    // 128 bytes of kernel data per event: 2 lines of 64 bytes through one unified cache large
    // enough to keep them; the TLB has a free entry for the kernel's page.
    let text = "name = \"c\"\npage_size = 4096\n[[tlb]]\nname = \"TLB\"\nentries = 8\nways = 8\n\
                [page_table]\nkind = \"radix\"\n[os]\nkernel_data_bytes = 128\n\
                [[cache]]\nname = \"L1\"\nsize = 8192\nline = 64\nways = 2\nlatency = 1\n\
                [memory]\nlatency = 100\n";
    let (s, _) = run(text, &[syscall()]);
    assert_eq!((s.caches[0].accesses, s.caches[0].misses), (2, 2));
    assert_eq!(s.timing.stall[1], 2 * (100 - 1), "two loads from memory: 100 cycles, 99 beyond a hit");
    let (s, _) = run(text, &[syscall(), syscall()]);
    assert_eq!((s.caches[0].accesses, s.caches[0].misses), (4, 2));
    assert_eq!((s.kernel.tlb_lookups, s.kernel.tlb_misses), (2, 1));
}

fn error(text: &str) -> String {
    let e = Config::from_toml(text, "k.toml").map(|_| ()).unwrap_err().to_string();
    assert_eq!(e.lines().count(), 1, "one line: {e}");
    e
}

#[test]
fn unknown_or_impossible_keys_give_one_line_errors_naming_them() {
    let base = "name = \"e\"\n[[tlb]]\nname = \"TLB\"\nentries = 8\n[os]\n";
    let e = error(&format!("{base}syscall_cycle = 3\n"));
    assert!(e.contains("syscall_cycle") && e.starts_with("k.toml: line 6"), "{e}");
    let e = error(&format!("{base}switch_cycles = -1\n"));
    assert!(e.starts_with("k.toml: line 6: in [os]"), "{e}");
    let e = error(&format!("{base}ipc_cycles = 4294967297\n"));
    assert!(e.contains("os.ipc_cycles: must be at most 2^32"), "{e}");
    let e = error(&format!("{base}kernel_text_bytes = 1048577\n"));
    assert!(e.contains("os.kernel_text_bytes: must be at most 2^20"), "{e}");
    // A fault charged as translation and as kernel time.
    let e = error(&format!("{base}major_fault_cycles = 5\n[cost]\npage_fault_cycles = 9\n"));
    assert!(e.contains("os.major_fault_cycles: a fault would be charged twice"), "{e}");
    // A RID purge charged by [itanium] and as a kernel flush.
    let e = error(&format!("{base}flush_cycles = 5\n[itanium]\n"));
    assert!(e.contains("os.flush_cycles: a RID purge would be charged twice"), "{e}");
    Config::from_toml(&format!("{base}flush_cycles = 5\n[itanium]\npurge_cycles = 0\n"), "k.toml").unwrap();
    // Mach 3.0 makes its own kernel references.
    let preset = include_str!("../../../../../configs/mach3-r3000.toml");
    let e = error(&preset.replace("[os]\n", "[os]\nkernel_data_bytes = 64\n"));
    assert!(e.contains("os.kernel_data_bytes: Mach 3.0's kernel makes its own references"), "{e}");
}
