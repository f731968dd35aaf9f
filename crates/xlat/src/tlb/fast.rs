//! The fast paths of the engine's plain loop: a lookup that needs only whether it hits
//! ([`Tlb::hits`]), the recent-hit filter held in registers over a run of lookups
//! ([`Tlb::filter_run`]), a fill that reports only what it did ([`Tlb::fill_outcome`]), and
//! runs of lookups and fills of a fully associative LRU TLB ([`Tlb::fa_lru_run`]). Each gives
//! the counts and leaves the TLB as [`Tlb::lookup`] and [`Tlb::fill`] one reference at a time
//! would, by the invariant in the [module documentation](super#fast-paths-and-their-invariant).

use super::entry::{Slot, TlbData, GLOBAL, INVALID};
use super::filter::FilterRun;
use super::index::Index;
use super::near::Near;
use super::Tlb;
use crate::addr::{Asid, Vpn};
use crate::pt::Pte;
use crate::trace::SLOW_WORD;

/// What [`Tlb::fa_lru_run`] filled: misses, each with one new entry, and the valid entries
/// they replaced, and the entries their walks read; and, in the build with the table of recent
/// pages, the lookups the table did not answer and the uses it deferred (for the choice of the
/// build).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FaLruMisses {
    pub(crate) fills: u64,
    pub(crate) evictions: u64,
    /// Page-table entries the fills' walks read (the sum of what `walk` gave with each PTE).
    pub(crate) reads: u64,
    /// Lookups the table did not answer ([`Tlb::fa_lru_run_near`]).
    pub(crate) near_misses: u64,
    /// Uses of entries that it deferred and applied to the order list.
    pub(crate) deferred: u64,
}

/// What a run of [`Tlb::fa_lru_run`] built with `WATCH` knows of stores: whether a frame holds
/// a write-protected page (`protected(pfn)`: a store to it may copy on write), and whether the
/// reference at a position stores (`stores(i)`, asked only of data references to such frames).
/// Neither may change during a run (only events and the copies the caller makes change them).
pub(crate) struct Watch<P, S> {
    pub(crate) protected: P,
    pub(crate) stores: S,
}

/// The [`Watch`] of a run built without `WATCH` (never asked).
pub(crate) const NO_WATCH: Watch<fn(u64) -> bool, Never> = Watch { protected: |_| false, stores: |_| false };

/// What [`NO_WATCH`] answers for every reference.
type Never = fn(usize) -> bool;

impl<P: Fn(u64) -> bool, S: Fn(usize) -> bool> Watch<P, S> {
    /// True if the data reference at `i` (`data`: its word's data bit), translated to frame
    /// `pfn`, is a store to a write-protected page.
    #[inline(always)]
    fn stops(&self, i: usize, data: u64, pfn: u64) -> bool {
        data != 0 && (self.protected)(pfn) && (self.stores)(i)
    }
}

impl Tlb {
    /// [`Tlb::lookup`] for a caller that needs only whether `vpn` hits (the engine's plain
    /// loop): the same lookup and the same state changes, with the fully associative LRU path
    /// inline rather than behind the out-of-line one.
    #[inline(always)]
    pub(crate) fn hits(&mut self, asid: Asid, vpn: Vpn) -> bool {
        if self.filter.hit(asid, vpn).is_some() {
            return true;
        }
        self.hits_past_filter(asid, vpn)
    }

    /// [`Tlb::hits`] of a lookup the recent-hit filter does not answer (as the caller found
    /// with a [`FilterRun`]).
    #[inline(always)]
    pub(crate) fn hits_past_filter(&mut self, asid: Asid, vpn: Vpn) -> bool {
        if self.fa_lru_lookup() {
            return self.lookup_fa_lru(asid, vpn).is_some();
        }
        self.lookup_slow(asid, vpn).is_some()
    }

    /// The filter, for a run of lookups of `asid` answered in registers (see [`FilterRun`]).
    #[inline(always)]
    pub(crate) fn filter_run(&self, asid: Asid) -> FilterRun {
        let f = &self.filter;
        let tag = [0, 1].map(|i| if f.asid[i] == asid.0 { f.tag[i] } else { INVALID });
        FilterRun { tag, pending: f.pending, last: f.last }
    }

