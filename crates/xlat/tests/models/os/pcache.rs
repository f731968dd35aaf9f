//! The page cache and copy on write (`os.page_cache`), on hand-made record streams whose
//! frames, copies and cache counts are worked out by hand below each trace.

use xlat::addr::{Asid, Vpn};
use xlat::config::Config;
use xlat::engine::System;
use xlat::stats::SystemStats;
use xlat::trace::map_flags::{FILE, READ, SHARED, WRITE};
use xlat::trace::{Kind, Record};

pub(super) const PAGE: u64 = 4096;

pub(super) fn load(addr: u64) -> Record {
    Record::Access { kind: Kind::Load, size: 8, addr }
}

pub(super) fn store(addr: u64) -> Record {
    Record::Access { kind: Kind::Store, size: 8, addr }
}

pub(super) fn switch(asid: u32) -> Record {
    Record::ContextSwitch { asid }
}

/// Object `id` from byte `offset` mapped at `start` for `pages` pages.
pub(super) fn map_object(id: u32, offset: u64, start: u64, pages: u64, flags: u32) -> [Record; 2] {
    [Record::Object { id, offset }, Record::Map { start, len: pages * PAGE, flags }]
}

/// A 64-entry TLB over a radix table, `extra` appended (a cache, `[os]` keys).
fn design(extra: &str) -> Config {
    let text = format!("name = \"t\"\n[[tlb]]\nname = \"L1\"\nentries = 64\n[page_table]\nkind = \"radix\"\n{extra}");
    Config::from_toml(&text, "test").unwrap()
}

/// A data cache of 64 KB (4-way, 64-byte lines, physically tagged) that walks do not use.
const L1D: &str = "[[cache]]\nname = \"L1D\"\nsize = 65536\nline = 64\nways = 4\nserves = \"data\"\nwalker = false\n";
const OFF: &str = "[os]\npage_cache = false\n";

fn run(c: &Config, records: &[Record]) -> (System, SystemStats) {
    let mut s = System::new(c).unwrap();
    s.process(records).unwrap();
    let st = s.stats();
    (s, st)
}

fn frame(s: &System, asid: u32, addr: u64) -> u64 {
    s.os().frame(Asid(asid), Vpn(addr / PAGE)).expect("resident").0
}

/// Base of process `asid`'s mapping: each process maps the file at an address of its own.
fn base(asid: u32) -> u64 {
    0x1000_0000 + asid as u64 * 0x100_0000
}

/// Three processes map 4 pages of object 5 shared and writable, load each page (offset 16)
/// and store to the first.
fn shared_trace() -> Vec<Record> {
    let mut t = Vec::new();
    for asid in 1..=3 {
        t.push(switch(asid));
        t.extend(map_object(5, 0, base(asid), 4, READ | WRITE | SHARED | FILE));
        t.extend((0..4).map(|p| load(base(asid) + p * PAGE + 16)));
        t.push(store(base(asid) + 16));
    }
    t
}

#[test]
fn processes_mapping_one_file_shared_see_one_set_of_frames() {
    let (s, st) = run(&design(L1D), &shared_trace());
    // Process 1 reads the 4 pages in (4 misses); processes 2 and 3 find them (8 hits).
    assert_eq!(st.page_faults, 12, "every process faults its own mapping");
    assert_eq!(st.os.page_cache.frames, 4);
    assert_eq!(st.page_cache_misses, 4);
    assert_eq!(st.os.page_cache.hits, 8);
    assert_eq!(st.os.frames_in_use, 4);
    assert_eq!(st.os.cow_copies, 0, "a shared mapping writes the cache's frame");
    for p in 0..4 {
        let f = frame(&s, 1, base(1) + p * PAGE);
        assert_eq!(frame(&s, 2, base(2) + p * PAGE), f, "page {p}");
        assert_eq!(frame(&s, 3, base(3) + p * PAGE), f, "page {p}");
    }
    // The physically tagged cache sees 4 lines: 12 loads miss 4 times (cold), the 3 stores
    // hit the first page's line.
    assert_eq!(st.caches[0].accesses, 15);
    assert_eq!(st.caches[0].misses, 4);
}

#[test]
fn without_the_page_cache_every_process_gets_fresh_frames() {
    let (s, st) = run(&design(&format!("{L1D}{OFF}")), &shared_trace());
    assert_eq!(st.page_faults, 12);
    assert_eq!((st.os.page_cache.frames, st.os.page_cache.hits, st.page_cache_misses), (0, 0, 0));
    assert_eq!(st.os.frames_in_use, 12);
    assert_eq!(st.os.cow_copies, 0);
    for p in 0..4 {
        assert_ne!(frame(&s, 1, base(1) + p * PAGE), frame(&s, 2, base(2) + p * PAGE), "page {p}");
    }
    // 12 distinct lines: every load misses, every store hits the line its process loaded.
    assert_eq!(st.caches[0].accesses, 15);
    assert_eq!(st.caches[0].misses, 12);
}

