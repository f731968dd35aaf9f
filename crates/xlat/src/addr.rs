//! Strong address types.
//!
//! Virtual addresses, physical addresses, virtual page numbers and physical frame numbers are
//! distinct types so that mixing them is a compile error rather than a silent bug. Conversions
//! between them always name the page size they use.

use std::fmt;

/// A virtual (program) address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct VirtAddr(pub u64);

/// A physical (machine) address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PhysAddr(pub u64);

/// A virtual page number: a virtual address shifted right by a page size's shift.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Vpn(pub u64);

/// A physical frame number: a physical address shifted right by a page size's shift.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pfn(pub u64);

/// An address-space identifier (one per simulated process).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Asid(pub u32);

/// A page size: always a power of two, stored as its shift (12 for 4 KB).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageSize {
    shift: u8,
}

impl PageSize {
    /// 4 KB, the base page of every paper xlat models.
    pub const SIZE_4K: PageSize = PageSize { shift: 12 };

    /// A page size from its byte count; `None` unless it is a power of two between 2^0 and 2^63.
    pub fn from_bytes(bytes: u64) -> Option<PageSize> {
        if bytes.is_power_of_two() {
            Some(PageSize { shift: bytes.trailing_zeros() as u8 })
        } else {
            None
        }
    }

    /// A page size from its shift; `None` if the shift is 64 or more.
    pub fn from_shift(shift: u32) -> Option<PageSize> {
        (shift < 64).then_some(PageSize { shift: shift as u8 })
    }

    /// log2 of the size in bytes.
    #[inline(always)]
    pub fn shift(self) -> u32 {
        self.shift as u32
    }

    /// Size in bytes.
    #[inline(always)]
    pub fn bytes(self) -> u64 {
        1u64 << self.shift
    }

    /// Mask of the offset bits within a page.
    #[inline(always)]
    pub fn offset_mask(self) -> u64 {
        self.bytes() - 1
    }
}

impl fmt::Display for PageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.bytes();
        if b >= 1 << 30 && b % (1 << 30) == 0 {
            write!(f, "{}GB", b >> 30)
        } else if b >= 1 << 20 && b % (1 << 20) == 0 {
            write!(f, "{}MB", b >> 20)
        } else if b >= 1 << 10 && b % (1 << 10) == 0 {
            write!(f, "{}KB", b >> 10)
        } else {
            write!(f, "{b}B")
        }
    }
}

impl VirtAddr {
    /// The page this address lies in.
    #[inline(always)]
    pub fn vpn(self, size: PageSize) -> Vpn {
        Vpn(self.0 >> size.shift())
    }
    /// Offset of this address within its page.
    #[inline(always)]
    pub fn offset(self, size: PageSize) -> u64 {
        self.0 & size.offset_mask()
    }
}

impl Vpn {
    /// First address of this page.
    #[inline(always)]
    pub fn base(self, size: PageSize) -> VirtAddr {
        VirtAddr(self.0 << size.shift())
    }
}

/// A multiplicative (Fibonacci) hash of `key`, to be used by its top bits (`>> (64 - bits)`),
/// which spread consecutive keys (a program's consecutive pages) over distinct places.
#[inline(always)]
pub(crate) fn fib_hash(key: u64) -> u64 {
    key.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// [`fib_hash`] of page `vpn` of address space `asid` (the ASID above any page's bits that
/// matter to a table of up to 2^40 places).
#[inline(always)]
pub(crate) fn page_hash(vpn: u64, asid: u32) -> u64 {
    fib_hash(vpn ^ ((asid as u64) << 40))
}

impl Pfn {
    /// First address of this frame.
    #[inline(always)]
    pub fn base(self, size: PageSize) -> PhysAddr {
        PhysAddr(self.0 << size.shift())
    }
}

impl PhysAddr {
    /// The frame this address lies in.
    #[inline(always)]
    pub fn pfn(self, size: PageSize) -> Pfn {
        Pfn(self.0 >> size.shift())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_size_rejects_non_powers_of_two() {
        assert!(PageSize::from_bytes(4096).is_some());
        assert!(PageSize::from_bytes(4095).is_none());
        assert!(PageSize::from_bytes(0).is_none());
        assert_eq!(PageSize::from_bytes(65536).unwrap().shift(), 16);
    }

    #[test]
    fn conversions_round_trip() {
        let s = PageSize::SIZE_4K;
        let va = VirtAddr(0x7fff_1234_5678);
        assert_eq!(va.vpn(s), Vpn(0x0007_fff1_2345));
        assert_eq!(va.offset(s), 0x678);
        assert_eq!(va.vpn(s).base(s), VirtAddr(0x7fff_1234_5000));
        assert_eq!(Pfn(3).base(s), PhysAddr(0x3000));
        assert_eq!(PhysAddr(0x3fff).pfn(s), Pfn(3));
        assert_eq!(PageSize::from_bytes(1 << 21).unwrap().to_string(), "2MB");
        assert_eq!(PageSize::from_bytes(1 << 16).unwrap().to_string(), "64KB");
    }
}
