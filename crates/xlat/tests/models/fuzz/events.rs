//! Seeded mutation fuzzing of the event records — maps, unmaps, `madvise` requests, other
//! system calls, IPC, forks, exits, switches, objects — with extreme addresses and lengths,
//! through every kind of OS model: shadow superpages (the modified `sbrk`, mappings, markers;
//! buckets and buddy regions, remapping and copying), page reservation with static and
//! promoted superpages and partial-subblock PTEs, the Mach 3.0 personality, the Itanium
//! layouts with region IDs and protection keys, and plain demand paging. A design may fail on
//! a trace it cannot simulate (no memory left, an address out of its space); it may not panic,
//! and its OS model's work must grow with the superpages and pages it handles, not with the
//! bytes the records name: each mutant's shadow-superpage steps are checked against a bound
//! that no walk over a huge region's pieces or increments could meet.
//!
//! It runs briefly in the test command (`XLAT_FUZZ_ITERS`, default 300, makes a tenth as many
//! mutants) and for as long as wanted on demand:
//!
//! ```sh
//! XLAT_FUZZ_ITERS=20000 XLAT_FUZZ_SEED=7 cargo test --release -p xlat --test models fuzz::events -- --nocapture
//! ```

use super::{iterations, no_internal_errors, seed, Rng, VecReader};
use xlat::config::Config;
use xlat::engine::{self, RunOptions, System};
use xlat::os::shadow::{ShadowAllocator, ShadowMethod, ShadowPolicy};
use xlat::trace::map_flags::{EXEC, FILE, HEAP, IMAGE, READ, SHARED, STACK, WRITE};
use xlat::trace::{fd_kind, sysno, Kind, Record, BATCH};

/// Addresses at the edges: page and superpage boundaries, the ends of 32-, 47- and 64-bit
/// spaces, Itanium region bases.
fn address(r: &mut Rng) -> u64 {
    let edge = r.pick(&[
        0,
        0x1000,
        0x1000_0000,
        0x4000_0000,
        0x7fff_f000,
        0x8000_0000,
        0xffff_ffff,
        1 << 32,
        0x7f00_0000_0000,
        1 << 47,
        (1 << 47) - 0x1000,
        1 << 61,
        3 << 61,
        1 << 63,
        u64::MAX - 0xfff,
        u64::MAX,
    ]);
    match r.under(4) {
        0 => edge,
        1 => edge.wrapping_add(r.under(1 << 24) & !0xfff),
        2 => edge.wrapping_sub(r.under(1 << 16)),
        _ => r.next(),
    }
}

/// Lengths at the edges: none, one byte, pages, superpages, most of the address space, all of it.
fn length(r: &mut Rng) -> u64 {
    match r.under(3) {
        0 => r.pick(&[0, 1, 0xfff, 0x1000, 20 << 10, 2 << 20, 16 << 20, 1 << 32, 0x7f00_0000_0000, 1 << 63, u64::MAX]),
        1 => r.next() >> r.under(64),
        _ => (r.under(64) + 1) << 12,
    }
}

fn flags(r: &mut Rng) -> u32 {
    match r.under(3) {
        0 => r.pick(&[
            READ | WRITE | HEAP,
            READ | WRITE,
            READ | EXEC | FILE | IMAGE,
            READ | WRITE | SHARED,
            READ | WRITE | STACK,
        ]),
        1 => 0,
        _ => r.next() as u32,
    }
}

/// One record of any kind, with extreme values.
fn record(r: &mut Rng, asids: &[u32]) -> Record {
    let asid = if r.under(8) == 0 { r.next() as u32 } else { r.pick(asids) };
    match r.under(17) {
        15 => Record::Protect { start: address(r), len: length(r), flags: flags(r) },
        16 => Record::Discard { start: address(r), len: length(r), lazy: r.under(2) == 1 },
        0 | 1 => Record::Map { start: address(r), len: length(r), flags: flags(r) },
        2 => Record::Unmap { start: address(r), len: length(r) },
        3 | 4 => Record::Syscall { nr: sysno::MADVISE, fd: 0, object: 0, buf: address(r), len: length(r) },
        5 => Record::Syscall {
            nr: r.under(400) as u16,
            fd: {
                let any = r.next() as u8;
                r.pick(&[
                    fd_kind::FILE | fd_kind::INTO_BUF,
                    fd_kind::PIPE | fd_kind::FROM_BUF,
                    fd_kind::SOCKET | fd_kind::INTO_BUF,
                    any,
                ])
            },
            object: r.under(4) as u32,
            buf: address(r),
            len: length(r) >> r.under(40),
        },
        6 => Record::Ipc { to: asid },
        7 => Record::Fork { child: asid },
        8 => Record::Exit { asid },
        9 => Record::ContextSwitch { asid },
        10 => Record::Process { asid },
        11 => Record::Object { id: r.under(4) as u32, offset: length(r) },
        12 => Record::Thread { tid: r.next() as u32 },
        13 => Record::Marker { id: r.next() },
        _ => Record::Access { kind: r.pick(&Kind::ALL), size: 1 + r.under(64) as u32, addr: address(r) },
    }
}

