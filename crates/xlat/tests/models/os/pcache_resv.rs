//! The page cache under page reservation (`os.page_cache` with `os.reservation`): reservations
//! of memory objects, shared by every mapping of a file page, superpages per mapping, and copy
//! on write into the writer's own reservation. Each trace's frames, reservations, superpages and
//! TLB misses are worked out by hand beside it (blocks of 16 base pages of 4 KB, 64 KB
//! superpages, a sequential frame allocator: reservations are 16-frame aligned blocks).

use xlat::addr::{Asid, PageSize, Vpn};
use xlat::config::Config;
use xlat::engine::System;
use xlat::stats::SystemStats;
use xlat::trace::map_flags::{FILE, READ, SHARED, WRITE};
use xlat::trace::Record;

use super::pcache::{load, map_object, store, switch, PAGE};

const BLOCK: u64 = 16;

/// Loads of the first byte of `pages` pages from `start`.
fn loads(start: u64, pages: u64) -> impl Iterator<Item = Record> {
    (0..pages).map(move |p| load(start + p * PAGE))
}

/// A 64-entry fully associative superpage TLB over a radix table, with page reservation in
/// blocks of 16 pages and promotion (unless `extra`, appended to `[os]`, says otherwise).
fn design(extra: &str) -> Config {
    let promote = if extra.contains("superpages") { "" } else { "superpages = \"promote\"\n" };
    let text = format!(
        "name = \"t\"\n[[tlb]]\nname = \"L1\"\nentries = 64\nformat = \"superpage\"\n[page_table]\nkind = \"radix\"\n\
         [os]\nreservation = true\n{promote}{extra}"
    );
    Config::from_toml(&text, "test").unwrap()
}

fn run(c: &Config, records: &[Record]) -> (System, SystemStats) {
    let mut s = System::new(c).unwrap();
    s.process(records).unwrap();
    s.check_translations().unwrap();
    let st = s.stats();
    (s, st)
}

fn frame(s: &System, asid: u32, addr: u64) -> u64 {
    s.os().frame(Asid(asid), Vpn(addr / PAGE)).expect("resident").0
}

/// The block size: 64 KB superpages.
fn sp64k() -> PageSize {
    PageSize::from_shift(16).unwrap()
}

/// The size of the mapping the OS holds for `addr` of `asid`.
fn mapped_size(s: &System, asid: u32, addr: u64) -> PageSize {
    s.os().mapping(Asid(asid), Vpn(addr / PAGE)).expect("resident").size
}

/// Base of process `asid`'s mapping, 64 KB aligned: each process maps the file at an address
/// of its own.
fn base(asid: u32) -> u64 {
    0x1000_0000 + asid as u64 * 0x100_0000
}

/// Processes 1 and 2 each map object pages 0..16 of object 5 (with `flags`) at their `base` plus
/// `skew[asid - 1]` pages and load every page.
fn two_mappings(flags: u32, skew: [u64; 2]) -> Vec<Record> {
    let mut t = Vec::new();
    for asid in 1..=2 {
        let at = base(asid) + skew[asid as usize - 1] * PAGE;
        t.push(switch(asid));
        t.extend(map_object(5, 0, at, BLOCK, flags));
        t.extend(loads(at, BLOCK));
    }
    t
}

#[test]
fn two_aligned_mappings_of_a_file_block_share_one_reservation_and_each_promote() {
    for flags in [READ | SHARED | FILE, READ | FILE, READ | WRITE | FILE] {
        let mut t = two_mappings(flags, [0, 0]);
        // Process 2 loads its 16 pages again: its superpage entry holds them all.
        t.extend(loads(base(2), BLOCK));
        let (s, st) = run(&design(""), &t);
        // Process 1 reads the 16 object pages in (16 misses), into the object's reservation for
        // extent 0; process 2 finds all 16 (16 hits).
        assert_eq!((st.os.page_cache.frames, st.os.page_cache.hits, st.page_cache_misses), (16, 16, 16), "{flags:#x}");
        assert_eq!((st.os.reservations, st.os.live_reservations), (1, 1), "{flags:#x}: the object's one reservation");
        assert_eq!(st.os.frames_in_use, 16, "{flags:#x}: the reserved block, nothing more");
        assert_eq!(st.page_faults, 32, "{flags:#x}");
        // Each process's block is promoted at its 16th page: two superpage PTEs.
        assert_eq!((st.os.promotions, st.os.superpages, st.os.demotions), (2, 2, 0), "{flags:#x}");
        assert_eq!((st.os.resident_pages, st.os.placed_pages), (32, 32), "{flags:#x}");
        assert_eq!(st.os.cow_copies, 0, "{flags:#x}: nothing is written");
        let r = frame(&s, 1, base(1));
        assert_eq!(r % BLOCK, 0, "{flags:#x}: the reservation is aligned");
        for p in 0..BLOCK {
            assert_eq!(frame(&s, 1, base(1) + p * PAGE), r + p, "{flags:#x}: page {p} properly placed");
            assert_eq!(frame(&s, 2, base(2) + p * PAGE), r + p, "{flags:#x}: page {p} shared");
        }
        assert_eq!(s.os().reservation(Asid(2), Vpn(base(2) / PAGE)).map(|p| p.0), Some(r));
        for asid in 1..=2 {
            assert_eq!(mapped_size(&s, asid, base(asid) + 5 * PAGE), sp64k(), "{flags:#x}: {asid}");
        }
        // TLB: 16 misses per process on first touch (base entries, the last filled as the
        // superpage); process 2's second pass hits its superpage entry 16 times.
        assert_eq!((st.lookups, st.tlb[0].misses), (48, 32), "{flags:#x}");
    }
}

