//! What a slot of a [`Tlb`](super::Tlb) holds: the entry formats, a translation's payload, the
//! lookup key that folds an entry's size into its tag, and the sentinels of an empty slot and
//! of a missing link.

/// ASID value of a global entry: it matches every process.
pub const GLOBAL: u32 = u32::MAX;

/// The key of an empty slot (and the tag of an empty filter entry): no entry's key.
pub(super) const INVALID: u64 = u64::MAX;
/// No slot: the end of a chain or list, an empty bucket.
pub(super) const NIL: u32 = u32::MAX;

/// The lookup key of an entry is `tag ^ (k << KEY_SHIFT)`, `k` = log2(entry pages).
pub(super) const KEY_SHIFT: u32 = 58;

/// `shift` value that no entry has (the complete-subblock shift of other formats).
pub(super) const NO_SHIFT: u8 = u8::MAX;

#[inline(always)]
pub(super) fn key_of(tag: u64, k: u32) -> u64 {
    tag ^ ((k as u64) << KEY_SHIFT)
}

/// Mask of the low `n` bits (`n` <= 64).
#[inline(always)]
pub(super) fn low_bits(n: u32) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// True if an entry with this payload translates its base page number `idx` (offset in the entry).
#[inline(always)]
pub(super) fn translates(data: &TlbData, idx: u64) -> bool {
    data.valid == 0 || (idx < 64 && (data.valid >> idx) & 1 != 0)
}

/// The entry format of a TLB (talluri95 §4.1, Figure 6). See the [module documentation](super).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Format {
    /// Base-page entries only.
    #[default]
    Single,
    /// Entries of any power-of-two size of at least the base page, mixed in one TLB.
    Superpage,
    /// Block entries: one tag per aligned block of `block_pages` base pages, one frame (pages
    /// properly placed), a valid bit per base page.
    PartialSubblock {
        /// Base pages per block: a power of two, 2..=64.
        block_pages: u32,
    },
    /// Block entries: one tag per aligned block of `block_pages` base pages, a frame and a valid
    /// bit per base page.
    CompleteSubblock {
        /// Base pages per block: a power of two, 2..=64.
        block_pages: u32,
    },
}

impl Format {
    /// Base pages per block of the subblock formats; `None` for the others.
    pub fn block_pages(self) -> Option<u32> {
        match self {
            Format::Single | Format::Superpage => None,
            Format::PartialSubblock { block_pages } | Format::CompleteSubblock { block_pages } => Some(block_pages),
        }
    }
}

/// What a TLB entry translates to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TlbData {
    /// Frame of the first base page of the entry's page (0 in complete-subblock entries, whose
    /// frames are per page: see [`Tlb::translations`](super::Tlb::translations)).
    pub pfn: u64,
    /// log2 of the entry's page size.
    pub shift: u8,
    /// Subblock valid vector over the entry's base pages (bit i = base page i); 0 when the whole
    /// entry is valid (base-page and superpage entries).
    pub valid: u64,
}

/// A translation held by the TLB, as returned by lookups and evictions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlbEntry {
    /// VPN at the entry's page size.
    pub tag: u64,
    /// Owning process, or [`GLOBAL`].
    pub asid: u32,
    /// Translation payload.
    pub data: TlbData,
}

/// One entry's storage.
#[derive(Clone, Copy, Debug)]
pub(super) struct Slot {
    /// `key_of(tag, k)`, INVALID when empty.
    pub(super) key: u64,
    pub(super) data: TlbData,
    pub(super) asid: u32,
}