/// A program's life in records: a heap growing by `brk`, mappings used, advised, unmapped; a
/// child forked, switched to, exiting; IPC between them. Mutants start from it.
fn seed_trace() -> Vec<Record> {
    let heap = 0x1000_0000u64;
    let map = 0x7f00_0000_0000u64;
    let mut v =
        vec![Record::Process { asid: 1 }, Record::Map { start: heap, len: 132 << 10, flags: READ | WRITE | HEAP }];
    for i in 0..8 {
        v.push(Record::Access { kind: Kind::Store, size: 8, addr: heap + i * 0x1000 });
    }
    v.extend([
        Record::Map { start: heap + (132 << 10), len: 9 << 20, flags: READ | WRITE | HEAP },
        Record::Object { id: 1, offset: 0 },
        Record::Map { start: map, len: 4 << 20, flags: READ | WRITE },
        Record::Syscall { nr: sysno::MADVISE, fd: 0, object: 0, buf: map, len: 4 << 20 },
        Record::Access { kind: Kind::Load, size: 8, addr: map + 0x2345 },
        Record::Syscall { nr: 0, fd: fd_kind::FILE | fd_kind::INTO_BUF, object: 1, buf: map, len: 8192 },
        Record::Fork { child: 2 },
        Record::Syscall { nr: 1, fd: fd_kind::PIPE | fd_kind::FROM_BUF, object: 2, buf: heap, len: 256 },
        Record::Ipc { to: 2 },
        Record::ContextSwitch { asid: 2 },
        Record::Syscall { nr: 0, fd: fd_kind::PIPE | fd_kind::INTO_BUF, object: 2, buf: heap + 4096, len: 256 },
        Record::Access { kind: Kind::Modify, size: 8, addr: heap + 0x10 },
        Record::Unmap { start: map + (1 << 20), len: 1 << 20 },
        Record::Exit { asid: 2 },
        Record::ContextSwitch { asid: 1 },
        Record::Map { start: heap + (9 << 20) + (132 << 10), len: 3 << 20, flags: READ | WRITE | HEAP },
        Record::Access { kind: Kind::Ifetch, size: 4, addr: 0x40_0000 },
        Record::Unmap { start: map, len: 4 << 20 },
        Record::Access { kind: Kind::Load, size: 8, addr: heap + (10 << 20) },
    ]);
    v
}

/// A mutant of `input`: fields set to extreme values, records inserted, repeated, dropped or
/// moved.
fn mutate(input: &[Record], r: &mut Rng) -> Vec<Record> {
    let mut v = input.to_vec();
    let asids = [0, 1, 2, 3, u32::MAX - 1];
    for _ in 0..1 + r.under(6) {
        let at = r.below(v.len() + 1);
        match r.under(6) {
            0 | 1 if at < v.len() => {
                v[at] = match v[at] {
                    Record::Map { start, len, flags: f } => match r.under(3) {
                        0 => Record::Map { start: address(r), len, flags: f },
                        1 => Record::Map { start, len: length(r), flags: f },
                        _ => Record::Map { start, len, flags: flags(r) },
                    },
                    Record::Unmap { start, len } => {
                        if r.under(2) == 0 {
                            Record::Unmap { start: address(r), len }
                        } else {
                            Record::Unmap { start, len: length(r) }
                        }
                    }
                    Record::Syscall { nr, fd, object, buf, len } => {
                        if r.under(2) == 0 {
                            Record::Syscall { nr, fd, object, buf: address(r), len }
                        } else {
                            Record::Syscall { nr, fd, object, buf, len: length(r) }
                        }
                    }
                    _ => record(r, &asids),
                };
            }
            2 => {
                let rec = record(r, &asids);
                v.insert(at, rec);
            }
            3 if at < v.len() => {
                let rec = v[at];
                v.insert(r.below(v.len() + 1), rec);
            }
            4 if at < v.len() => {
                v.remove(at);
            }
            _ if at < v.len() => {
                let to = r.below(v.len());
                v.swap(at, to);
            }
            _ => {}
        }
    }
    // Always something to simulate.
    v.push(Record::Access { kind: Kind::Load, size: 8, addr: 0x1000_0000 });
    v
}

