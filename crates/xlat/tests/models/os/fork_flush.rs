//! What a fork does to the parent's TLB entries (`os.fork_flush`), on hand-made record streams
//! whose misses, invalidations and long-VHPT probes are worked out by hand below each trace.

use xlat::config::Config;
use xlat::engine::System;
use xlat::trace::{Kind, Record};

fn load(addr: u64) -> Record {
    Record::Access { kind: Kind::Load, size: 8, addr }
}

fn fetch(addr: u64) -> Record {
    Record::Access { kind: Kind::Ifetch, size: 4, addr }
}

fn run(text: &str, records: &[Record]) -> System {
    let mut s = System::new(&Config::from_toml(text, "test").unwrap()).unwrap();
    s.process(records).unwrap();
    s
}

/// A 64-entry TLB over a radix table with 4 KB pages, no regions.
fn plain(flush: &str) -> String {
    format!(
        "name = \"t\"\n[[tlb]]\nname = \"L1\"\nentries = 64\n[page_table]\nkind = \"radix\"\n\
         [os]\nfork_flush = \"{flush}\"\n"
    )
}

/// Process 3 loads 2 pages; process 1 loads 3 pages, forks process 2 and loads them again;
/// process 3 loads its 2 pages again.
fn plain_trace() -> Vec<Record> {
    let mut t = vec![Record::ContextSwitch { asid: 3 }];
    t.extend((0..2).map(|p| load(0x9000_0000 + p * 4096)));
    t.push(Record::ContextSwitch { asid: 1 });
    t.extend((0..3).map(|p| load(0x1000_0000 + p * 4096)));
    t.push(Record::Fork { child: 2 });
    t.extend((0..3).map(|p| load(0x1000_0000 + p * 4096)));
    t.push(Record::ContextSwitch { asid: 3 });
    t.extend((0..2).map(|p| load(0x9000_0000 + p * 4096)));
    t
}

#[test]
fn a_parent_flush_costs_the_parent_exactly_its_pages_again() {
    // Cold misses: 2 (process 3) + 3 (process 1). Without a flush the parent's second pass and
    // process 3's hit; with one, the parent's 3 pages miss again and nothing else does.
    let none = run(&plain("none"), &plain_trace()).stats();
    assert_eq!((none.tlb[0].misses, none.tlb[0].invalidations), (5, 0));
    let parent = run(&plain("parent"), &plain_trace()).stats();
    assert_eq!((parent.tlb[0].misses, parent.tlb[0].invalidations), (8, 3));
    assert_eq!(parent.page_faults, 5, "the flush drops translations, not pages");
}

/// Itanium 2-like: 16 KB pages, one 48-entry unified TLB, a 256-entry long VHPT walked in
/// hardware over a radix table, Linux's region layout (fetches in region 2, loads in region 3).
fn itanium(flush: &str, share_text: bool) -> String {
    format!(
        "name = \"ia\"\npage_size = 16384\n[[tlb]]\nname = \"TLB\"\nentries = 48\nserves = \"unified\"\n\
         [page_table]\nkind = \"vhpt-long\"\nva_bits = 64\nvhpt_entries = 256\n[layout]\nkind = \"itanium-linux\"\n\
         [itanium]\nshare_text = {share_text}\n[os]\nmemory_bytes = 1073741824\nfork_flush = \"{flush}\"\n"
    )
}

/// Process 0 fetches one text page and loads two data pages, forks process 1, then touches the
/// three pages again. Their VPNs end in 8 zero bits but for the second data page's 2, and the
/// RIDs involved (context << 3 | region, contexts 1 to 3) are below 32, so the VHPT's index
/// (RID xor VPN) mod 256 never puts two of them in one slot.
fn itanium_trace() -> Vec<Record> {
    let touch = [fetch(0x40_0000), load(0x60_0000_0000), load(0x60_0000_0000 + 2 * 16384)];
    let mut t = vec![Record::Process { asid: 0 }];
    t.extend(touch);
    t.push(Record::Fork { child: 1 });
    t.extend(touch);
    t
}

#[test]
fn a_new_context_misses_the_tlb_and_the_vhpt_and_spares_shared_text() {
    // Before the fork: 3 TLB misses, each a VHPT probe that misses (cold) and inserts.
    // After it, by hand:
    //   none:        every touch hits: 3 misses, 3 probes, 3 VHPT misses.
    //   parent:      the 2 data pages' entries are gone (shared text's stays): 2 TLB misses
    //                more, whose probes hit the VHPT (same RID): 5 probes, 3 VHPT misses.
    //   new-context: the same 2 TLB misses, but the data region's RID is new, so both probes
    //                miss the VHPT too: 5 probes, 5 VHPT misses.
    // Without shared text, the text page is the parent's own and goes the same way: one more
    // TLB miss, probe and (new-context) VHPT miss.
    let cases = [
        ("none", true, 3, 0, 3, 3),
        ("parent", true, 5, 2, 5, 3),
        ("new-context", true, 5, 2, 5, 5),
        ("parent", false, 6, 3, 6, 3),
        ("new-context", false, 6, 3, 6, 6),
    ];
    for (flush, share, misses, invalidations, probes, vhpt_misses) in cases {
        let s = run(&itanium(flush, share), &itanium_trace());
        let st = s.stats();
        let v = s.vhpt_stats().unwrap();
        assert_eq!(
            (st.tlb[0].misses, st.tlb[0].invalidations, v.lookups, v.misses),
            (misses, invalidations, probes, vhpt_misses),
            "fork_flush = {flush}, share_text = {share}"
        );
        assert_eq!(st.page_faults, 3, "{flush}: the flush drops translations, not pages");
        s.check_translations().unwrap();
    }
}