#[test]
fn a_misaligned_mapping_shares_the_frames_but_maps_base_pages() {
    // Process 2 maps object pages 0..16 one page above a block boundary: its virtual block
    // index and the object offset differ (mod 16), so its pages are never properly placed.
    for extra in ["", "superpages = \"none\"\npartial_subblock = true\n"] {
        let (s, st) = run(&design(extra), &two_mappings(READ | FILE, [0, 1]));
        assert_eq!((st.os.page_cache.frames, st.os.page_cache.hits), (16, 16), "{extra:?}");
        assert_eq!((st.os.reservations, st.os.live_reservations, st.os.frames_in_use), (1, 1, 16), "{extra:?}");
        let r = frame(&s, 1, base(1));
        for p in 0..BLOCK {
            assert_eq!(frame(&s, 2, base(2) + (p + 1) * PAGE), r + p, "{extra:?}: page {p} shared");
            assert_eq!(mapped_size(&s, 2, base(2) + (p + 1) * PAGE), PageSize::SIZE_4K, "{extra:?}: page {p}");
        }
        assert_eq!(mapped_size(&s, 1, base(1)), sp64k(), "{extra:?}");
        // Process 2's two blocks refer to no reservation (the object's does not align with them).
        for at in [base(2) + PAGE, base(2) + BLOCK * PAGE] {
            assert_eq!(s.os().reservation(Asid(2), Vpn(at / PAGE)), None, "{extra:?}: {at:#x}");
        }
        assert_eq!(st.os.resident_pages, 32, "{extra:?}");
        assert_eq!(st.os.placed_pages, 16, "{extra:?}: process 1's pages only");
        match extra {
            // Process 1: one superpage; process 2: none.
            "" => assert_eq!((st.os.superpages, st.os.promotions, st.os.partial_subblock_ptes), (1, 1, 0)),
            // Process 1: one partial-subblock PTE (grown page by page); process 2: none.
            _ => assert_eq!((st.os.superpages, st.os.promotions, st.os.partial_subblock_ptes), (0, 0, 1)),
        }
        // Process 2's 16 base pages, 16 TLB misses; process 1's 16 first touches.
        assert_eq!((st.lookups, st.tlb[0].misses), (32, 32), "{extra:?}");
    }
}

#[test]
fn a_store_to_a_private_file_superpage_copies_one_page_and_demotes_the_writer() {
    // Process 1 maps the block shared and process 2 private and writable; both promote (as in
    // the first test). Process 2 then stores into page 3.
    let mut t = two_mappings(READ | WRITE | FILE, [0, 0]);
    t[2] = Record::Map { start: base(1), len: BLOCK * PAGE, flags: READ | WRITE | SHARED | FILE };
    t.push(store(base(2) + 3 * PAGE));
    // Then process 2 loads every page again.
    t.extend(loads(base(2), BLOCK));
    let (s, st) = run(&design(""), &t);
    let r = frame(&s, 1, base(1));
    // The copy goes to a new reservation of process 2's own, in its properly placed frame; the
    // block's other 15 pages stay on the object's frames, so it is mapped by base PTEs.
    let own = frame(&s, 2, base(2) + 3 * PAGE) - 3;
    assert_eq!(own % BLOCK, 0);
    assert_ne!(own, r);
    assert_eq!(s.os().reservation(Asid(2), Vpn(base(2) / PAGE)).map(|p| p.0), Some(own));
    for p in (0..BLOCK).filter(|&p| p != 3) {
        assert_eq!(frame(&s, 2, base(2) + p * PAGE), r + p, "page {p}");
        assert_eq!(mapped_size(&s, 2, base(2) + p * PAGE), PageSize::SIZE_4K, "page {p}");
    }
    assert_eq!(frame(&s, 1, base(1) + 3 * PAGE), r + 3, "the shared mapping keeps the cache's page");
    assert_eq!(mapped_size(&s, 1, base(1)), sp64k(), "process 1 keeps its superpage");
    assert_eq!(st.os.cow_copies, 1);
    assert_eq!((st.os.promotions, st.os.demotions, st.os.superpages), (2, 1, 1));
    assert_eq!((st.os.reservations, st.os.live_reservations, st.os.frames_in_use), (2, 2, 32));
    // Placed: process 1's 16 and process 2's copy.
    assert_eq!((st.os.resident_pages, st.os.placed_pages), (32, 17));
    // TLB: 32 first-touch misses; the store hits process 2's superpage, copies (the block's
    // entries are shot down) and looks page 3 up again (a miss); the second pass misses the 15
    // other pages (base PTEs now) and hits page 3.
    assert_eq!(st.lookups, 32 + 1 + 1 + 16);
    assert_eq!(st.tlb[0].misses, 32 + 1 + 15);
}