/// The designs, one per kind of OS model, with memories and shadow ranges kept small so that a
/// mutant runs in milliseconds.
fn designs() -> Vec<System> {
    let shadow = |policy: ShadowPolicy, method: ShadowMethod, allocator: ShadowAllocator, step: u64, first: u64| {
        let mut c = Config::preset("swanson98-mtlb").unwrap();
        c.name = format!("{}-{:?}-{:?}", policy.name(), method, allocator);
        c.os.shadow_superpages = policy;
        c.os.memory_bytes = 64 << 20;
        c.shadow.method = method;
        c.shadow.allocator = allocator;
        c.shadow.partition = vec![(16 << 10, 8), (64 << 10, 4), (1 << 20, 2), (16 << 20, 1)];
        c.shadow.sbrk_increment = step;
        c.shadow.sbrk_initial = first;
        c
    };
    let reservation = |superpages: &str, partial: bool| {
        Config::from_toml(
            &format!(
                "name = \"r-{superpages}\"\n[[tlb]]\nname = \"L1\"\nentries = 16\nformat = \"complete-subblock\"\nprefetch = true\n\
                 [[tlb]]\nname = \"L2\"\nlevel = 2\nentries = 64\nformat = \"superpage\"\n[page_table]\nkind = \"clustered\"\n\
                 [os]\nreservation = true\nsuperpages = \"{superpages}\"\npartial_subblock = {partial}\nframe_allocator = \"buddy\"\n\
                 memory_bytes = 16777216\nreservation_failure = 0.1\n"
            ),
            "fuzz",
        )
        .unwrap()
    };
    // One huge buddy region split down to 8 KB superpages and recombined.
    let mut huge = shadow(ShadowPolicy::All, ShadowMethod::Remap, ShadowAllocator::Buddy, 8 << 10, 8 << 10);
    huge.name = "huge-buddy-region".into();
    huge.shadow.partition = vec![(8 << 10, 4), (64 << 10, 2), (1 << 38, 1)];
    let memory = huge.memory.as_mut().unwrap();
    memory.dram_bytes = Some(4 << 30);
    memory.pa_bits = Some(40);
    let mut mach = Config::preset("mach3-r3000").unwrap();
    mach.os.memory_bytes = 1 << 24;
    let mut x86 = Config::preset("x86-64").unwrap();
    x86.os.memory_bytes = 1 << 26;
    let mut itanium = Config::preset("itanium2-linux").unwrap();
    itanium.os.memory_bytes = 1 << 26;
    let mut sharing = Config::preset("itanium2-lvhpt-sharing").unwrap();
    sharing.os.memory_bytes = 1 << 26;
    sharing.itanium.as_mut().unwrap().rid_bits = 6;
    sharing.itanium.as_mut().unwrap().pkrs = 2;
    sharing.page_table.vhpt_entries = 64;
    use ShadowAllocator::{Buckets, Buddy};
    use ShadowMethod::{Copy, Remap};
    use ShadowPolicy::{All, Heap, Markers};
    [
        shadow(Heap, Remap, Buckets, 2 << 20, 8 << 20),
        shadow(All, Remap, Buddy, 20 << 10, 12 << 10),
        shadow(Markers, Copy, Buckets, 2 << 20, 8 << 20),
        shadow(Heap, Copy, Buddy, 16 << 10, 4 << 10),
        shadow(Markers, Remap, Buddy, 3 << 20, 1 << 20),
        huge,
        reservation("promote", true),
        reservation("static", false),
        mach,
        x86,
        itanium,
        sharing,
    ]
    .iter()
    .map(|c| System::new(c).unwrap())
    .collect()
}