#[test]
fn private_read_only_mappings_share_by_object_offset() {
    // Process 1 maps object pages 0..4, process 2 object pages 1..5 (offset one page).
    let mut t = vec![switch(1)];
    t.extend(map_object(9, 0, base(1), 4, READ | FILE));
    t.extend((0..4).map(|p| load(base(1) + p * PAGE)));
    t.push(switch(2));
    t.extend(map_object(9, PAGE, base(2), 4, READ | FILE));
    t.extend((0..4).map(|p| load(base(2) + p * PAGE)));
    let (s, st) = run(&design(""), &t);
    // Object pages 0, 1, 2, 3 read in by process 1; 4 by process 2, which finds 1, 2, 3.
    assert_eq!((st.os.page_cache.frames, st.os.page_cache.hits), (5, 3));
    assert_eq!(st.os.frames_in_use, 5);
    for p in 0..3 {
        assert_eq!(frame(&s, 2, base(2) + p * PAGE), frame(&s, 1, base(1) + (p + 1) * PAGE), "page {p}");
    }
    assert_eq!(st.os.cow_copies, 0);
}

#[test]
fn a_private_writable_file_page_written_after_a_read_is_copied_once() {
    let a = base(1);
    let mut s = System::new(&design("")).unwrap();
    let mut t = vec![switch(1)];
    t.extend(map_object(5, 0, a, 2, READ | WRITE | FILE));
    t.push(load(a));
    s.process(&t).unwrap();
    let cached = frame(&s, 1, a);
    s.process(&[store(a), store(a + 8), load(a)]).unwrap();
    let copy = frame(&s, 1, a);
    assert_ne!(copy, cached, "the first store copied the page");
    let b = base(2);
    let mut t = vec![switch(2)];
    t.extend(map_object(5, 0, b, 2, READ | WRITE | FILE));
    t.push(load(b));
    s.process(&t).unwrap();
    assert_eq!(frame(&s, 2, b), cached, "the cache keeps the page as read in");
    let st = s.stats();
    assert_eq!(st.os.cow_copies, 1);
    assert_eq!((st.os.page_cache.frames, st.os.page_cache.hits), (1, 1));
    assert_eq!(st.os.frames_in_use, 2, "the cache's frame and process 1's copy");
    assert_eq!(st.page_faults, 2, "one read fault per process");
    // Process 1: load (miss, fault), store (hit, copy on write, shoots the entry down, then
    // the store's lookup again: a miss), store and load (hits); process 2: load (miss).
    assert_eq!(st.lookups, 6);
    assert_eq!(st.tlb[0].misses, 3);
    assert_eq!(st.tlb[0].invalidations, 1);
    assert_eq!(st.walks.count, 3);
}

/// Process 1 writes pages 0..3 of anonymous memory, forks 7; 7 reads page 0 and writes page
/// 1; 1 writes pages 2 and 1; 7 writes page 2.
fn fork_trace() -> Vec<Record> {
    let a = 0x5000_0000u64;
    let mut t = vec![Record::Process { asid: 1 }];
    t.extend((0..3).map(|p| store(a + p * PAGE)));
    t.push(Record::Fork { child: 7 });
    t.extend([switch(7), load(a), store(a + PAGE)]);
    t.extend([switch(1), store(a + 2 * PAGE), store(a + PAGE)]);
    t.extend([switch(7), store(a + 2 * PAGE)]);
    t
}

#[test]
fn fork_shares_until_a_write_copies() {
    let a = 0x5000_0000u64;
    let (s, st) = run(&design(""), &fork_trace());
    assert_eq!(frame(&s, 7, a), frame(&s, 1, a), "the child's read shares the parent's frame");
    assert_ne!(frame(&s, 7, a + PAGE), frame(&s, 1, a + PAGE), "the child's write copied");
    assert_ne!(frame(&s, 7, a + 2 * PAGE), frame(&s, 1, a + 2 * PAGE), "the parent's write copied");
    // Two copies: the child's write of page 1 and the parent's of page 2. The parent's write
    // of page 1 and the child's of page 2 find themselves the frame's last holder.
    assert_eq!(st.os.cow_copies, 2);
    assert_eq!(st.os.frames_in_use, 5);
    assert_eq!(st.page_faults, 3, "the child finds the parent's pages mapped");
    // TLB: parent 3 misses; child page 0 miss, page 1 miss then (copied) miss again; parent
    // page 2 hit then miss, page 1 hit; child page 2 miss. Lookups: 10 with the 2 retried.
    assert_eq!(st.lookups, 10);
    assert_eq!(st.tlb[0].misses, 8);
    assert_eq!(st.tlb[0].invalidations, 2);
    assert_eq!((st.os.page_cache.frames, st.os.page_cache.hits), (0, 0), "no file");
}

#[test]
fn without_the_page_cache_fork_shares_frames_for_good() {
    let a = 0x5000_0000u64;
    let (s, st) = run(&design(OFF), &fork_trace());
    for p in 0..3 {
        assert_eq!(frame(&s, 7, a + p * PAGE), frame(&s, 1, a + p * PAGE), "page {p}");
    }
    assert_eq!(st.os.cow_copies, 0);
    assert_eq!(st.os.frames_in_use, 3);
    // Parent 3 misses, the child's 3 pages one miss each.
    assert_eq!((st.lookups, st.tlb[0].misses, st.tlb[0].invalidations), (8, 6, 0));
}

