//! Address-space layouts: where each traced mapping lands in the simulated machine's address
//! space (`[layout]`, docs/layout.md).
//!
//! Traced programs use one flat 47-bit x86-64 space; the machines xlat models do not: Itanium
//! splits its 64-bit space into eight regions by the top three address bits (chapman03 §2.2), and
//! the MIPS R3000 has a 2 GB user space (kuseg). A layout places every mapping once, when it is
//! mapped (a `Map` record, or the first reference to an address no mapping covers), as a range
//! with an offset (`delta`); a reference then costs one range check against the last range used
//! by its kind (instruction or data), and a binary search when it leaves that range.
//!
//! - `identity`: the trace's addresses, unchanged (no layout object at all: zero cost).
//! - `itanium-linux`: Linux/ia64's regions (chapman03 §3.2, §3.3): mmap'd memory (libraries,
//!   files, anonymous mmaps) in region 1, the program's text in region 2, its data, heap and stack
//!   in region 3; with a shared region (`[itanium] shared_region`), shareable mappings go to one
//!   global single-address-space area of region 1 (one address per object, filled from the bottom,
//!   never freed) and the other mmaps to region 4. A mapping keeps its x86-64 offset inside its
//!   region (the region number is put above it).
//! - `compact32`: packs each process's mappings first-fit into `size` bytes (default 2 GB),
//!   keeping each address's offset modulo `align` (default 64 KB), so 32-bit machines run 64-bit
//!   traces; a trace that needs more than that fails the design with a one-line error.
//! - `sparse32`: a MIPS Unix's sparse 32-bit layout (bala94 §3; the MIPS memory layout of
//!   Patterson & Hennessy's Appendix A, bala94's reference [19]): the program's text from
//!   `text_base` (0x0040_0000), its data, bss and heap from `data_base` (0x1000_0000) growing
//!   up, the stack ending at the top of the `size`-byte user space (2 GB) growing down, and the
//!   mmap area (libraries, files, anonymous mmaps) below the stack's `stack_bytes`, growing
//!   down. A mapping that continues one of its own area (heap growth, a stack growing down)
//!   keeps that one's offset; others go first-fit in their area, keeping offsets modulo `align`.
//!
//! An address that no mapping covers (traces without map records, or memory the program had
//! before its first traced system call) gets an implicit mapping: `itanium-linux` puts
//! instruction fetches in region 2 and data in region 3; `compact32` places the aligned
//! `chunk`-byte block around it (default 1 MB) like a mapping; `sparse32` does too, in the text
//! or data area when it lies within `chunk` above the program's text or data (the executable's
//! data and bss), in the stack area when it holds the process's first data reference (the
//! stack pointer at start), else in the mmap area (the dynamic loader).

use crate::pt::ParamError;
use crate::trace::map_flags;
use serde::Deserialize;
use std::collections::HashMap;

/// `[layout] kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LayoutKind {
    /// The trace's addresses unchanged.
    #[default]
    Identity,
    /// Linux/ia64's regions.
    ItaniumLinux,
    /// Every process's mappings packed into a 32-bit space.
    Compact32,
    /// A MIPS Unix's sparse 32-bit layout: text low, data and heap above it, the stack and the
    /// mmap area at the top.
    Sparse32,
}

impl LayoutKind {
    /// Name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            LayoutKind::Identity => "identity",
            LayoutKind::ItaniumLinux => "itanium-linux",
            LayoutKind::Compact32 => "compact32",
            LayoutKind::Sparse32 => "sparse32",
        }
    }

    /// Whether the layout fits traces into a 32-bit user space of `layout.size` bytes.
    pub fn is_32bit(self) -> bool {
        matches!(self, LayoutKind::Compact32 | LayoutKind::Sparse32)
    }
}

/// `[layout]` section of a config.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LayoutConfig {
    /// Which layout.
    pub kind: LayoutKind,
    /// `compact32`: bytes of the user address space (default 2 GiB, the R3000's kuseg).
    pub size: u64,
    /// `compact32`: placement keeps each address's offset modulo this (power of two, default
    /// 64 KiB: the largest page a 32-bit design here uses).
    pub align: u64,
    /// `compact32`: bytes of the implicit mapping around an address no mapping covers (power of
    /// two, at least `align`; default 1 MiB).
    pub chunk: u64,
    /// `compact32`: lowest address used (default 64 KiB: page 0 stays unmapped). `sparse32`:
    /// lowest address a mapping that finds no room in its own area may take.
    pub base: u64,
    /// `sparse32`: where the program's text starts (default 0x0040_0000, the MIPS layout).
    pub text_base: u64,
    /// `sparse32`: where data, bss and heap start, growing up (default 0x1000_0000, the MIPS
    /// layout); the text area lies below it.
    pub data_base: u64,
    /// `sparse32`: bytes kept for the stack at the top of the space (it ends at `size`); the
    /// mmap area grows down from below them (default 8 MiB).
    pub stack_bytes: u64,
}

impl Default for LayoutConfig {
    fn default() -> Self {
        LayoutConfig {
            kind: LayoutKind::Identity,
            size: 2 << 30,
            align: 64 << 10,
            chunk: 1 << 20,
            base: 64 << 10,
            text_base: 0x0040_0000,
            data_base: 0x1000_0000,
            stack_bytes: 8 << 20,
        }
    }
}