#[test]
fn a_private_block_written_whole_is_promoted_again_in_the_writers_reservation() {
    // One process maps the block private and writable, loads every page (promotion over the
    // object's frames), then stores into every page: 16 copies, all into its own reservation.
    let mut t = vec![switch(1)];
    t.extend(map_object(5, 0, base(1), BLOCK, READ | WRITE | FILE));
    t.extend(loads(base(1), BLOCK));
    t.extend((0..BLOCK).map(|p| store(base(1) + p * PAGE)));
    let (s, st) = run(&design(""), &t);
    let own = frame(&s, 1, base(1));
    assert_eq!(own % BLOCK, 0);
    for p in 0..BLOCK {
        assert_eq!(frame(&s, 1, base(1) + p * PAGE), own + p, "page {p}");
    }
    assert_eq!(st.os.cow_copies, 16);
    // Promoted over the object's frames, demoted by the first copy, promoted again by the last.
    assert_eq!((st.os.promotions, st.os.demotions, st.os.superpages), (2, 1, 1));
    assert_eq!(mapped_size(&s, 1, base(1)), sp64k());
    // The object's reservation (the cache keeps it) and the process's own.
    assert_eq!((st.os.reservations, st.os.live_reservations, st.os.frames_in_use), (2, 2, 32));
    assert_eq!((st.os.page_cache.frames, st.os.placed_pages), (16, 16));
}

/// Process 1 stores into the 16 pages of an anonymous 64 KB-aligned block and forks 7; 7
/// stores into page 2, then 1 stores into page 2 and loads every page.
fn fork_trace() -> Vec<Record> {
    let a = 0x5000_0000u64;
    let mut t = vec![Record::Process { asid: 1 }];
    t.extend((0..BLOCK).map(|p| store(a + p * PAGE)));
    t.push(Record::Fork { child: 7 });
    t.extend([switch(7), store(a + 2 * PAGE)]);
    t.extend([switch(1), store(a + 2 * PAGE)]);
    t.extend(loads(a, BLOCK));
    t
}

#[test]
fn fork_shares_a_superpage_until_a_store_copies_into_the_writers_reservation() {
    let a = 0x5000_0000u64;
    let (s, st) = run(&design(""), &fork_trace());
    let r = frame(&s, 1, a);
    assert_eq!(r % BLOCK, 0);
    // The child's store copies page 2 into a new reservation of its own; its other pages stay
    // on the parent's frames, mapped by base PTEs.
    let own = frame(&s, 7, a + 2 * PAGE) - 2;
    assert_eq!(own % BLOCK, 0);
    assert_ne!(own, r);
    for p in (0..BLOCK).filter(|&p| p != 2) {
        assert_eq!(frame(&s, 7, a + p * PAGE), r + p, "page {p}");
        assert_eq!(mapped_size(&s, 7, a + p * PAGE), PageSize::SIZE_4K, "page {p}");
    }
    // The parent is then the last holder of its page 2: it writes in place, keeps its frames
    // and its superpage.
    for p in 0..BLOCK {
        assert_eq!(frame(&s, 1, a + p * PAGE), r + p, "page {p}");
    }
    assert_eq!(mapped_size(&s, 1, a), sp64k());
    assert_eq!(st.os.cow_copies, 1);
    // Promotion of the parent's block (the child's superpage is made by the fork, not
    // promoted), then the child's demotion.
    assert_eq!((st.os.promotions, st.os.demotions, st.os.superpages), (1, 1, 1));
    assert_eq!((st.os.reservations, st.os.live_reservations, st.os.frames_in_use), (2, 2, 32));
    assert_eq!((st.os.resident_pages, st.os.placed_pages), (32, 17));
    assert_eq!((st.os.page_cache.frames, st.os.page_cache.hits), (0, 0), "no file");
    assert_eq!(st.page_faults, 16, "the child finds the parent's pages mapped");
}