    /// Ends a run begun with [`Tlb::filter_run`]: its hits become the filter's.
    #[inline(always)]
    pub(crate) fn end_filter_run(&mut self, run: FilterRun) {
        self.filter.pending = run.pending;
        self.filter.last = run.last;
    }

    /// True if this is a fully associative LRU TLB of base-page entries (whose lookups may take
    /// [`Tlb::fa_lru_run`] while [`Tlb::fa_lru_lookup`] holds).
    #[inline(always)]
    pub(crate) fn is_fa_lru(&self) -> bool {
        self.fa_lru
    }

    /// [`Tlb::hits`] of the base pages `word(i) >> 1`, `word(i + 1) >> 1`, ... of `asid` (page
    /// words of one unified TLB), each miss followed by [`Tlb::fill`] with the PTE `walk(vpn)`
    /// gives (with the page-table entries its walk read), for as long as `walk` gives one;
    /// counts the lookups (`n`, of which `n_data` have the data bit, `word & 1`) and the fills
    /// (`misses`). Returns where it stopped: at `len`, at a [`SLOW_WORD`], at a miss that `walk`
    /// left to the caller, or (built with `WATCH`) at a store to a write-protected page, hit or
    /// miss ([`Watch`]); nothing of the reference it stopped at is done. Only while
    /// [`Tlb::fa_lru_lookup`] holds.
    ///
    /// The engine's loop of a fully associative LRU TLB on its own, the arrays borrowed once:
    /// each reference is one probe of the index (past the table of recent pages, if the build
    /// has it), then on a hit a move to the head of the order list as [`Tlb::lookup_fa_lru`]
    /// makes it, and on a miss the fill [`Tlb::fill_fa_lru`] makes. `NEAR` only changes how
    /// fast: with it, the run is [`Tlb::fa_lru_run_near`] (fast where most lookups find their
    /// page among the 64 recent ones of its table and misses are rare: real programs), and
    /// without it [`Tlb::fa_lru_run_ahead`] (fast where they do not: the table's upkeep, and
    /// the moves it defers to each fill, then cost more than it saves). `WATCH` adds the test
    /// of stores: a data reference whose frame `watch` says is write-protected asks whether it
    /// stores, and such a frame's page never enters the table of recent pages (whose hits test
    /// nothing), so the references that pay are those to write-protected pages alone.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fa_lru_run<const NEAR: bool, const WATCH: bool>(
        &mut self,
        asid: Asid,
        word: &impl Fn(usize) -> u64,
        i: usize,
        len: usize,
        n: &mut u64,
        n_data: &mut u64,
        walk: &mut impl FnMut(u64) -> Option<(Pte, u32)>,
        watch: &Watch<impl Fn(u64) -> bool, impl Fn(usize) -> bool>,
        misses: &mut FaLruMisses,
    ) -> usize {
        debug_assert!(self.fa_lru_lookup());
        let io = RunIo { word, len, n, n_data, walk, misses };
        if NEAR {
            self.fa_lru_run_near::<WATCH, _, _, _, _>(asid, i, io, watch)
        } else {
            self.fa_lru_run_ahead::<WATCH, _, _, _, _>(asid, i, io, watch)
        }
    }

    /// Whether a fill of [`Tlb::fa_lru_run`] keeps the TLB as `fa_lru_lookup` needs it (a
    /// base-page entry of a process's own ASID, in a TLB without block entries), and the shift
    /// of its entries.
    #[inline(always)]
    fn fa_lru_fill_terms(&self, asid: Asid) -> (bool, u8) {
        (self.blocks == 0 && asid.0 != GLOBAL, self.base.shift() as u8)
    }

    /// [`Tlb::fa_lru_run`] with a direct-mapped table of the run's recent pages ([`Near`]): a
    /// lookup whose page is in it (most of a real program's) is a hit on its slot, one load and one
    /// compare, and its use is noted in the table; the others probe the index and enter the table.
    /// The uses go to [`Deferred`](super::near::Deferred) when an entry leaves the table, before a
    /// fill and at the end, and are applied to the order list in order before a fill and at the
    /// end. The two-entry filter is committed and emptied first, as [`Tlb::fa_lru_run_ahead`] does.
    ///
    /// Built with `WATCH`, a page whose frame is write-protected stays out of the table: its
    /// lookups probe the index, a store there stops the run, and the uses of its other lookups
    /// go to [`Deferred`](super::near::Deferred) at once.
    #[inline(always)]
    fn fa_lru_run_near<const WATCH: bool, W, F, P, S>(
        &mut self,
        asid: Asid,
        mut i: usize,
        io: RunIo<'_, W, F>,
        watch: &Watch<P, S>,
    ) -> usize
    where
        W: Fn(usize) -> u64,
        F: FnMut(u64) -> Option<(Pte, u32)>,
        P: Fn(u64) -> bool,
        S: Fn(usize) -> bool,
    {
        let RunIo { word, len, n, n_data, walk, misses } = io;
        let (fills, shift) = self.fa_lru_fill_terms(asid);
        self.commit_fa_lru();
        self.filter.clear();
        let Tlb { index, order, slots, size_count, present, deferred, near, .. } = self;
        let Some(index) = index.as_mut() else { unreachable!("fully associative TLBs have an index") };
        let Some(near) = near.as_deref_mut() else { unreachable!("fully associative LRU TLBs have a table") };
        let start = i;
        near.clear();
        // The time of a use at position `p` (`used == p + 1`): from 1 at `start`.
        let clock = (start as u64).wrapping_neg();
        let (mut data_refs, mut fills_made, mut evictions, mut found, mut applied) = (0u64, 0u64, 0u64, 0u64, 0u64);
        let mut reads = 0u64;
        while i < len {
            while i < len {
                let w = word(i);
                let e = Near::entry(w >> 1);
                // A slow word's page (`SLOW_WORD >> 1`) is no tag: tags are pages below 2^52,
                // or INVALID.
                if near.tag[e] != w >> 1 {
                    break;
                }
                data_refs += w & 1;
                i += 1;
                near.used[e] = i as u64;
            }
            if i >= len {
                break;
            }
            let w = word(i);
            if w == SLOW_WORD {
                break;
            }
            let vpn = w >> 1;
            let e = Near::entry(vpn);
            let b = index.bucket(vpn, asid.0);
            if let Some(slot) = index.find(index.head(b), vpn, asid.0, slots) {
                if WATCH && watch.protected(slots[slot as usize].data.pfn) {
                    if w & 1 != 0 && (watch.stores)(i) {
                        break;
                    }
                    // Not in the table: its use is recorded now (every use the table holds is
                    // of another slot).
                    data_refs += w & 1;
                    deferred.record_at(slot, clock.wrapping_add(i as u64 + 1));
                    found += 1;
                    i += 1;
                    continue;
                }
                data_refs += w & 1;
                near.leave(e, deferred, clock);
                near.enter(e, vpn, slot, i as u64 + 1);
                found += 1;
                i += 1;
                continue;
            }
            let Some((pte, n_reads)) = (if fills { walk(vpn) } else { None }) else { break };
            if WATCH && watch.stops(i, w & 1, pte.pfn.0) {
                break;
            }
            reads += n_reads as u64;
            data_refs += w & 1;
            // `fill_fa_lru` of a process's base-page entry: the tail makes room, once the list
            // has the uses recorded.
            near.leave_all(deferred, clock);
            applied += deferred.used.len() as u64;
            deferred.apply(order);
            let slot = order.tail(0);
            // The victim's page leaves the table, if it is there.
            let old = slots[slot as usize].key;
            let o = Near::entry(old);
            if near.tag[o] == old && near.slot[o] == slot {
                near.tag[o] = INVALID;
            }
            let data = TlbData { pfn: pte.pfn.0, shift, valid: 0 };
            evictions += fa_lru_refill(index, slots, size_count, present, slot, b, asid.0, vpn, data) as u64;
            order.tail_to_head(0);
            // In the table with no use since: the fill's is applied (at the head).
            if !(WATCH && watch.protected(pte.pfn.0)) {
                near.enter(e, vpn, slot, 0);
            }
            fills_made += 1;
            i += 1;
        }
        near.leave_all(deferred, clock);
        applied += deferred.used.len() as u64;
        deferred.apply(order);
        misses.reads += reads;
        misses.fills += fills_made;
        misses.evictions += evictions;
        misses.near_misses += found + fills_made;
        misses.deferred += applied;
        *n += (i - start) as u64;
        *n_data += data_refs;
        i
    }

    /// [`Tlb::fa_lru_run`] without the table: the run commits the two-entry filter's pending
    /// hits and empties it first, and no lookup tests it.
    ///
    /// Each reference's probe of the index starts one reference early: its bucket and the
    /// bucket's first slot are read before the previous reference's hit or miss is known (and
    /// read again after a fill, which may change them). A mispredicted hit or miss then
    /// restarts the next lookup at the slot's key, not at the word. The list's head is held
    /// in a register.
    ///
    /// Built with `WATCH`, a data reference whose entry (or filling PTE) has a write-protected
    /// frame asks whether it stores, and stops the run if it does.
    #[inline(always)]
    fn fa_lru_run_ahead<const WATCH: bool, W, F, P, S>(
        &mut self,
        asid: Asid,
        mut i: usize,
        io: RunIo<'_, W, F>,
        watch: &Watch<P, S>,
    ) -> usize
    where
        W: Fn(usize) -> u64,
        F: FnMut(u64) -> Option<(Pte, u32)>,
        P: Fn(u64) -> bool,
        S: Fn(usize) -> bool,
    {
        let RunIo { word, len, n, n_data, walk, misses } = io;
        let (fills, shift) = self.fa_lru_fill_terms(asid);
        self.commit_fa_lru();
        self.filter.clear();
        let Tlb { index, order, slots, size_count, present, .. } = self;
        let Some(index) = index.as_mut() else { unreachable!("fully associative TLBs have an index") };
        let start = i;
        let (mut data_refs, mut fills_made, mut evictions, mut reads) = (0, 0, 0, 0u64);
        let mut head = order.head(0);
        // Word `i`, its bucket and the bucket's first slot (a slow word's too: it has a bucket
        // like any page, and stops the run before anything reads it).
        let mut ahead_word = if i < len { word(i) } else { 0 };
        let mut ahead_bucket = index.bucket(ahead_word >> 1, asid.0);
        let mut ahead_first = index.head(ahead_bucket);
        while i < len {
            let (w, b, first) = (ahead_word, ahead_bucket, ahead_first);
            if i + 1 < len {
                ahead_word = word(i + 1);
            }
            ahead_bucket = index.bucket(ahead_word >> 1, asid.0);
            ahead_first = index.head(ahead_bucket);
            if w == SLOW_WORD {
                break;
            }
            let vpn = w >> 1;
            if let Some(slot) = index.find(first, vpn, asid.0, slots) {
                if WATCH && watch.stops(i, w & 1, slots[slot as usize].data.pfn) {
                    break;
                }
                data_refs += w & 1;
                order.move_to_head_held(&mut head, slot);
                i += 1;
                continue;
            }
            let Some((pte, n_reads)) = (if fills { walk(vpn) } else { None }) else { break };
            if WATCH && watch.stops(i, w & 1, pte.pfn.0) {
                break;
            }
            reads += n_reads as u64;
            data_refs += w & 1;
            let slot = order.before(head);
            let data = TlbData { pfn: pte.pfn.0, shift, valid: 0 };
            evictions += fa_lru_refill(index, slots, size_count, present, slot, b, asid.0, vpn, data) as u64;
            head = slot;
            fills_made += 1;
            // The fill changed the chains of `b` and of the victim's bucket.
            ahead_first = index.head(ahead_bucket);
            i += 1;
        }
        order.set_head(0, head);
        misses.reads += reads;
        misses.fills += fills_made;
        misses.evictions += evictions;
        *n += (i - start) as u64;
        *n_data += data_refs;
        i
    }

    /// [`Tlb::fill`] for a caller that needs only whether an entry was evicted and whether the
    /// fill merged (the engine's plain loop): the same fill, with the fully associative LRU
    /// path inline.
    #[inline(always)]
    pub(crate) fn fill_outcome(&mut self, asid: u32, vpn: Vpn, pte: Pte) -> (bool, bool) {
        if self.fa_lru && self.blocks == 0 {
            let data = TlbData { pfn: pte.pfn.0, shift: self.base.shift() as u8, valid: 0 };
            return (self.fill_fa_lru(asid, vpn.0, data).evicted.is_some(), false);
        }
        let f = self.fill(asid, vpn, pte);
        (f.evicted.is_some(), f.merged)
    }
}