/// Simulates `records` through every design; returns how many designs stopped on them.
fn simulate(records: &[Record]) -> usize {
    // As a file would hold them: the round trip through xtr is exact.
    let mut w = xlat::trace::xtr::XtrWriter::new(Vec::new(), "fuzz-events").unwrap();
    xlat::trace::TraceWriter::write(&mut w, records).unwrap();
    let bytes = w.finish_into_inner().unwrap();
    let (mut reader, _) = xlat::trace::open::reader_from_stream(
        Box::new(std::io::Cursor::new(bytes)),
        "fuzz-events",
        Some(xlat::trace::Format::Xtr),
        None,
        false,
    )
    .unwrap();
    let mut back = Vec::new();
    let mut buf = Vec::with_capacity(BATCH);
    while reader.read_batch(&mut buf, BATCH).unwrap() > 0 {
        back.extend_from_slice(&buf);
    }
    assert_eq!(back, records, "xtr round trip");
    let mut systems = designs();
    engine::run(&mut VecReader(back, 0), &mut systems, RunOptions::default(), |_| {}).unwrap();
    no_internal_errors(&systems);
    let n = records.len() as u64;
    for s in &systems {
        let Some(sh) = s.os().shadow_stats() else {
            continue;
        };
        // Each record walks a few runs per superpage size and tries a few superpages more than
        // it makes; overlaps skip superpages already there. Walking the pieces or increments of
        // one region of gigabytes would take millions of steps.
        let bound = 64 * n * (8 + sh.superpages + sh.live_superpages + sh.torn_down);
        let steps = s.os().shadow_steps();
        assert!(steps <= bound, "{}: {steps} steps for {n} records ({sh:?})", s.config().name);
    }
    systems.iter().filter(|s| s.failure().is_some()).count()
}

#[test]
fn event_records_with_extreme_ranges_never_panic_nor_run_away() {
    let base = seed_trace();
    assert_eq!(simulate(&base), 0, "the seed trace runs through every design");
    let mut r = Rng(seed().wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xe7e7 | 1);
    let (mut stopped, mut runs) = (0, 0);
    for i in 0..iterations().div_ceil(10) {
        let m = mutate(&base, &mut r);
        match std::panic::catch_unwind(|| simulate(&m)) {
            Ok(n) => {
                stopped += n;
                runs += 1;
            }
            Err(_) => panic!("event mutant {i} (XLAT_FUZZ_SEED={}) panics or runs away: {m:?}", seed()),
        }
    }
    println!("event records: {runs} mutants, {stopped} design runs stopped on an error");
}

/// Regions, heap growths and madvise requests of every extreme length from every extreme
/// address, one record each after a little use, through every design.
#[test]
fn every_extreme_range_is_bounded_in_every_design() {
    let starts =
        [0u64, 0x1000, 0x1000_0000, 0x7f00_0000_0000, 1 << 47, (1 << 63) + 0x4000, u64::MAX - 0x3fff, u64::MAX];
    let lens = [1u64, 20 << 10, 0x7f00_0000_0000, 1 << 63, u64::MAX - 0x1000, u64::MAX];
    for start in starts {
        for len in lens {
            for rec in [
                Record::Map { start, len, flags: READ | WRITE | HEAP },
                Record::Map { start, len, flags: READ | WRITE },
                Record::Unmap { start, len },
                Record::Syscall { nr: sysno::MADVISE, fd: 0, object: 0, buf: start, len },
                Record::Syscall { nr: 0, fd: fd_kind::FILE | fd_kind::INTO_BUF, object: 1, buf: start, len },
            ] {
                let recs = vec![
                    Record::Process { asid: 1 },
                    Record::Map { start: 0x1000_0000, len: 1 << 20, flags: READ | WRITE | HEAP },
                    Record::Access { kind: Kind::Store, size: 8, addr: 0x1000_0000 },
                    rec,
                    Record::Fork { child: 2 },
                    Record::Exit { asid: 1 },
                    Record::ContextSwitch { asid: 2 },
                    rec,
                    Record::Access { kind: Kind::Load, size: 8, addr: start },
                ];
                if std::panic::catch_unwind(|| simulate(&recs)).is_err() {
                    panic!("{rec:?} from {start:#x}: a design panics or runs away");
                }
            }
        }
    }
}