#[test]
fn without_the_page_cache_a_forked_superpage_is_shared_for_good() {
    let a = 0x5000_0000u64;
    let (s, st) = run(&design("page_cache = false\n"), &fork_trace());
    for p in 0..BLOCK {
        assert_eq!(frame(&s, 7, a + p * PAGE), frame(&s, 1, a + p * PAGE), "page {p}");
    }
    assert_eq!(mapped_size(&s, 7, a), sp64k());
    assert_eq!(st.os.cow_copies, 0);
    assert_eq!((st.os.promotions, st.os.demotions, st.os.superpages), (1, 0, 2));
    assert_eq!((st.os.reservations, st.os.live_reservations, st.os.frames_in_use), (1, 1, 16));
}

#[test]
fn without_the_page_cache_file_mappings_take_reservations_of_their_own() {
    // The first test's trace: each process's block is reserved and placed on its own.
    let (s, st) = run(&design("page_cache = false\n"), &two_mappings(READ | FILE, [0, 0]));
    assert_ne!(frame(&s, 1, base(1)), frame(&s, 2, base(2)));
    assert_eq!((st.os.page_cache.frames, st.os.page_cache.hits), (0, 0));
    assert_eq!((st.os.reservations, st.os.frames_in_use, st.os.superpages), (2, 32, 2));
}

#[test]
fn static_superpages_read_a_whole_aligned_file_block_in_at_the_first_fault() {
    // Static page-size assignment: process 1's first fault reads the whole block in (16
    // misses) and maps it as a superpage; process 2's first fault finds the 16 pages (16 hits).
    let mut t = vec![switch(1)];
    t.extend(map_object(5, 0, base(1), BLOCK, READ | FILE));
    t.push(load(base(1) + 7 * PAGE));
    t.push(switch(2));
    t.extend(map_object(5, 0, base(2), BLOCK, READ | FILE));
    t.extend(loads(base(2), BLOCK));
    let (s, st) = run(&design("superpages = \"static\"\n"), &t);
    assert_eq!((st.os.page_cache.frames, st.os.page_cache.hits, st.page_faults), (16, 16, 2));
    assert_eq!((st.os.superpages, st.os.promotions, st.os.reservations, st.os.frames_in_use), (2, 0, 1, 16));
    for p in 0..BLOCK {
        assert_eq!(frame(&s, 2, base(2) + p * PAGE), frame(&s, 1, base(1)) + p, "page {p}");
    }
    // One miss per process: the superpage entry serves every other load.
    assert_eq!((st.lookups, st.tlb[0].misses), (17, 2));
}

#[test]
fn unmapping_everything_gives_back_every_reservation_but_the_caches() {
    // The fork trace (reservations R, the parent's, and R', the child's after its copy) and a
    // private writable file block of process 1 written in one page (the object's reservation
    // and process 1's own for the copy); then both processes unmap everything.
    let mut t = fork_trace();
    t.extend(map_object(5, 0, base(1), BLOCK, READ | WRITE | FILE));
    t.extend(loads(base(1), BLOCK));
    t.push(store(base(1) + 9 * PAGE));
    let (mut s, st) = run(&design(""), &t);
    assert_eq!((st.os.reservations, st.os.live_reservations, st.os.frames_in_use), (4, 4, 64));
    assert_eq!(st.os.cow_copies, 2);
    let all = Record::Unmap { start: 0, len: 1 << 47 };
    s.process(&[switch(7), all, switch(1), all]).unwrap();
    s.check_translations().unwrap();
    let st = s.stats();
    // Only the object's reservation is left, held by the cache with its 16 frames.
    assert_eq!((st.os.resident_pages, st.os.placed_pages, st.os.superpages), (0, 0, 0));
    assert_eq!((st.os.live_reservations, st.os.frames_in_use, st.os.page_cache.frames), (1, 16, 16));
}

#[test]
fn an_object_extent_whose_reservation_fails_shares_single_frames() {
    // Every reservation fails: the object's extent is tried once (one failure, remembered), its
    // pages take single frames, which both mappings share, and no block is placed.
    let (s, st) = run(&design("reservation_failure = 1.0\n"), &two_mappings(READ | FILE, [0, 0]));
    assert_eq!((st.os.reservations, st.os.reservation_failures, st.os.live_reservations), (0, 1, 0));
    assert_eq!((st.os.page_cache.frames, st.os.page_cache.hits, st.os.frames_in_use), (16, 16, 16));
    assert_eq!((st.os.placed_pages, st.os.superpages, st.os.promotions), (0, 0, 0));
    for p in 0..BLOCK {
        assert_eq!(frame(&s, 2, base(2) + p * PAGE), frame(&s, 1, base(1) + p * PAGE), "page {p}");
        assert_eq!(mapped_size(&s, 2, base(2) + p * PAGE), PageSize::SIZE_4K, "page {p}");
    }
}