#[test]
fn plain_and_general_loops_agree_on_copies() {
    // A plain design (one TLB, radix, no caches) must leave copy on write to the general loop
    // exactly: compare it with the same design forced onto the general loop.
    let mut t = fork_trace();
    t.push(switch(2));
    t.extend(map_object(3, 0, base(2), 3, READ | WRITE | FILE));
    t.extend([load(base(2)), store(base(2)), store(base(2) + PAGE), load(base(2) + 2 * PAGE)]);
    t.push(Record::Unmap { start: base(2), len: 3 * PAGE });
    t.extend([store(0x5000_0000), load(0x5000_0000 + PAGE)]);
    let c = design("");
    let mut plain = System::new(&c).unwrap();
    assert!(plain.is_plain_loop());
    let mut general = System::new(&c).unwrap();
    general.use_general_loop();
    for chunk in t.chunks(3) {
        plain.process(chunk).unwrap();
        general.process(chunk).unwrap();
    }
    let (p, g) = (plain.stats(), general.stats());
    assert_eq!(p, g);
    // Fork trace's 2 copies, and process 2's two writes of its private file pages.
    assert_eq!(p.os.cow_copies, 4);
}

/// Three processes map one page of object 5 (shared, or private and read-only) at addresses
/// of their own and load it under `preset`: its frames in use, cache frames and hits with and
/// without the page cache.
fn one_file_page(preset: &str, flags: u32) -> [(u64, u64, u64); 2] {
    let mut t = Vec::new();
    for asid in 1..=3u32 {
        let at = 0x7f00_0000_0000 + asid as u64 * 0x100_0000;
        t.push(switch(asid));
        t.extend(map_object(5, 0, at, 1, flags));
        t.push(load(at + 16));
    }
    [true, false].map(|on| {
        let mut c = Config::preset(preset).unwrap();
        c.os.page_cache = on;
        let (s, st) = run(&c, &t);
        s.check_translations().unwrap();
        (st.os.frames_in_use, st.os.page_cache.frames, st.os.page_cache.hits)
    })
}

#[test]
fn mach3_tasks_mapping_one_memory_object_share_its_frame() {
    // bala94's Mach 3.0: a memory object's pages are shared by every task mapping it. The first
    // task reads the page in (1 frame), the other two find it (2 hits); without the cache
    // each task's fault takes a frame of its own, 2 more.
    for flags in [READ | SHARED | FILE, READ | FILE] {
        let [(on, frames, hits), (off, f0, h0)] = one_file_page("mach3-r3000", flags);
        assert_eq!((frames, hits, f0, h0), (1, 2, 0, 0), "flags {flags:#x}");
        assert_eq!(off - on, 2, "flags {flags:#x}");
    }
}

#[test]
fn file_pages_outside_shadow_regions_share_their_frame() {
    // swanson98's machine with shadow superpages for the heap: a small file mapping is no
    // shadow region, so its page is the page cache's, as with any Linux design.
    for preset in ["swanson98", "swanson98-mtlb"] {
        let [(on, frames, hits), (off, f0, h0)] = one_file_page(preset, READ | SHARED | FILE);
        assert_eq!((frames, hits, f0, h0), (1, 2, 0, 0), "{preset}");
        assert_eq!(off - on, 2, "{preset}");
    }
}

#[test]
fn a_forked_shadow_superpage_is_shared_not_copied() {
    // A 1 MB anonymous private writable mapping (at least shadow.min_bytes) is a shadow region
    // under "heap": the fork shares its superpages with the child, and stores to it by either
    // side copy nothing; a private file page beside it is write-protected by the fork and the
    // parent's store copies it (1 copy), as without shadow superpages.
    let mut t = vec![switch(1)];
    t.push(Record::Map { start: 0x2000_0000, len: 1 << 20, flags: READ | WRITE });
    t.push(store(0x2000_0000));
    t.extend(map_object(7, 0, 0x3000_0000, 1, READ | WRITE | FILE));
    t.push(load(0x3000_0000));
    t.push(Record::Fork { child: 2 });
    t.push(store(0x2000_0000 + 8));
    t.push(store(0x3000_0000 + 8));
    t.push(switch(2));
    t.push(store(0x2000_0000 + 16));
    // Both methods: "remap" (the TLB translates to shadow addresses) and "copy" (superpages of
    // real frames, which the fork must not write-protect).
    for method in [xlat::os::shadow::ShadowMethod::Remap, xlat::os::shadow::ShadowMethod::Copy] {
        let mut c = Config::preset("swanson98-mtlb").unwrap();
        c.shadow.method = method;
        let (s, st) = run(&c, &t);
        s.check_translations().unwrap();
        assert!(
            st.shadow.as_ref().is_some_and(|sh| sh.superpages > 0),
            "{method:?}: the mapping must be a shadow region"
        );
        assert_eq!(st.os.cow_copies, 1, "{method:?}");
        assert_eq!((st.os.page_cache.frames, st.os.page_cache.hits), (1, 0), "{method:?}");
    }
}
