//! Summary statistics of a trace (`xlat info`).

use std::collections::{BTreeSet, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use serde::Serialize;

use super::{Kind, Record, TraceError, TraceReader, BATCH};

/// Page size used to count distinct pages.
pub const INFO_PAGE_SHIFT: u32 = 12;

/// Accesses per kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KindCounts {
    /// Instruction fetches.
    pub ifetch: u64,
    /// Loads.
    pub load: u64,
    /// Stores.
    pub store: u64,
    /// Modifies.
    pub modify: u64,
}

impl KindCounts {
    /// The count for `kind`.
    pub fn get(&self, kind: Kind) -> u64 {
        match kind {
            Kind::Ifetch => self.ifetch,
            Kind::Load => self.load,
            Kind::Store => self.store,
            Kind::Modify => self.modify,
        }
    }

    /// All kinds together.
    pub fn total(&self) -> u64 {
        self.ifetch + self.load + self.store + self.modify
    }
}

/// Events per kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EventCounts {
    /// `Record::Process`.
    pub process: u64,
    /// `Record::ContextSwitch`.
    pub context_switch: u64,
    /// `Record::Map`.
    pub map: u64,
    /// `Record::Unmap`.
    pub unmap: u64,
    /// `Record::Fork`.
    pub fork: u64,
    /// `Record::Exit`.
    pub exit: u64,
    /// `Record::Ipc`.
    pub ipc: u64,
    /// `Record::Marker`.
    pub marker: u64,
    /// `Record::Thread`.
    pub thread: u64,
    /// `Record::Object` (the object of the next map).
    pub object: u64,
    /// `Record::Syscall`.
    pub syscall: u64,
    /// `Record::Protect` (`mprotect`).
    pub protect: u64,
    /// `Record::Discard` (`madvise` that drops pages).
    pub discard: u64,
}

impl EventCounts {
    /// All events together.
    pub fn total(&self) -> u64 {
        self.process
            + self.context_switch
            + self.map
            + self.unmap
            + self.fork
            + self.exit
            + self.ipc
            + self.marker
            + self.thread
            + self.object
            + self.syscall
            + self.protect
            + self.discard
    }
}

/// What [`info`] found in a trace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TraceInfo {
    /// Records of any kind.
    pub records: u64,
    /// Memory references (accesses) in total.
    pub references: u64,
    /// References by kind.
    pub by_kind: KindCounts,
    /// Sum of the access sizes in bytes.
    pub bytes_accessed: u64,
    /// Distinct 4 KB pages touched, counted per process (a page touched by two ASIDs counts
    /// twice); an access that crosses a page boundary touches both pages.
    pub distinct_pages: u64,
    /// `distinct_pages` × 4096.
    pub footprint_bytes: u64,
    /// Distinct ASIDs: those named by Process, ContextSwitch and Fork events, plus the default
    /// ASID 0 if accesses, Map, Unmap, Fork or Ipc records come before the first Process or
    /// ContextSwitch.
    pub processes: u64,
    /// Those ASIDs, ascending.
    pub asids: Vec<u32>,
    /// Events by kind.
    pub events: EventCounts,
    /// Distinct threads named by `Thread` records (a thread ID per ASID).
    pub threads: u64,
    /// Programs exec'd by traced processes and not traced themselves (from the trace's
    /// metadata: `xlat trace` without `--children`).
    pub untraced_execs: Vec<String>,
    /// Mapped objects the trace names (`PATH` or `anonymous shared memory`, with how many maps
    /// named each), from its metadata.
    pub objects: Vec<(u32, String, u64)>,
    /// Lowest address accessed.
    pub min_addr: Option<u64>,
    /// Highest byte accessed (`addr + size - 1`, saturating).
    pub max_addr: Option<u64>,
    /// Bytes of decompressed input read.
    pub input_bytes: u64,
    /// Input lines or records skipped by the reader.
    pub skipped: u64,
}

/// A multiplicative hasher for page keys (keys are not attacker-controlled).
#[derive(Default)]
struct PageHasher(u64);

impl Hasher for PageHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(26) ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
}

