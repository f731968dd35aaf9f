//! [`Padded`]: storage of per-reference state on cache lines of its own.

use std::ops::{Index, IndexMut};

/// Bytes kept free on each side of the elements: two 64-byte lines (the adjacent-line
/// prefetcher fetches lines in pairs).
const GUARD: usize = 128;

/// A boxed slice whose elements share no cache line with any other allocation, for small
/// arrays a model writes on most references (a TLB's replacement-order lists and their heads).
///
/// A small array allocated next to data another thread writes all the time (the reader
/// thread's decompressor, allocated just before the designs) bounces between the two cores on
/// every write: the 4-byte array of list heads of a fully associative TLB, in that position,
/// made whole runs on the real trace 12% slower. The elements sit `GUARD` bytes inside the
/// allocation, so every line they touch is this allocation's own. The padding holds
/// default values and is never read.
///
/// Indexing takes no bounds check: the index is masked to the next power of two at or above
/// the length, and the buffer holds that many elements past its leading padding, so every
/// index reads or writes inside the allocation (an index of `len` or more, which the callers
/// never make and `debug_assert` catches, reads a padding element).
#[derive(Clone, Debug)]
pub(crate) struct Padded<T> {
    buf: Box<[T]>,
    len: usize,
    /// `len.next_power_of_two() - 1` (0 when empty).
    mask: usize,
}

impl<T> Padded<T> {
    /// Elements of padding on each side.
    const PAD: usize = GUARD.div_ceil(if size_of::<T>() == 0 { 1 } else { size_of::<T>() });
}

impl<T: Clone + Default> From<Vec<T>> for Padded<T> {
    fn from(v: Vec<T>) -> Padded<T> {
        let len = v.len();
        // Room for every masked index, also when empty (mask 0: one element).
        let mask = len.max(1).next_power_of_two() - 1;
        let total = Self::PAD + mask + 1 + Self::PAD;
        let mut buf = Vec::with_capacity(total);
        buf.resize(Self::PAD, T::default());
        buf.extend(v);
        buf.resize(total, T::default());
        Padded { buf: buf.into_boxed_slice(), len, mask }
    }
}

/// Indexing is a mask and a load: the padding's offset is folded into the address.
impl<T> Index<usize> for Padded<T> {
    type Output = T;

    #[inline(always)]
    fn index(&self, i: usize) -> &T {
        debug_assert!(i < self.len);
        let at = Self::PAD + (i & self.mask);
        debug_assert!(at < self.buf.len());
        // SAFETY: `From` made `buf` `PAD + mask + 1 + PAD` elements long, so `PAD + (i & mask)`
        // is inside it.
        unsafe { self.buf.get_unchecked(at) }
    }
}

impl<T> IndexMut<usize> for Padded<T> {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut T {
        debug_assert!(i < self.len);
        let at = Self::PAD + (i & self.mask);
        debug_assert!(at < self.buf.len());
        // SAFETY: as in `index`.
        unsafe { self.buf.get_unchecked_mut(at) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_keep_clear_of_the_allocation_edges() {
        for n in [1usize, 3, 64, 1000] {
            let mut p = Padded::from((0..n as u32).collect::<Vec<_>>());
            assert_eq!((0..n).map(|i| p[i]).collect::<Vec<_>>(), (0..n as u32).collect::<Vec<_>>());
            p[n - 1] = 7;
            assert_eq!(p[n - 1], 7);
            let (lo, hi) = (p.buf.as_ptr() as usize, p.buf.as_ptr() as usize + p.buf.len() * 4);
            let (first, end) = (&p[0] as *const u32 as usize, &p[n - 1] as *const u32 as usize + 4);
            assert!(first - lo >= GUARD && hi - end >= GUARD, "{n}: {lo:#x} {first:#x} {end:#x} {hi:#x}");
        }
        let empty = Padded::<u64>::from(Vec::new());
        assert_eq!((empty.len, empty.mask, empty.buf.len()), (0, 0, 2 * Padded::<u64>::PAD + 1));
        // Masked indexing stays inside the buffer whatever the index (release builds, where
        // the debug assertion is off, read a padding element for an out-of-range one).
        let p = Padded::from(vec![1u32, 2, 3]);
        assert_eq!(p.mask, 3);
        assert!(Padded::<u32>::PAD + p.mask < p.buf.len());
    }
}