/// What a run of [`Tlb::fa_lru_run`] reads and counts (its arguments of those names).
struct RunIo<'a, W, F> {
    word: &'a W,
    len: usize,
    n: &'a mut u64,
    n_data: &'a mut u64,
    walk: &'a mut F,
    misses: &'a mut FaLruMisses,
}

impl<P: Fn(u64) -> bool, S> Watch<P, S> {
    /// True if frame `pfn` holds a write-protected page.
    #[inline(always)]
    fn protected(&self, pfn: u64) -> bool {
        (self.protected)(pfn)
    }
}

/// The fill of [`Tlb::fa_lru_run`]: `slot` (the tail) gets the base-page entry of `vpn` of
/// `asid`, whose bucket in `index` is `b`, in place of what it held (taken out of the index).
/// Returns whether that was an entry (else the slot was empty, now counted). The caller moves
/// the slot to the head.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn fa_lru_refill(
    index: &mut Index,
    slots: &mut [Slot],
    size_count: &mut [u32; 64],
    present: &mut u64,
    slot: u32,
    b: usize,
    asid: u32,
    vpn: u64,
    data: TlbData,
) -> bool {
    let s = slot as usize;
    let old = &slots[s];
    let evicted = old.key != INVALID;
    if evicted {
        debug_assert_ne!(old.asid, GLOBAL, "fa_lru_lookup holds only without global entries");
        index.remove(old.key, old.asid, slot);
    } else {
        size_count[0] += 1;
        *present |= 1;
    }
    index.insert_in(b, slot);
    slots[s] = Slot { key: vpn, asid, data };
    evicted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::{PageSize, Pfn};
    use crate::tlb::{Geometry, Policy};

    fn tlb(entries: u32, ways: u32, policy: Policy) -> Tlb {
        Tlb::new(Geometry { entries, ways, policy, seed: 1 }, PageSize::SIZE_4K).unwrap()
    }

    /// [`Tlb::fa_lru_run`] against [`Tlb::hits`] and [`Tlb::fill`] one reference at a time, on
    /// runs of two processes over 3, 40 or 200 pages (filter hits, index hits, long runs of
    /// misses that evict the filter's entries), slow words, walks that leave some misses to the
    /// caller, and (built with `WATCH`) stores, some to write-protected frames: a run must stop
    /// at the first of those, hit or miss, and at nothing else.
    #[test]
    fn fa_lru_run_equals_lookups_and_fills() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut rnd = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let pte = |vpn: u64| Pte { pfn: Pfn(vpn * 3 + 7), size: PageSize::SIZE_4K, valid: 0 };
        // A quarter of the frames hold write-protected pages.
        let protected = |pfn: u64| pfn % 4 == 1;
        for entries in [32u32, 64] {
            let mut fast = tlb(entries, entries, Policy::Lru);
            let mut reference = fast.clone();
            let (mut fills, mut left, mut stopped) = (0u64, 0u64, 0u64);
            for _ in 0..400 {
                let asid = Asid(1 + rnd(2) as u32);
                let pages = [3, 40, 200][rnd(3) as usize];
                let len = rnd(500) as usize;
                let words: Vec<u64> =
                    (0..len).map(|_| if rnd(60) == 0 { SLOW_WORD } else { rnd(pages) << 1 | rnd(2) }).collect();
                // Which references store (data words only), rarely or often.
                let store_every = [3, 50][rnd(2) as usize];
                let stores: Vec<bool> = words.iter().map(|&w| w & 1 != 0 && rnd(store_every) == 0).collect();
                let refuse = rnd(2) == 0;
                let mut i = 0;
                while i < words.len() {
                    let (mut n, mut n_data, mut m) = (0, 0, FaLruMisses::default());
                    let mut walk = |v: u64| (!refuse || v % 5 != 0).then(|| (pte(v), 2));
                    // Either build of the loop, with the test of stores or without it,
                    // changing from run to run as the engine's choice does.
                    let word = |k: usize| words[k];
                    let watch = Watch { protected, stores: |k: usize| stores[k] };
                    let watching = rnd(2) == 0;
                    macro_rules! build {
                        ($near:literal, $watching:literal, $w:expr) => {
                            fast.fa_lru_run::<$near, $watching>(
                                asid,
                                &word,
                                i,
                                len,
                                &mut n,
                                &mut n_data,
                                &mut walk,
                                $w,
                                &mut m,
                            )
                        };
                    }
                    let j = match (rnd(2) == 0, watching) {
                        (true, false) => build!(true, false, &NO_WATCH),
                        (false, false) => build!(false, false, &NO_WATCH),
                        (true, true) => build!(true, true, &watch),
                        (false, true) => build!(false, true, &watch),
                    };
                    let (mut misses, mut evictions) = (0, 0);
                    let stops = |k: usize| watching && stores[k] && protected(pte(words[k] >> 1).pfn.0);
                    for (k, &w) in words.iter().enumerate().take(j).skip(i) {
                        assert_ne!(w, SLOW_WORD);
                        assert!(!stops(k), "a run went past a store to a write-protected page");
                        if !reference.hits(asid, Vpn(w >> 1)) {
                            misses += 1;
                            evictions += reference.fill(asid.0, Vpn(w >> 1), pte(w >> 1)).evicted.is_some() as u64;
                        }
                    }
                    assert_eq!((n, n_data), ((j - i) as u64, words[i..j].iter().map(|w| w & 1).sum()));
                    assert_eq!((m.fills, m.evictions, m.reads), (misses, evictions, 2 * misses));
                    fills += misses;
                    if j == words.len() {
                        break;
                    }
                    // A slow word, a miss the walk left, or a store to a write-protected page
                    // (hit or miss): both TLBs take it the general way.
                    let w = words[j];
                    if w != SLOW_WORD {
                        let vpn = Vpn(w >> 1);
                        if stops(j) {
                            stopped += 1;
                            let hit = fast.hits(asid, vpn);
                            assert_eq!(hit, reference.hits(asid, vpn));
                            if !hit {
                                for t in [&mut fast, &mut reference] {
                                    t.fill(asid.0, vpn, pte(vpn.0));
                                }
                            }
                        } else {
                            left += 1;
                            assert!(refuse && vpn.0 % 5 == 0, "a run stopped at a miss it could fill");
                            for t in [&mut fast, &mut reference] {
                                assert!(!t.hits(asid, vpn));
                                t.fill(asid.0, vpn, pte(vpn.0));
                            }
                        }
                    }
                    // Lookups between runs, as the engine makes them for the references of a
                    // slow word: pages the run looked up lately, so that the filter's entries
                    // are hit there and are pending (one, both, in either order) when the next
                    // run starts.
                    for _ in 0..rnd(4) {
                        let w = words[j - rnd((j - i + 1) as u64) as usize];
                        if w == SLOW_WORD {
                            continue;
                        }
                        let vpn = Vpn(w >> 1);
                        let hit = fast.hits(asid, vpn);
                        assert_eq!(hit, reference.hits(asid, vpn));
                        if !hit {
                            for t in [&mut fast, &mut reference] {
                                t.fill(asid.0, vpn, pte(vpn.0));
                            }
                        }
                    }
                    i = j + 1;
                }
                assert_eq!(fast.translations(), reference.translations());
            }
            assert!(
                fills > 10_000 && left > 1_000 && stopped > 500,
                "{fills} fills, {left} misses left to the caller, {stopped} stores stopped at"
            );
        }
    }
}
