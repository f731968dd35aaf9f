//! The loop of plain designs (`engine/plain.rs`) against the general loop: on random designs
//! that qualify (any geometry and policy, split or unified level 1, radix, hashed or clustered
//! tables, tagged or flushed ASIDs, reservation and superpage OS policies) and random record
//! streams with every kind of event, both loops must give identical counters, identical
//! failures and identical TLB contents, whether the plain loop reads the page words of
//! `engine::run`'s reader thread (with every record, or from an xtr reader that writes only the
//! records the words send down the general step) or makes them itself (`System::process`), and
//! whichever build of a fully associative LRU TLB's loop its batches take. The streams map
//! objects private and writable and fork, so that under the page cache stores copy on write,
//! which a fully associative LRU TLB's loop tests itself.

use proptest::prelude::*;
use xlat::config::Config;
use xlat::engine::{self, RunOptions, System};
use xlat::trace::map_flags::{FILE, READ, SHARED, WRITE};
use xlat::trace::open::Compression;
use xlat::trace::xtr::{encode_to_vec, XtrReader};
use xlat::trace::{Kind, ReaderStats, Record, TraceError, TraceReader};

struct VecReader(Vec<Record>, usize);

impl TraceReader for VecReader {
    fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, TraceError> {
        out.clear();
        let n = (self.0.len() - self.1).min(max).min(13);
        out.extend_from_slice(&self.0[self.1..self.1 + n]);
        self.1 += n;
        Ok(n)
    }
    fn stats(&self) -> ReaderStats {
        ReaderStats::default()
    }
}

#[derive(Clone, Debug)]
struct Design {
    entries: u32,
    ways: Option<u32>,
    policy: &'static str,
    split: bool,
    table: &'static str,
    flush: bool,
    os: &'static str,
    va_bits: u32,
}

impl Design {
    fn toml(&self) -> String {
        let ways = self.ways.map(|w| format!("ways = {w}\n")).unwrap_or_default();
        let tlb = |name: &str, serves: &str| {
            format!(
                "[[tlb]]\nname = \"{name}\"\nserves = \"{serves}\"\nentries = {}\n{ways}policy = \"{}\"\nseed = 3\n",
                self.entries, self.policy
            )
        };
        let tlbs = if self.split { tlb("I", "instruction") + &tlb("D", "data") } else { tlb("L1", "unified") };
        format!(
            "name = \"p\"\nasid = \"{}\"\n{tlbs}[page_table]\nkind = \"{}\"\nva_bits = {}\n[os]\nmemory_bytes = 67108864\n{}\n",
            if self.flush { "flush" } else { "tagged" },
            self.table,
            self.va_bits,
            self.os
        )
    }
}

fn design() -> impl Strategy<Value = Design> {
    (
        prop::sample::select(vec![4u32, 16, 32, 32, 64, 128]),
        // Fully associative LRU TLBs (the common case, with a path of their own) most often.
        prop::sample::select(vec![None, None, None, Some(1u32), Some(2), Some(4)]),
        prop::sample::select(vec!["lru", "lru", "lru", "fifo", "random", "nru", "plru"]),
        any::<bool>(),
        prop::sample::select(vec!["radix", "hashed", "clustered"]),
        any::<bool>(),
        prop::sample::select(vec![
            "",
            "reservation = true\nblock_pages = 16",
            "superpages = \"promote\"\nreservation = true\nblock_pages = 16",
            "frame_allocator = \"random\"\nseed = 9",
            "page_cache = false",
        ]),
        prop::sample::select(vec![48u32, 30]),
    )
        .prop_map(|(entries, ways, policy, split, table, flush, os, va_bits)| Design {
            entries,
            ways,
            policy,
            split,
            table,
            flush,
            os,
            va_bits,
        })
}

fn record() -> impl Strategy<Value = Record> {
    // Mostly a hot set about the size of the TLBs, often one of three pages (runs of hits in
    // the TLBs' recent-hit filters, instruction and data references to the same pages),
    // sometimes anywhere.
    let page = prop_oneof![4 => 0u64..48, 3 => 0u64..3, 1 => 0u64..600];
    prop_oneof![
        12 => (0u8..4, page.clone(), 0u64..4096, prop::sample::select(vec![1u32, 4, 8, 64, 5000]))
            .prop_map(|(k, p, off, size)| Record::Access {
                kind: [Kind::Ifetch, Kind::Load, Kind::Store, Kind::Modify][k as usize],
                size,
                // A few references beyond a 30-bit address space stop such designs.
                addr: if p == 599 { 1 << 31 } else { (p << 12) + off },
            }),
        1 => (1u32..4).prop_map(|asid| Record::ContextSwitch { asid }),
        1 => (1u32..4).prop_map(|asid| Record::Process { asid }),
        1 => (page.clone(), 1u64..40).prop_map(|(p, n)| Record::Unmap { start: p << 12, len: n << 12 }),
        // Anonymous maps, and maps of objects (after a `Record::Object`) private and writable
        // (copy on write under the page cache), shared, or read-only.
        1 => (page, 1u64..40, prop::sample::select(vec![0u32, READ | WRITE | FILE, READ | WRITE | SHARED | FILE, READ | FILE]))
            .prop_map(|(p, n, flags)| Record::Map { start: p << 12, len: n << 12, flags }),
        1 => (0u32..3, 0u64..8).prop_map(|(id, p)| Record::Object { id, offset: p << 12 }),
        1 => (4u32..6).prop_map(|child| Record::Fork { child }),
        1 => (1u32..6).prop_map(|asid| Record::Exit { asid }),
    ]
}