impl LayoutConfig {
    /// Checks the parameters; errors name the key.
    pub fn validate(&self) -> Result<(), ParamError> {
        if !self.kind.is_32bit() {
            return Ok(());
        }
        if !self.align.is_power_of_two() || self.align < 4096 {
            return Err(ParamError::new("layout.align", format!("{} is not a power of two >= 4096", self.align)));
        }
        if !self.chunk.is_power_of_two() || self.chunk < self.align {
            return Err(ParamError::new(
                "layout.chunk",
                format!("{} is not a power of two >= layout.align ({})", self.chunk, self.align),
            ));
        }
        if self.size > 1 << 32 || self.base >= self.size || self.size - self.base < self.chunk {
            return Err(ParamError::new(
                "layout.size",
                format!(
                    "{} cannot hold a {}-byte chunk above layout.base {} within 4 GiB",
                    self.size, self.chunk, self.base
                ),
            ));
        }
        if self.base % self.align != 0 {
            return Err(ParamError::new("layout.base", format!("{} is not a multiple of layout.align", self.base)));
        }
        if self.kind == LayoutKind::Sparse32 {
            for (key, v) in [
                ("layout.text_base", self.text_base),
                ("layout.data_base", self.data_base),
                ("layout.stack_bytes", self.stack_bytes),
            ] {
                if v % self.align != 0 {
                    return Err(ParamError::new(key, format!("{v} is not a multiple of layout.align")));
                }
            }
            if self.text_base < self.base || self.text_base >= self.data_base {
                return Err(ParamError::new(
                    "layout.text_base",
                    format!(
                        "{:#x} must be at least layout.base ({:#x}) and below layout.data_base ({:#x})",
                        self.text_base, self.base, self.data_base
                    ),
                ));
            }
            if self.stack_bytes < self.align
                || self.stack_bytes >= self.size
                || self.data_base >= self.size - self.stack_bytes
                || self.size - self.stack_bytes - self.data_base < self.chunk
            {
                return Err(ParamError::new(
                    "layout.stack_bytes",
                    format!(
                        "{} leaves no {}-byte chunk between layout.data_base ({:#x}) and the stack below layout.size ({:#x})",
                        self.stack_bytes, self.chunk, self.data_base, self.size
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Itanium region numbers Linux uses for user memory (chapman03 §3.2, §3.3).
pub mod region {
    /// mmap'd memory; with a shared region, the global single-address-space area.
    pub const MMAP: u64 = 1;
    /// Program text.
    pub const TEXT: u64 = 2;
    /// Data, heap, stack.
    pub const DATA: u64 = 3;
    /// Private mmaps when region 1 is the shared region.
    pub const PRIVATE: u64 = 4;
}

/// A placed range: trace addresses `[start, end)` go to `addr + delta` (wrapping).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    start: u64,
    end: u64,
    delta: u64,
    /// Protection key of the range's pages: 0 = its region's own; shared-region objects have
    /// keys of their own ([`SHARED_KEY`] | object window).
    key: u32,
    /// `sparse32`: the area it was placed in ([`Area`] as a number; 0 for other layouts).
    area: u8,
}

/// Keys of shared-region objects have this bit (address-space numbers never do).
pub const SHARED_KEY: u32 = 1 << 31;

impl Range {
    const EMPTY: Range = Range { start: 0, end: 0, delta: 0, key: 0, area: 0 };

    #[inline(always)]
    fn contains(&self, addr: u64) -> bool {
        addr.wrapping_sub(self.start) < self.end.wrapping_sub(self.start)
    }
}

/// One process's placement.
#[derive(Clone, Debug, Default)]
struct Space {
    /// Placed ranges, sorted by `start`, disjoint.
    ranges: Vec<Range>,
    /// `compact32`, `sparse32`: laid-out `align` units in use `[lo, hi)` and the delta of the
    /// ranges placed there, sorted by `lo` (`sparse32` ranges of one delta may share units).
    used: Vec<(u64, u64, u64)>,
    /// `sparse32`: the program's text and data in trace addresses (`lo`, highest end).
    program: Option<(u64, u64)>,
    /// `sparse32`: a data reference was placed (the next implicit one is not the first).
    data_seen: bool,
    /// `sparse32`: laid-out address of the stack (its first reference, or the top of a
    /// mapping marked as the stack).
    stack: Option<u64>,
}

/// `sparse32` areas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Area {
    Text = 1,
    Data = 2,
    Mmap = 3,
    Stack = 4,
}

/// A mapping could not be placed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("layout {kind}: no room for {len} bytes at {addr:#x} of process {asid} in the {size}-byte address space (layout.size)")]
pub struct LayoutFull {
    /// Layout name.
    pub kind: &'static str,
    /// Process.
    pub asid: u32,
    /// Trace address of the mapping.
    pub addr: u64,
    /// Its length.
    pub len: u64,
    /// The space's size.
    pub size: u64,
}

/// Counters of a layout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LayoutStats {
    /// Mappings placed from `Map` records.
    pub mappings: u64,
    /// Implicit mappings (addresses no mapping covered).
    pub implicit: u64,
    /// Objects given an address in the shared region.
    pub shared_objects: u64,
}

/// The placement of every process's mappings (not used for `identity`).
#[derive(Clone, Debug)]
pub struct Layout {
    cfg: LayoutConfig,
    shared_region: bool,
    spaces: HashMap<u32, Space>,
    /// The current process and its space (taken out of `spaces` while current).
    asid: u32,
    cur: Space,
    /// Last range used by [instruction fetches, data].
    last: [Range; 2],
    /// The ranges each kind used before its last one, most recent first, checked before the
    /// search: data moves between stack, heap, static data and libraries. Copies, like `last`:
    /// ranges only grow while they are kept ([`Layout::insert_merged`]), and an unmap, a switch
    /// or an exit forgets them.
    before: [[Range; BEFORE]; 2],
    /// Shared region: each object's window `(base, bytes)` and the next free address.
    objects: HashMap<u32, (u64, u64, u32)>,
    shared_next: u64,
    /// Shared region: each window by its key: `(base, bytes, mapped)`, `mapped` the bytes of it
    /// that processes map (summed over the processes).
    windows: HashMap<u32, (u64, u64, u64)>,
    /// Windows no process maps any more, laid out `(start, len)`: their pages are to be unmapped
    /// ([`Layout::take_released`]).
    released: Vec<(u64, u64)>,
    /// Object of the next `Map` of the current process (`Record::Object`).
    pending: Option<(u32, u64)>,
    /// The delta of the last `Map` placed (laid-out address = trace address + delta).
    placed: u64,
    stats: LayoutStats,
}

/// Start of the shared area in region 1 (region offset 0 is left unmapped).
const SHARED_BASE: u64 = (region::MMAP << 61) | (1 << 32);

/// Ranges each kind keeps besides its last one. On the sort trace of the benchmark, under the
/// itanium-linux layout, the last range misses on 15% of references; then 3 more ranges hit 88%
/// of those misses, 5 hit 98.7% and 7 hit 99.9%, and 5 ran fastest.
const BEFORE: usize = 5;

impl Layout {
    /// A layout, or `None` for `identity`. `shared_region`: Itanium key-based sharing.
    pub fn new(cfg: &LayoutConfig, shared_region: bool) -> Option<Layout> {
        if cfg.kind == LayoutKind::Identity {
            return None;
        }
        Some(Layout {
            cfg: cfg.clone(),
            shared_region,
            spaces: HashMap::new(),
            asid: 0,
            cur: Space::default(),
            last: [Range::EMPTY; 2],
            before: [[Range::EMPTY; BEFORE]; 2],
            objects: HashMap::new(),
            shared_next: SHARED_BASE,
            windows: HashMap::new(),
            released: Vec::new(),
            pending: None,
            placed: 0,
            stats: LayoutStats::default(),
        })
    }

    /// Which layout.
    pub fn kind(&self) -> LayoutKind {
        self.cfg.kind
    }

    /// Counters.
    pub fn stats(&self) -> LayoutStats {
        self.stats
    }

    /// The laid-out address of trace address `addr` of the current process, referenced by an
    /// instruction fetch (`is_data` false) or data.
    #[inline(always)]
    pub fn place(&mut self, is_data: bool, addr: u64) -> Result<u64, LayoutFull> {
        let r = &self.last[is_data as usize];
        if r.contains(addr) {
            return Ok(addr.wrapping_add(r.delta));
        }
        self.place_slow(is_data, addr)
    }

    /// The protection key of the range the last reference of this kind fell in: 0 for its
    /// region's own key.
    #[inline(always)]
    pub fn last_key(&self, is_data: bool) -> u32 {
        self.last[is_data as usize].key
    }

    #[inline(never)]
    fn place_slow(&mut self, is_data: bool, addr: u64) -> Result<u64, LayoutFull> {
        let k = is_data as usize;
        let b = &mut self.before[k];
        let first_data = is_data && !self.cur.data_seen;
        self.cur.data_seen |= is_data;
        let r = if let Some(j) = b.iter().position(|r| r.contains(addr)) {
            let r = b[j];
            b.copy_within(0..j, 1);
            r
        } else {
            let r = match self.find(addr) {
                Some(i) => self.cur.ranges[i],
                None => self.implicit(is_data, first_data, addr)?,
            };
            let b = &mut self.before[k];
            b.copy_within(0..BEFORE - 1, 1);
            r
        };
        self.before[k][0] = self.last[k];
        self.last[k] = r;
        Ok(addr.wrapping_add(r.delta))
    }

    /// Forgets the ranges [`Layout::place`] keeps (the current space's ranges changed).
    fn forget(&mut self) {
        self.last = [Range::EMPTY; 2];
        self.before = [[Range::EMPTY; BEFORE]; 2];
    }

    fn find(&self, addr: u64) -> Option<usize> {
        let i = self.cur.ranges.partition_point(|r| r.start <= addr);
        (i > 0 && self.cur.ranges[i - 1].contains(addr)).then(|| i - 1)
    }

    /// An implicit mapping for an address no mapping covers.
    fn implicit(&mut self, is_data: bool, first_data: bool, addr: u64) -> Result<Range, LayoutFull> {
        self.stats.implicit += 1;
        match self.cfg.kind {
            LayoutKind::ItaniumLinux => {
                // Only up to the next placed range, so mappings made later stay exact.
                let vrn = if is_data { region::DATA } else { region::TEXT };
                let page = addr & !0xfff;
                let i = self.cur.ranges.partition_point(|r| r.start <= addr);
                let next = page.saturating_add(0x1000);
                let end = self.cur.ranges.get(i).map_or(next, |r| r.start.min(next));
                let r = Range { start: page, end, delta: vrn << 61, key: 0, area: 0 };
                Ok(self.insert_merged(i, r))
            }
            _ => {
                let c = self.cfg.chunk;
                let mut start = addr & !(c - 1);
                let mut end = start.saturating_add(c);
                // Clip to the neighbouring ranges.
                let i = self.cur.ranges.partition_point(|r| r.start <= addr);
                if i > 0 {
                    start = start.max(self.cur.ranges[i - 1].end);
                }
                if let Some(n) = self.cur.ranges.get(i) {
                    end = end.min(n.start);
                }
                if self.cfg.kind != LayoutKind::Sparse32 {
                    return self.map_compact(start, end - start);
                }
                let area = if self.near_program(addr) {
                    if is_data {
                        Area::Data
                    } else {
                        Area::Text
                    }
                } else if !is_data && self.cur.program.is_none() {
                    // No text was announced: the first fetch is the program's.
                    Area::Text
                } else if first_data && self.cur.stack.is_none() {
                    // A process's first data reference is to its stack (the loader's entry
                    // reads its arguments there, or a call pushes its return address).
                    Area::Stack
                } else {
                    Area::Mmap
                };
                let r = self.map_sparse(start, end - start, area)?;
                if area == Area::Stack {
                    self.cur.stack = Some(addr.wrapping_add(r.delta));
                }
                Ok(r)
            }
        }
    }

    /// Inserts `r` at `i` (where its start sorts), joined to a neighbour that ends where it starts
    /// or starts where it ends and places its pages alike (same delta and key): the pages placed
    /// are the same, and a lackey trace's implicit pages, placed one by one, make a handful of
    /// ranges, not one per page, so [`Layout::place`]'s last range keeps hitting. Returns the
    /// range that now holds `r`.
    fn insert_merged(&mut self, i: usize, r: Range) -> Range {
        let ranges = &mut self.cur.ranges;
        if i > 0 && ranges[i - 1].start >= r.start {
            // A range starts inside `r`'s page before the address (ranges of odd traces): `r`
            // sorts before it, unjoined.
            self.insert(r);
            return r;
        }
        let alike = |o: &Range| o.delta == r.delta && o.key == r.key;
        let before = i > 0 && ranges[i - 1].end == r.start && alike(&ranges[i - 1]);
        let after = ranges.get(i).is_some_and(|n| n.start == r.end && alike(n));
        match (before, after) {
            (true, true) => {
                ranges[i - 1].end = ranges[i].end;
                ranges.remove(i);
                ranges[i - 1]
            }
            (true, false) => {
                ranges[i - 1].end = r.end;
                ranges[i - 1]
            }
            (false, true) => {
                ranges[i].start = r.start;
                ranges[i]
            }
            (false, false) => {
                ranges.insert(i, r);
                r
            }
        }
    }

    fn insert(&mut self, r: Range) {
        let i = self.cur.ranges.partition_point(|x| x.start < r.start);
        self.cur.ranges.insert(i, r);
    }

    /// The next `Map` of the current process maps object `id` from byte `offset`.
    pub fn object(&mut self, id: u32, offset: u64) {
        self.pending = Some((id, offset));
    }

    /// Where the last `Map` landed: its laid-out start is its trace start plus this (wrapping).
    pub fn last_delta(&self) -> u64 {
        self.placed
    }

    /// The current process maps `[start, start + len)` with `flags` (`map_flags`): places it,
    /// replacing what it overlaps (whose laid-out ranges go to `unmapped`, to be unmapped).
    pub fn map(&mut self, start: u64, len: u64, flags: u32, unmapped: &mut Vec<(u64, u64)>) -> Result<(), LayoutFull> {
        let object = self.pending.take();
        if len == 0 {
            return Ok(());
        }
        self.unmap(start, len, unmapped);
        self.stats.mappings += 1;
        self.placed = 0;
        match self.cfg.kind {
            LayoutKind::Identity => {}
            LayoutKind::ItaniumLinux => {
                let end = start.saturating_add(len);
                let shareable = flags & map_flags::SHARED != 0
                    || (flags & map_flags::FILE != 0 && flags & map_flags::WRITE == 0)
                    || object.is_some() && flags & map_flags::WRITE == 0;
                let (delta, key) = if self.shared_region && shareable {
                    let (delta, key) = self.shared_place(start, len, object);
                    self.share(key, len);
                    (delta, key)
                } else {
                    let vrn = if flags & map_flags::IMAGE != 0 {
                        if flags & map_flags::EXEC != 0 && flags & map_flags::WRITE == 0 {
                            region::TEXT
                        } else {
                            region::DATA
                        }
                    } else if flags & (map_flags::HEAP | map_flags::STACK) != 0 {
                        region::DATA
                    } else if self.shared_region {
                        region::PRIVATE
                    } else {
                        region::MMAP
                    };
                    (vrn << 61, 0)
                };
                self.insert(Range { start, end, delta, key, area: 0 });
                self.placed = delta;
            }
            LayoutKind::Compact32 => {
                self.placed = self.map_compact(start, len)?.delta;
            }
            LayoutKind::Sparse32 => {
                let area = self.area_of(start, flags);
                let r = self.map_sparse(start, len, area)?;
                self.placed = r.delta;
                if area == Area::Stack {
                    self.cur.stack = Some(r.end.wrapping_sub(1).wrapping_add(r.delta));
                }
            }
        }
        Ok(())
    }

    /// `sparse32`: the area of a mapping by its flags (`map_flags`).
    fn area_of(&self, start: u64, flags: u32) -> Area {
        if flags & map_flags::STACK != 0 {
            Area::Stack
        } else if flags & map_flags::HEAP != 0 {
            Area::Data
        } else if flags & map_flags::IMAGE != 0 {
            if flags & map_flags::EXEC != 0 && flags & map_flags::WRITE == 0 {
                // The executable's text is the first image text; the dynamic loader's goes
                // with the libraries.
                if self.cur.program.is_none() {
                    Area::Text
                } else {
                    Area::Mmap
                }
            } else if self.near_program(start) {
                Area::Data
            } else {
                Area::Mmap
            }
        } else {
            Area::Mmap
        }
    }

    /// `sparse32`: trace address `addr` lies within `chunk` bytes above the program's text and
    /// data.
    fn near_program(&self, addr: u64) -> bool {
        self.cur.program.is_some_and(|(lo, hi)| addr >= lo && addr < hi.saturating_add(self.cfg.chunk))
    }

    /// `sparse32`: the laid-out bounds of an area and whether it fills from the top.
    fn area_bounds(&self, area: Area) -> (u64, u64, bool) {
        let c = &self.cfg;
        let stack_lo = c.size - c.stack_bytes;
        match area {
            Area::Text => (c.text_base, c.data_base, false),
            Area::Data => (c.data_base, stack_lo, false),
            Area::Mmap => (c.data_base, stack_lo, true),
            Area::Stack => (stack_lo, c.size, true),
        }
    }

    /// `sparse32`: places `[start, start + len)` in `area`: at the offset of a range of the same
    /// area it continues (one that ends where it starts or starts where it ends) if that
    /// room is free, else first-fit from the area's growing end, else first-fit anywhere above
    /// `base`; the offset modulo `align` is kept.
    fn map_sparse(&mut self, start: u64, len: u64, area: Area) -> Result<Range, LayoutFull> {
        let a = self.cfg.align;
        let end = start.saturating_add(len);
        let lo_al = start & !(a - 1);
        let span = round_up(end - lo_al, a);
        let (alo, ahi, down) = self.area_bounds(area);
        let i = self.cur.ranges.partition_point(|r| r.start < start);
        let mut neighbours = [None, None];
        if i > 0 && self.cur.ranges[i - 1].end == start && self.cur.ranges[i - 1].area == area as u8 {
            neighbours[0] = Some(self.cur.ranges[i - 1].delta);
        }
        if let Some(n) = self.cur.ranges.get(i).filter(|n| n.start == end && n.area == area as u8) {
            neighbours[1] = Some(n.delta);
        }
        let mut at = None;
        for d in neighbours.into_iter().flatten() {
            let lo = lo_al.wrapping_add(d);
            let fits = lo >= alo && lo <= ahi && ahi - lo >= span;
            if fits && !self.cur.used.iter().any(|&(u, v, dd)| u < lo.saturating_add(span) && lo < v && dd != d) {
                at = Some(lo);
                break;
            }
        }
        let at = match at.or_else(|| first_fit(&self.cur.used, alo, ahi, span, down)) {
            Some(x) => x,
            None => first_fit(&self.cur.used, self.cfg.base, self.cfg.size, span, false).ok_or(LayoutFull {
                kind: "sparse32",
                asid: self.asid,
                addr: start,
                len,
                size: self.cfg.size,
            })?,
        };
        let delta = at.wrapping_sub(lo_al);
        let j = self.cur.used.partition_point(|&(u, _, _)| u < at);
        self.cur.used.insert(j, (at, at + span, delta));
        let r = Range { start, end, delta, key: 0, area: area as u8 };
        self.insert(r);
        if matches!(area, Area::Text | Area::Data) {
            let p = self.cur.program.get_or_insert((start, end));
            p.0 = p.0.min(start);
            p.1 = p.1.max(end);
        }
        Ok(r)
    }

    /// `sparse32`: laid-out address of process `asid`'s stack, if known.
    pub fn stack_addr(&self, asid: u32) -> Option<u64> {
        if asid == self.asid {
            self.cur.stack
        } else {
            self.spaces.get(&asid).and_then(|s| s.stack)
        }
    }

    /// Shared region: the delta that puts `[start, start + len)` at its object's address, and
    /// the object's protection key.
    fn shared_place(&mut self, start: u64, len: u64, object: Option<(u32, u64)>) -> (u64, u32) {
        let (id, offset) = match object {
            Some(o) => o,
            None => {
                // No object identity: an address of its own (nothing to share it with).
                let base = self.shared_next;
                let bytes = round_up(len, 1 << 16);
                self.shared_next = self.shared_next.saturating_add(bytes);
                self.stats.shared_objects += 1;
                let key = SHARED_KEY | self.stats.shared_objects as u32;
                self.windows.insert(key, (base, bytes, 0));
                return (base.wrapping_sub(start), key);
            }
        };
        let need = offset.saturating_add(len);
        let (base, key) = match self.objects.get(&id) {
            Some(&(base, bytes, key)) if bytes >= need => (base, key),
            _ => {
                // A window for the object (a new, larger one if it grew): filled from the bottom,
                // never freed (chapman03 §3.3).
                let bytes = round_up(need, 1 << 16);
                let base = self.shared_next;
                self.shared_next = self.shared_next.saturating_add(bytes);
                self.stats.shared_objects += 1;
                let key = SHARED_KEY | self.stats.shared_objects as u32;
                self.objects.insert(id, (base, bytes, key));
                self.windows.insert(key, (base, bytes, 0));
                (base, key)
            }
        };
        (base.wrapping_add(offset).wrapping_sub(start), key)
    }

    /// `compact32`: places `[start, start + len)` first-fit, keeping the offset modulo `align`.
    fn map_compact(&mut self, start: u64, len: u64) -> Result<Range, LayoutFull> {
        let a = self.cfg.align;
        let full = || LayoutFull { kind: "compact32", asid: self.asid, addr: start, len, size: self.cfg.size };
        let lo_al = start & !(a - 1);
        let span = round_up(start.saturating_add(len) - lo_al, a);
        // First fit over the gaps between used ranges.
        let mut at = self.cfg.base;
        let mut slot = None;
        for (i, &(lo, hi, _)) in self.cur.used.iter().enumerate() {
            if lo >= at && lo - at >= span {
                slot = Some(i);
                break;
            }
            at = at.max(hi);
        }
        if slot.is_none() && (at > self.cfg.size || self.cfg.size - at < span) {
            return Err(full());
        }
        let i = slot.unwrap_or(self.cur.used.len());
        self.cur.used.insert(i, (at, at + span, at.wrapping_sub(lo_al)));
        let r = Range { start, end: start.saturating_add(len), delta: at.wrapping_sub(lo_al), key: 0, area: 0 };
        self.insert(r);
        Ok(r)
    }

    /// The laid-out pieces of the current process's `[start, start + len)` go to `out`, the
    /// layout unchanged (a protection change or a discard of pages). Bytes no mapping placed
    /// have no laid-out address and give no piece.
    pub fn translate(&self, start: u64, len: u64, out: &mut Vec<(u64, u64)>) {
        let end = start.saturating_add(len);
        let mut i = self.cur.ranges.partition_point(|r| r.end <= start);
        while i < self.cur.ranges.len() && self.cur.ranges[i].start < end {
            let r = self.cur.ranges[i];
            let (lo, hi) = (r.start.max(start), r.end.min(end));
            if hi > lo {
                out.push((lo.wrapping_add(r.delta), hi - lo));
            }
            i += 1;
        }
    }

    /// The current process unmaps `[start, start + len)`: the laid-out pieces go to `out`.
    pub fn unmap(&mut self, start: u64, len: u64, out: &mut Vec<(u64, u64)>) {
        if len == 0 {
            return;
        }
        let end = start.saturating_add(len);
        self.forget();
        let mut i = self.cur.ranges.partition_point(|r| r.end <= start);
        while i < self.cur.ranges.len() && self.cur.ranges[i].start < end {
            let r = self.cur.ranges[i];
            let (lo, hi) = (r.start.max(start), r.end.min(end));
            if hi <= lo {
                // Not inside the range after all (ranges of odd traces may overlap).
                i += 1;
                continue;
            }
            out.push((lo.wrapping_add(r.delta), hi - lo));
            self.unshare(r.key, hi - lo);
            if self.cfg.kind.is_32bit() {
                self.release(lo.wrapping_add(r.delta), hi.wrapping_add(r.delta));
            }
            let mut pieces = Vec::new();
            if r.start < lo {
                pieces.push(Range { end: lo, ..r });
            }
            if hi < r.end {
                pieces.push(Range { start: hi, ..r });
            }
            let n = pieces.len();
            self.cur.ranges.splice(i..i + 1, pieces);
            i += n;
        }
    }

    /// `compact32`: frees the whole `align` units of `[lo, hi)` that no other range still uses.
    fn release(&mut self, lo: u64, hi: u64) {
        let a = self.cfg.align;
        let (lo, hi) = (round_up(lo, a), hi & !(a - 1));
        if lo >= hi {
            return;
        }
        let mut out = Vec::with_capacity(self.cur.used.len() + 1);
        for &(u, v, d) in &self.cur.used {
            if v <= lo || u >= hi {
                out.push((u, v, d));
                continue;
            }
            if u < lo {
                out.push((u, lo, d));
            }
            if hi < v {
                out.push((hi, v, d));
            }
        }
        self.cur.used = out;
    }

    /// The following references are process `asid`'s.
    pub fn switch_to(&mut self, asid: u32) {
        if asid == self.asid {
            return;
        }
        let next = self.spaces.remove(&asid).unwrap_or_default();
        let prev = std::mem::replace(&mut self.cur, next);
        self.spaces.insert(self.asid, prev);
        self.asid = asid;
        self.forget();
        self.pending = None;
    }

    /// The current process forks `child`, which starts with its parent's placement (and maps
    /// the shared-region windows its parent maps).
    pub fn fork(&mut self, child: u32) {
        let child_space = self.cur.clone();
        for r in &child_space.ranges {
            self.share(r.key, r.end - r.start);
        }
        self.spaces.insert(child, child_space);
    }

    /// Process `asid` exits (its shared-region windows that no other process maps are released).
    pub fn exit(&mut self, asid: u32) {
        let space = if asid == self.asid {
            self.forget();
            std::mem::take(&mut self.cur)
        } else {
            self.spaces.remove(&asid).unwrap_or_default()
        };
        for r in &space.ranges {
            self.unshare(r.key, r.end - r.start);
        }
    }

    /// `len` more bytes of the shared-region window of `key` are mapped (nothing for other keys).
    fn share(&mut self, key: u32, len: u64) {
        if key & SHARED_KEY != 0 {
            if let Some(w) = self.windows.get_mut(&key) {
                w.2 = w.2.saturating_add(len);
            }
        }
    }

    /// `len` bytes of the shared-region window of `key` are no longer mapped: when no process
    /// maps any of it, its pages are released (chapman03 §3.3: the window's address is never
    /// reused, but munmap removes the page-table entries of what it unmaps).
    fn unshare(&mut self, key: u32, len: u64) {
        if key & SHARED_KEY == 0 {
            return;
        }
        if let Some(w) = self.windows.get_mut(&key) {
            let was = w.2;
            w.2 = w.2.saturating_sub(len);
            if was > 0 && w.2 == 0 {
                self.released.push((w.0, w.1));
            }
        }
    }

    /// Moves the laid-out ranges of the shared-region windows that no process maps any more
    /// into `out` (to have their pages unmapped for every process).
    pub fn take_released(&mut self, out: &mut Vec<(u64, u64)>) {
        out.append(&mut self.released);
    }
}

/// The first (or, `down`, the last) `span` bytes free of `used` within `[lo, hi)`, where `used`
/// is sorted by start and may overlap.
fn first_fit(used: &[(u64, u64, u64)], lo: u64, hi: u64, span: u64, down: bool) -> Option<u64> {
    let mut gaps = Vec::new();
    let mut at = lo;
    for &(u, v, _) in used {
        if u > at && at < hi {
            gaps.push((at, u.min(hi)));
        }
        at = at.max(v);
    }
    if at < hi {
        gaps.push((at, hi));
    }
    let fits = |&&(a, b): &&(u64, u64)| b - a >= span;
    if down {
        gaps.iter().rev().find(fits).map(|&(_, b)| b - span)
    } else {
        gaps.iter().find(fits).map(|&(a, _)| a)
    }
}

fn round_up(x: u64, a: u64) -> u64 {
    x.saturating_add(a - 1) & !(a - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compact() -> Layout {
        Layout::new(&LayoutConfig { kind: LayoutKind::Compact32, ..LayoutConfig::default() }, false).unwrap()
    }

    #[test]
    fn compact32_packs_far_apart_mappings_and_keeps_offsets() {
        let mut l = compact();
        let mut un = Vec::new();
        l.map(0x5555_5555_4000, 0x3000, 5, &mut un).unwrap();
        l.map(0x7fff_f7dd_0000, 0x2_0000, 3, &mut un).unwrap();
        let a = l.place(false, 0x5555_5555_4123).unwrap();
        let b = l.place(true, 0x7fff_f7dd_1008).unwrap();
        assert_eq!((a, b), (0x1_4123, 0x2_1008));
        assert_eq!(l.place(false, 0x5555_5555_6fff).unwrap(), 0x1_6fff);
        // Unknown: the aligned 1 MB chunk around it, after the others.
        assert_eq!(l.place(true, 0x7ffc_0012_3456).unwrap(), 0x4_0000 + 0x2_3456);
        assert!(un.is_empty());
    }

    #[test]
    fn compact32_reuses_freed_space_and_fails_when_full() {
        let mut l =
            Layout::new(&LayoutConfig { kind: LayoutKind::Compact32, size: 1 << 22, ..LayoutConfig::default() }, false)
                .unwrap();
        let mut un = Vec::new();
        l.map(0x1000_0000, 2 << 20, 3, &mut un).unwrap();
        l.map(0x2000_0000, 1 << 20, 3, &mut un).unwrap();
        assert!(l.map(0x3000_0000, 1 << 20, 3, &mut un).is_err(), "4 MB - 64 KB base holds 3 MB plus < 1 MB");
        l.unmap(0x1000_0000, 2 << 20, &mut un);
        assert_eq!(un, vec![(0x1_0000, 2 << 20)]);
        l.map(0x3000_0000, 1 << 20, 3, &mut un).unwrap();
        assert_eq!(l.place(true, 0x3000_0010).unwrap(), 0x1_0010);
    }

    /// sparse32, worked by hand with the defaults (64 KB units, text from 0x0040_0000, data
    /// from 0x1000_0000, the stack's 8 MB below 2 GB, the mmap area below them).
    #[test]
    fn sparse32_puts_text_heap_mmaps_and_stack_where_a_mips_unix_does() {
        use map_flags::*;
        let cfg = LayoutConfig { kind: LayoutKind::Sparse32, ..LayoutConfig::default() };
        cfg.validate().unwrap();
        let mut l = Layout::new(&cfg, false).unwrap();
        let mut un = Vec::new();
        // Text: unit 0x5555_5555_0000 -> 0x0040_0000.
        l.map(0x5555_5555_4000, 0x3000, IMAGE | FILE | READ | EXEC, &mut un).unwrap();
        // Heap: first fit in the data area; its growth continues it.
        l.map(0x5555_5556_0000, 0x2_1000, HEAP | READ | WRITE, &mut un).unwrap();
        l.map(0x5555_5558_1000, 0x1_0000, HEAP | READ | WRITE, &mut un).unwrap();
        // Two mmaps: from the top of the mmap area (2 GB - 8 MB) down, 64 KB units each.
        l.map(0x7fff_f7dd_0000, 0x2_0000, READ | WRITE, &mut un).unwrap();
        l.map(0x7fff_f7d0_0000, 0x1_0000, READ | EXEC | FILE, &mut un).unwrap();
        // The stack: its three 64 KB units end at 2 GB.
        l.map(0x7fff_ffdd_e000, 0x2_1000, STACK | READ | WRITE, &mut un).unwrap();
        let at = |l: &mut Layout, d, a| l.place(d, a).unwrap();
        assert_eq!(at(&mut l, false, 0x5555_5555_4010), 0x0040_4010);
        assert_eq!(at(&mut l, true, 0x5555_5556_0008), 0x1000_0008);
        assert_eq!(at(&mut l, true, 0x5555_5558_1000), 0x1002_1000);
        assert_eq!(at(&mut l, true, 0x7fff_f7dd_0000), 0x7f7e_0000);
        assert_eq!(at(&mut l, false, 0x7fff_f7d0_0040), 0x7f7d_0040);
        assert_eq!(at(&mut l, true, 0x7fff_ffde_eff8), 0x7ffe_eff8);
        assert_eq!(l.stack_addr(0), Some(0x7fff_efff));
        // The executable's data just above its text (no map record) goes to the data area
        // after the heap's units (it cannot continue the heap downwards: that is below the
        // area); an unknown fetch far away is the loader's, in the mmap area.
        assert_eq!(at(&mut l, true, 0x5555_5555_8000), 0x1004_8000);
        assert_eq!(at(&mut l, false, 0x7fff_f000_1234), 0x7f6d_1234);
        assert!(un.is_empty());
        assert_eq!(l.stats().implicit, 2);
    }

    /// sparse32 without map records: the first fetch is the program's text, the first data
    /// reference far from it the stack (at the top), later far data the mmap area.
    #[test]
    fn sparse32_places_bare_addresses_by_what_they_are_near() {
        let cfg = LayoutConfig { kind: LayoutKind::Sparse32, ..LayoutConfig::default() };
        let mut l = Layout::new(&cfg, false).unwrap();
        assert_eq!(l.place(false, 0x40_1234).unwrap(), 0x0040_1234);
        assert_eq!(l.place(true, 0x7ffc_0012_3456).unwrap(), 0x7ff2_3456);
        assert_eq!(l.stack_addr(0), Some(0x7ff2_3456));
        assert_eq!(l.place(true, 0x4c_0010).unwrap(), 0x4c_0010, "inside the text's chunk");
        assert_eq!(l.place(true, 0x50_0010).unwrap(), 0x1000_0010, "data within 1 MB above the text");
        assert_eq!(l.place(true, 0x7f00_0000_0010).unwrap(), 0x7f70_0010);
    }

    /// Pages no mapping covers are placed one by one in the region of their first reference's
    /// kind; neighbours placed alike join into one range, and a later mapping or unmapping over
    /// joined pages still places (and hands back) each page as if it had stayed on its own.
    #[test]
    fn itanium_linux_joins_implicit_pages_without_moving_any() {
        let cfg = LayoutConfig { kind: LayoutKind::ItaniumLinux, ..LayoutConfig::default() };
        let mut l = Layout::new(&cfg, false).unwrap();
        let base = 0x40_0000u64;
        let page = |i: u64| base + i * 0x1000;
        // The reference: pages 0..32 first fetched (text region), 32..64 first read (data).
        let first = |i: u64| if i < 32 { region::TEXT } else { region::DATA };
        let mut order: Vec<u64> = (0..64).collect();
        let mut x = 12345u64;
        for i in (1..order.len()).rev() {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            order.swap(i, (x >> 33) as usize % (i + 1));
        }
        for &i in &order {
            let a = page(i) + 0x18 * (i % 7);
            assert_eq!(l.place(i >= 32, a).unwrap(), (first(i) << 61) | a, "page {i}");
            // Later references of the other kind keep the page where it was placed.
            assert_eq!(l.place(i < 32, a + 8).unwrap(), (first(i) << 61) | (a + 8), "page {i}");
        }
        assert_eq!(l.stats().implicit, 64);
        assert_eq!(l.cur.ranges.len(), 2, "{:?}", l.cur.ranges);
        // A mapping over pages 10..20 takes them out of the text range in one piece.
        let mut un = Vec::new();
        l.map(page(10), 10 * 0x1000, map_flags::READ | map_flags::WRITE, &mut un).unwrap();
        assert_eq!(un, vec![((region::TEXT << 61) | page(10), 10 * 0x1000)]);
        let placed = |i: u64| if (10..20).contains(&i) { region::MMAP } else { first(i) };
        for &i in order.iter().rev() {
            assert_eq!(
                l.place(i % 2 == 0, page(i) + 0xff8).unwrap(),
                (placed(i) << 61) | (page(i) + 0xff8),
                "page {i}"
            );
        }
        un.clear();
        l.unmap(page(5), 35 * 0x1000, &mut un);
        let pieces = [(5, 10, region::TEXT), (10, 20, region::MMAP), (20, 32, region::TEXT), (32, 40, region::DATA)];
        let want: Vec<(u64, u64)> = pieces.iter().map(|&(a, b, r)| ((r << 61) | page(a), (b - a) * 0x1000)).collect();
        assert_eq!(un, want);
        // Unmapped pages are placed anew by their next first reference.
        assert_eq!(l.place(true, page(7)).unwrap(), (region::DATA << 61) | page(7));
        assert_eq!(l.place(false, page(4)).unwrap(), (region::TEXT << 61) | page(4));
        assert_eq!(l.place(true, page(40)).unwrap(), (region::DATA << 61) | page(40));
    }

    #[test]
    fn itanium_linux_puts_text_data_and_mmaps_in_their_regions() {
        let cfg = LayoutConfig { kind: LayoutKind::ItaniumLinux, ..LayoutConfig::default() };
        let mut l = Layout::new(&cfg, false).unwrap();
        let mut un = Vec::new();
        l.map(0x7f00_0000_0000, 0x1000, map_flags::READ | map_flags::EXEC, &mut un).unwrap();
        assert_eq!(l.place(false, 0x7f00_0000_0010).unwrap(), (1 << 61) | 0x7f00_0000_0010);
        assert_eq!(l.place(false, 0x40_1000).unwrap(), (2 << 61) | 0x40_1000, "unknown text");
        assert_eq!(l.place(true, 0x60_1000).unwrap(), (3 << 61) | 0x60_1000, "unknown data");
        // With a shared region, two processes mapping one object see it at one address.
        let mut l = Layout::new(&cfg, true).unwrap();
        l.object(7, 0x2000);
        l.map(0x7f00_0000_0000, 0x4000, map_flags::READ | map_flags::SHARED, &mut un).unwrap();
        let a = l.place(true, 0x7f00_0000_0000).unwrap();
        l.fork(1);
        l.switch_to(1);
        l.object(7, 0x2000);
        l.map(0x7e00_0000_0000, 0x4000, map_flags::READ | map_flags::SHARED, &mut un).unwrap();
        assert_eq!(l.place(true, 0x7e00_0000_0000).unwrap(), a);
        assert_eq!(a >> 61, 1);
        l.map(0x7d00_0000_0000, 0x4000, map_flags::READ | map_flags::WRITE, &mut un).unwrap();
        assert_eq!(l.place(true, 0x7d00_0000_0000).unwrap() >> 61, region::PRIVATE);
    }
}