/// Reads `reader` to the end and summarises it.
pub fn info(reader: &mut dyn TraceReader) -> Result<TraceInfo, TraceError> {
    let mut t = TraceInfo::default();
    let mut pages: HashSet<(u32, u64), BuildHasherDefault<PageHasher>> = HashSet::default();
    let mut asids = BTreeSet::new();
    let mut threads = BTreeSet::new();
    let mut asid = 0u32;
    let mut explicit = false;
    let mut last_key = [(u32::MAX, u64::MAX); 4];
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    let mut batch = Vec::with_capacity(BATCH);
    let mut object_maps: std::collections::BTreeMap<u32, u64> = std::collections::BTreeMap::new();
    while reader.read_batch(&mut batch, BATCH)? > 0 {
        t.records += batch.len() as u64;
        for r in &batch {
            match *r {
                Record::Access { kind, size, addr } => {
                    let c = match kind {
                        Kind::Ifetch => &mut t.by_kind.ifetch,
                        Kind::Load => &mut t.by_kind.load,
                        Kind::Store => &mut t.by_kind.store,
                        Kind::Modify => &mut t.by_kind.modify,
                    };
                    *c += 1;
                    t.bytes_accessed += size as u64;
                    let last = addr.saturating_add(size.max(1) as u64 - 1);
                    lo = lo.min(addr);
                    hi = hi.max(last);
                    let (first_page, last_page) = (addr >> INFO_PAGE_SHIFT, last >> INFO_PAGE_SHIFT);
                    let key = (asid, first_page);
                    if last_key[kind as usize] != key || first_page != last_page {
                        last_key[kind as usize] = key;
                        for p in first_page..=last_page {
                            pages.insert((asid, p));
                        }
                    }
                    if !explicit {
                        asids.insert(asid);
                    }
                }
                Record::Process { asid: a } => {
                    t.events.process += 1;
                    asid = a;
                    explicit = true;
                    asids.insert(a);
                }
                Record::ContextSwitch { asid: a } => {
                    t.events.context_switch += 1;
                    asid = a;
                    explicit = true;
                    asids.insert(a);
                }
                Record::Fork { child } => {
                    t.events.fork += 1;
                    asids.insert(child);
                    if !explicit {
                        asids.insert(asid);
                    }
                }
                Record::Syscall { .. } => t.events.syscall += 1,
                Record::Object { id, .. } => {
                    t.events.object += 1;
                    *object_maps.entry(id).or_insert(0u64) += 1;
                }
                Record::Map { .. } | Record::Unmap { .. } | Record::Protect { .. } | Record::Discard { .. } => {
                    let e = &mut t.events;
                    *match r {
                        Record::Map { .. } => &mut e.map,
                        Record::Unmap { .. } => &mut e.unmap,
                        Record::Protect { .. } => &mut e.protect,
                        _ => &mut e.discard,
                    } += 1;
                    if !explicit {
                        asids.insert(asid);
                    }
                }
                Record::Ipc { .. } => {
                    t.events.ipc += 1;
                    if !explicit {
                        asids.insert(asid);
                    }
                }
                Record::Exit { .. } => t.events.exit += 1,
                Record::Marker { .. } => t.events.marker += 1,
                Record::Thread { tid } => {
                    t.events.thread += 1;
                    threads.insert((asid, tid));
                }
            }
        }
    }
    t.references = t.by_kind.total();
    t.distinct_pages = pages.len() as u64;
    t.footprint_bytes = t.distinct_pages << INFO_PAGE_SHIFT;
    t.asids = asids.into_iter().collect();
    t.processes = t.asids.len() as u64;
    t.threads = threads.len() as u64;
    let notes = reader.notes();
    t.untraced_execs = notes.untraced_execs;
    t.objects = object_maps
        .iter()
        .map(|(&id, &n)| {
            let path = notes.objects.iter().find(|o| o.id == id).map_or(String::new(), |o| {
                if o.path.is_empty() {
                    "anonymous shared memory".to_string()
                } else {
                    o.path.clone()
                }
            });
            (id, path, n)
        })
        .collect();
    if t.references > 0 {
        t.min_addr = Some(lo);
        t.max_addr = Some(hi);
    }
    let st = reader.stats();
    t.input_bytes = st.bytes;
    t.skipped = st.skipped;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Vec2(Vec<Record>, bool);

    impl TraceReader for Vec2 {
        fn read_batch(&mut self, out: &mut Vec<Record>, _max: usize) -> Result<usize, TraceError> {
            out.clear();
            if !self.1 {
                self.1 = true;
                out.extend_from_slice(&self.0);
            }
            Ok(out.len())
        }

        fn stats(&self) -> super::super::ReaderStats {
            Default::default()
        }
    }

    #[test]
    fn counts() {
        let a = |kind, size, addr| Record::Access { kind, size, addr };
        let recs = vec![
            a(Kind::Ifetch, 4, 0x1000),
            a(Kind::Load, 8, 0x1ffc), // crosses into 0x2000
            Record::ContextSwitch { asid: 3 },
            a(Kind::Store, 8, 0x1000),
            Record::Fork { child: 4 },
            Record::Marker { id: 1 },
        ];
        let i = info(&mut Vec2(recs, false)).unwrap();
        assert_eq!(i.references, 3);
        assert_eq!(i.by_kind.load, 1);
        assert_eq!(i.distinct_pages, 3); // (0,1) (0,2) (3,1)
        assert_eq!(i.asids, vec![0, 3, 4]);
        assert_eq!(i.events.total(), 3);
        assert_eq!(i.min_addr, Some(0x1000));
        assert_eq!(i.max_addr, Some(0x2003));
        assert_eq!(i.bytes_accessed, 20);
    }
}