/// Random records, then a steady phase (references only, to a set of pages larger or smaller
/// than the TLBs, so that the page table stops changing and misses replay memoised walks), then
/// random records again.
fn stream() -> impl Strategy<Value = Vec<Record>> {
    let steady =
        (8u64..300, prop::collection::vec((0u8..4, 0u64..300, 0u64..4096), 0..4000)).prop_map(|(pages, refs)| {
            refs.into_iter()
                .map(|(k, p, off)| Record::Access {
                    kind: [Kind::Ifetch, Kind::Load, Kind::Store, Kind::Modify][k as usize],
                    size: 4,
                    addr: ((p % pages) << 12) + off.min(4092),
                })
                .collect::<Vec<_>>()
        });
    (prop::collection::vec(record(), 1..3000), steady, prop::collection::vec(record(), 0..300)).prop_map(
        |(mut records, steady, tail)| {
            records.extend(steady);
            records.extend(tail);
            records
        },
    )
}

proptest! {
    #![proptest_config(crate::proptest_cases(200))]

    #[test]
    fn plain_loop_equals_general_loop(d in design(), records in stream()) {
        let config = Config::from_toml(&d.toml(), "plain").unwrap();
        let mut plain = System::new(&config).unwrap();
        prop_assert!(plain.is_plain_loop(), "{d:?} should take the plain loop");
        let mut general = System::new(&config).unwrap();
        general.use_general_loop();
        prop_assert!(!general.is_plain_loop());
        // `run` feeds the plain design its reader's page words; `process` makes them itself.
        let mut direct = System::new(&config).unwrap();
        for chunk in records.chunks(13) {
            if direct.process(chunk).is_err() {
                break;
            }
        }
        // Alone on an xtr stream, the plain design's reader writes only the records whose
        // page word sends them down the general step (`BatchWords::all_records`).
        let mut alone = vec![System::new(&config).unwrap()];
        let bytes = encode_to_vec(&records, Compression::None).unwrap();
        let mut xtr = XtrReader::new(&bytes[..], "t.xtr").unwrap();
        engine::run(&mut xtr, &mut alone, RunOptions::default(), |_| {}).unwrap();
        // A fully associative LRU TLB's loop has two builds, one chosen per batch by speed:
        // each taken alone too.
        let (mut near, mut ahead) = (System::new(&config).unwrap(), System::new(&config).unwrap());
        near.fix_fa_lru_build(true);
        ahead.fix_fa_lru_build(false);
        let mut systems = vec![plain, general, near, ahead];
        engine::run(&mut VecReader(records, 0), &mut systems, RunOptions::default(), |_| {}).unwrap();
        ahead = systems.pop().unwrap();
        near = systems.pop().unwrap();
        general = systems.pop().unwrap();
        plain = systems.pop().unwrap();
        for fixed in [&near, &ahead] {
            prop_assert_eq!(fixed.stats(), general.stats());
            prop_assert_eq!(format!("{:?}", fixed.failure()), format!("{:?}", general.failure()));
            for (p, g) in fixed.structures().iter().zip(general.structures()) {
                prop_assert_eq!(p.tlb.translations(), g.tlb.translations());
            }
        }
        prop_assert_eq!(plain.stats(), general.stats());
        prop_assert_eq!(direct.stats(), general.stats());
        prop_assert_eq!(alone[0].stats(), general.stats());
        prop_assert_eq!(format!("{:?}", plain.failure()), format!("{:?}", general.failure()));
        prop_assert_eq!(format!("{:?}", alone[0].failure()), format!("{:?}", general.failure()));
        prop_assert_eq!(plain.page_table_peak(), general.page_table_peak());
        for (p, g) in plain.structures().iter().zip(general.structures()) {
            prop_assert_eq!(p.tlb.translations(), g.tlb.translations());
        }
        prop_assert!(plain.check_translations().is_ok());
    }
}

#[test]
fn designs_with_other_models_take_the_general_loop() {
    let base = "name = \"g\"\n[[tlb]]\nname = \"L1\"\nentries = 64\n";
    let plain = Config::from_toml(base, "t").unwrap();
    assert!(System::new(&plain).unwrap().is_plain_loop());
    for extra in [
        // Two levels.
        "[[tlb]]\nname = \"L2\"\nlevel = 2\nentries = 512\nways = 4\n",
        // Caches.
        "[[cache]]\nname = \"L1D\"\nsize = 32768\nways = 8\nline = 64\n",
        // A superpage TLB format.
        "",
    ] {
        let text = if extra.is_empty() {
            base.replace("entries = 64\n", "entries = 64\nformat = \"superpage\"\n")
        } else {
            format!("{base}{extra}")
        };
        let c = Config::from_toml(&text, "t").unwrap();
        assert!(!System::new(&c).unwrap().is_plain_loop(), "{text}");
    }
    let linear = Config::from_toml(&format!("{base}[page_table]\nkind = \"linear\"\n"), "t").unwrap();
    assert!(!System::new(&linear).unwrap().is_plain_loop());
}
