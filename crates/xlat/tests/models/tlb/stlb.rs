//! The software TLB (`[stlb]`, bala94 §4) on hand-built address spaces, with counts worked out
//! by hand.

use xlat::config::Config;
use xlat::engine::System;
use xlat::trace::{Kind, Record};

fn load(addr: u64) -> Record {
    Record::Access { kind: Kind::Load, size: 8, addr }
}

fn design(text: &str) -> System {
    System::new(&Config::from_toml(text, "test").unwrap()).unwrap()
}

/// bala94 §4's software TLB behind the reserved partition of a linear table: a page-table page
/// translation evicted from the TLB is found there again instead of cascading up the table.
#[test]
fn a_software_tlb_catches_evicted_page_table_translations() {
    // Data pages in three 4 MB regions in turn, each touched once: every reference walks, and
    // each walk needs the page of PTEs of its region, which the one-entry partition has always
    // just replaced.
    let t: Vec<Record> = (0..100u64).flat_map(|k| (0..3u64).map(move |r| load(r * (4 << 20) + k * 4096))).collect();
    let base = "name = \"r3k\"\n[[tlb]]\nname = \"TLB\"\nentries = 513\nreserved = 1\nserves = \"unified\"\n\
                [page_table]\nkind = \"linear\"\nva_bits = 32\npte_bytes = 4\nbits_per_level = 10\n";
    let run = |extra: &str| {
        let mut s = design(&format!("{base}{extra}"));
        s.process(&t).unwrap();
        (s.stats().walks.count, s.stats().walks.nested_misses, s.stlb_stats())
    };
    let depths = |extra: &str| {
        let mut s = design(&format!("{base}{extra}"));
        s.process(&t).unwrap();
        s.stats().walks.by_depth
    };
    assert_eq!(run(""), (300, 300, None));
    // Every walk cascades once (an L2 miss in bala94's terms); with the software TLB, 294 stop
    // at the PTE load.
    assert_eq!(depths(""), [0, 300, 0, 0]);
    assert_eq!(depths("[stlb]\nentries = 16\nways = 1\n"), [294, 6, 0, 0]);
    // Each region's first walk faults before its page of PTEs exists (nothing is installed) and
    // its second finds it in neither table; from then on every lookup hits the software TLB.
    assert_eq!(run("[stlb]\nentries = 16\nways = 1\n"), (300, 6, Some((300, 294))));
    // Two entries, direct-mapped on the page's number: regions 0 and 2 collide.
    let (_, nested, Some((lookups, hits))) = run("[stlb]\nentries = 2\nways = 1\n") else { panic!() };
    assert_eq!((lookups, hits + nested), (300, 300));
    assert!(hits < 294, "collisions in a 2-entry table: {hits}");
}
