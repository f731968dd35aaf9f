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
/// allocation, so every line they touch is this allocation's own. The padding holds copies of
/// the first element and is never read.
#[derive(Clone, Debug)]
pub(crate) struct Padded<T> {
    buf: Box<[T]>,
    len: usize,
}

impl<T> Padded<T> {
    /// Elements of padding on each side.
    const PAD: usize = GUARD.div_ceil(if size_of::<T>() == 0 { 1 } else { size_of::<T>() });
}

impl<T: Clone> From<Vec<T>> for Padded<T> {
    fn from(v: Vec<T>) -> Padded<T> {
        let len = v.len();
        let Some(first) = v.first().cloned() else {
            return Padded { buf: Box::new([]), len: 0 };
        };
        let mut buf = Vec::with_capacity(len + 2 * Self::PAD);
        buf.resize(Self::PAD, first.clone());
        buf.extend(v);
        buf.resize(len + 2 * Self::PAD, first);
        Padded { buf: buf.into_boxed_slice(), len }
    }
}

/// Indexing costs what a slice's does: one bounds check (against the padded length), the
/// padding's offset folded into the address.
impl<T> Index<usize> for Padded<T> {
    type Output = T;

    #[inline(always)]
    fn index(&self, i: usize) -> &T {
        debug_assert!(i < self.len);
        &self.buf[Self::PAD + i]
    }
}

impl<T> IndexMut<usize> for Padded<T> {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut T {
        debug_assert!(i < self.len);
        &mut self.buf[Self::PAD + i]
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
        assert_eq!(Padded::<u64>::from(Vec::new()).len, 0);
    }
}
