//! The short VHPT's nested misses end to end: which page-table translations a miss inserts
//! (`page_table.nested_fill`), `walks.pt_fills`, and the per-process count of page-table
//! translations the TLB holds at the end of each time slice, against counts worked by hand.
//!
//! The design: 16 KB pages over 64-bit addresses, so 50 VPN bits in 11-bit levels: five levels,
//! four of them virtual arrays whose pages need TLB entries and a wired root. One fully
//! associative 64-entry TLB holds everything (nothing is evicted in these traces).

use xlat::config::Config;
use xlat::engine::System;
use xlat::report::design_json;
use xlat::trace::{Kind, Record};

fn load(addr: u64) -> Record {
    Record::Access { kind: Kind::Load, size: 8, addr }
}

fn design(fill: &str) -> System {
    let text = format!(
        "name = \"ia\"\npage_size = 16384\n[[tlb]]\nname = \"TLB\"\nentries = 64\nserves = \"unified\"\n\
         [page_table]\nkind = \"vhpt-short\"\nva_bits = 64\nnested_fill = \"{fill}\"\n\
         [layout]\nkind = \"itanium-linux\"\n[itanium]\n[os]\nmemory_bytes = 1073741824\n"
    );
    System::new(&Config::from_toml(&text, "test").unwrap()).unwrap()
}

const DATA: u64 = 0x60_0000_0000;
const PAGE: u64 = 16384;

#[test]
fn a_fresh_regions_miss_inserts_one_translation_in_leaf_mode_and_one_per_level_otherwise() {
    // Page A faults (its region has no table yet: the walk finds no root), then page A + 1, not
    // mapped yet either, is walked: its page of PTEs (the one A's fault made) has no translation
    // yet, and the walk ends at its invalid PTE (a second fault).
    //   leaf: walk 1 looks up the leaf page only (1 nested miss), finds no root; walk 2 looks
    //     it up again (1 nested miss), reads the four upper entries physically, inserts the leaf
    //     page's translation and reads the PTE: 2 nested misses, 1 insertion.
    //   every_level: walk 1 climbs all four virtual levels (4 nested misses) to the missing
    //     root; walk 2 climbs them again (4) and inserts each level's page on the way down:
    //     8 nested misses, 4 insertions.
    let t = [Record::Process { asid: 0 }, load(DATA), load(DATA + PAGE)];
    for (fill, nested, fills) in [("leaf", 2, 1), ("every_level", 8, 4)] {
        let mut s = design(fill);
        s.process(&t).unwrap();
        let st = s.stats();
        assert_eq!(st.walks.count, 2, "{fill}");
        assert_eq!(st.page_faults, 2, "{fill}");
        assert_eq!(st.walks.nested_misses, nested, "{fill}");
        assert_eq!(st.walks.pt_fills, fills, "{fill}");
        // Walk 2 read the root, the three upper levels below it and the PTE: 5 references; walk
        // 1 read nothing (no root).
        assert_eq!(st.walks.memory_refs, 5, "{fill}");
        assert_eq!(design_json(&s)["walks"]["pt_fills"], fills, "{fill}");
        // A third page under the same page of PTEs: its translation is held, no nested miss; one
        // reference (the invalid PTE), a fault.
        s.process(&[load(DATA + 2 * PAGE)]).unwrap();
        let st = s.stats();
        assert_eq!((st.walks.nested_misses, st.walks.pt_fills), (nested, fills), "{fill}");
        assert_eq!((st.walks.memory_refs, st.page_faults), (6, 3), "{fill}");
    }
}

#[test]
fn the_next_page_of_ptes_costs_one_insertion_in_either_mode() {
    // After the first page of PTEs is made, a page 2048 pages on (under the next page of PTEs,
    // the same level-2 page) and then its neighbour are walked, both faulting:
    //   the first finds no page of PTEs: 1 nested miss in both modes (every_level finds the
    //     level-2 page's translation held), nothing inserted;
    //   the second: the leaf page misses (1 nested miss), 1 insertion in both modes
    //     (every_level: the level-2 page hits).
    let far = DATA + 2048 * PAGE;
    let t = [Record::Process { asid: 0 }, load(DATA), load(DATA + PAGE), load(far), load(far + PAGE)];
    for (fill, nested, fills) in [("leaf", 2 + 2, 1 + 1), ("every_level", 8 + 2, 4 + 1)] {
        let mut s = design(fill);
        s.process(&t).unwrap();
        let st = s.stats();
        assert_eq!((st.walks.count, st.page_faults), (4, 4), "{fill}");
        assert_eq!((st.walks.nested_misses, st.walks.pt_fills), (nested, fills), "{fill}");
    }
}

#[test]
fn page_table_entries_are_counted_per_process_at_the_end_of_each_slice() {
    // Process 0 maps two pages under one page of PTEs, process 1 the same, then process 0 runs
    // again (a hit on its held page-table translation) to the end of the trace. Each process's
    // page-table translations: 1 (leaf) or 4 (every level), sampled when process 0 is switched
    // out, when process 1 is, and at the end for process 0.
    let t = [
        Record::Process { asid: 0 },
        load(DATA),
        load(DATA + PAGE),
        Record::ContextSwitch { asid: 1 },
        load(DATA),
        load(DATA + PAGE),
        Record::ContextSwitch { asid: 0 },
        load(DATA + 2 * PAGE),
    ];
    for (fill, per) in [("leaf", 1), ("every_level", 4)] {
        let mut s = design(fill);
        s.process(&t).unwrap();
        let e = s.stats().pt_entries;
        assert_eq!(e.len(), 2, "{fill}");
        assert_eq!((e[0].asid, e[0].samples, e[0].sum, e[0].peak), (0, 2, 2 * per, per), "{fill}");
        assert_eq!((e[1].asid, e[1].samples, e[1].sum, e[1].peak), (1, 1, per, per), "{fill}");
        assert_eq!(s.stats().walks.pt_fills, 2 * per, "{fill}");
    }
    // A slice without a reference is not sampled; a process that exits while running is
    // sampled before its entries go, and not again at the switch after.
    let t = [
        Record::Process { asid: 0 },
        load(DATA),
        load(DATA + PAGE),
        Record::Exit { asid: 0 },
        Record::ContextSwitch { asid: 1 },
        Record::ContextSwitch { asid: 2 },
        load(DATA),
    ];
    let mut s = design("leaf");
    s.process(&t).unwrap();
    let e = s.stats().pt_entries;
    assert_eq!(e.iter().map(|e| (e.asid, e.samples, e.sum)).collect::<Vec<_>>(), vec![(0, 1, 1), (2, 1, 0)]);
}
