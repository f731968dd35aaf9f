//! LRU stack distances: one pass gives the misses of every TLB size at once.
//!
//! [`FaStack`] is the fully associative stack: each resident page holds the *stamp* (time) of its
//! last use, and a page's stack distance is the number of occupied stamps at or after its own.
//! The occupied stamps are a bit set with a count per word, and a Fenwick tree counts them per
//! block of 1,024 stamps: a distance is the tree's sum over the blocks before the stamp's, one
//! vector sum of the word counts before it in its block and one population count; marking a
//! stamp is one bit, one count and the tree's path (none while the axis is one block). The time
//! axis is compacted when it fills, so memory follows the footprint (pages and holes), not the
//! trace length; compacting walks the set bits and rebuilds the counts in place. The most
//! recently used pages (up to eight) are also kept in a list in recency order: they hold the
//! newest stamps, in any order, so a reference to one of them is answered by its position in
//! the list, without the tree.
//!
//! [`SetStacks`] keeps one short stack per set for a given number of sets, as deep as the widest
//! associativity asked for at that set count.
//!
//! Both model invalidations exactly with *holes*: an invalidated entry leaves a hole at its stack
//! position, which is what an empty way is in a real TLB of every size that held it. A reference
//! at depth `d` (infinite for a miss) with the topmost hole at `h < d` fills that hole instead of
//! pushing the stack down below it: the entries above `h` move down one, the hole is consumed, and
//! a hit leaves a hole at its old position `d`. For every size `C` this is exactly LRU with
//! invalid ways filled first: sizes with `C < h` evict their least recently used entry, sizes with
//! `h <= C < d` fill their empty way, sizes with `C >= d` hit and keep their hole.

use std::collections::BTreeSet;

/// No page (an empty slot or stamp).
pub(crate) const EMPTY: u64 = u64::MAX;
/// An invalidated entry.
pub(crate) const HOLE: u64 = u64::MAX - 1;

/// Page -> stamp of its last use: open addressing with linear probing over (key, stamp)
/// entries, a key's first place the top bits of a multiplicative (Fibonacci) hash, at most half
/// the entries used. A reference's one map operation ([`KeyMap::insert`]: the old stamp out,
/// the new one in) is then usually one probe of one line, inline, where a general hash map's
/// group probe and call cost about a fifth of the stack's time on a uniform trace. Keys are
/// pages, never [`EMPTY`], which marks a free entry.
#[derive(Clone, Debug)]
struct KeyMap {
    entries: Vec<(u64, u32)>,
    /// `64 - log2(entries.len())`.
    shift: u32,
    len: usize,
}

impl Default for KeyMap {
    fn default() -> KeyMap {
        KeyMap::with_places(16)
    }
}

impl KeyMap {
    fn with_places(n: usize) -> KeyMap {
        debug_assert!(n.is_power_of_two() && n >= 2);
        KeyMap { entries: vec![(EMPTY, 0); n], shift: 64 - n.trailing_zeros(), len: 0 }
    }

    /// The place where the search for `key` starts.
    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (crate::addr::fib_hash(key) >> self.shift) as usize
    }

    /// The place of `key`, or of the free entry where it would go.
    #[inline(always)]
    fn place(&self, key: u64) -> usize {
        debug_assert_ne!(key, EMPTY);
        let mask = self.entries.len() - 1;
        let mut i = self.home(key);
        loop {
            let k = self.entries[i & mask].0;
            if k == key || k == EMPTY {
                return i & mask;
            }
            i += 1;
        }
    }

    /// Maps `key` to `stamp`; returns its previous stamp, if it had one.
    #[inline(always)]
    fn insert(&mut self, key: u64, stamp: u32) -> Option<u32> {
        let i = self.place(key);
        let e = &mut self.entries[i];
        if e.0 == key {
            return Some(std::mem::replace(&mut e.1, stamp));
        }
        self.insert_new(i, key, stamp);
        None
    }

    /// Puts `key`, which is not mapped, at free place `i` (found by [`KeyMap::place`]).
    #[inline(never)]
    fn insert_new(&mut self, i: usize, key: u64, stamp: u32) {
        if (self.len + 1) * 2 > self.entries.len() {
            let mut bigger = KeyMap::with_places(self.entries.len() * 2);
            for &(k, t) in self.entries.iter().filter(|e| e.0 != EMPTY) {
                let j = bigger.place(k);
                bigger.entries[j] = (k, t);
            }
            bigger.len = self.len;
            *self = bigger;
            let j = self.place(key);
            self.entries[j] = (key, stamp);
        } else {
            self.entries[i] = (key, stamp);
        }
        self.len += 1;
    }

    fn get_mut(&mut self, key: &u64) -> Option<&mut u32> {
        let i = self.place(*key);
        let e = &mut self.entries[i];
        (e.0 == *key).then_some(&mut e.1)
    }

    /// Takes `key` out, moving back the entries after it that their searches would no longer
    /// reach (linear probing's deletion, no tombstones).
    fn remove(&mut self, key: &u64) -> Option<u32> {
        let mask = self.entries.len() - 1;
        let mut i = self.place(*key);
        if self.entries[i].0 != *key {
            return None;
        }
        let stamp = self.entries[i].1;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let k = self.entries[j].0;
            if k == EMPTY {
                break;
            }
            // The entry at `j` stays unless its home is cyclically outside (i, j].
            let h = self.home(k);
            if (j.wrapping_sub(h) & mask) >= (j.wrapping_sub(i) & mask) {
                self.entries[i] = self.entries[j];
                i = j;
            }
        }
        self.entries[i] = (EMPTY, 0);
        self.len -= 1;
        Some(stamp)
    }

    fn keys(&self) -> impl Iterator<Item = &u64> {
        self.entries.iter().map(|(k, _)| k).filter(|&&k| k != EMPTY)
    }
}

impl std::ops::Index<&u64> for KeyMap {
    type Output = u32;
    fn index(&self, key: &u64) -> &u32 {
        let e = &self.entries[self.place(*key)];
        assert_eq!(e.0, *key, "key not mapped");
        &e.1
    }
}

/// Pages of a [`FaStack`] answered from a list of the most recent ones, without the tree.
const LIST: usize = 8;

/// Words of a [`FaStack`]'s bit set per block of its tree (blocks of 1,024 stamps; the axis's
/// words are a multiple).
const BLOCK_WORDS: usize = 16;

/// The exact LRU stack of a fully associative TLB of every size up to `max` entries.
#[derive(Clone, Debug)]
pub(crate) struct FaStack {
    /// Page -> stamp of its last use.
    map: KeyMap,
    /// The occupied stamps (a page's or a hole's), one bit each, over the whole axis.
    bits: Vec<u64>,
    /// Occupied stamps in each word of `bits` (its population count, kept as bits flip: a
    /// distance then needs one population count, not one per word).
    wcnt: Vec<u8>,
    /// Fenwick tree (1-based) over blocks of [`BLOCK_WORDS`] words of `bits`: the occupied
    /// stamps of each block. A distance is the tree's sum over the blocks before the stamp's,
    /// the counts of the words before it in its block and one population count.
    tree: Vec<u32>,
    /// What holds each stamp: a key, [`HOLE`] or [`EMPTY`].
    owner: Vec<u64>,
    /// Next stamp.
    now: u32,
    /// Occupied stamps (pages and holes).
    live: u32,
    /// Stamps of holes.
    holes: BTreeSet<u32>,
    /// The most recently used pages, most recent first (`len` of them, the rest `EMPTY`; none
    /// while there are holes), with their stamps. They hold the `len` newest stamps in some
    /// order, so a hit among them is answered by its position without touching the tree or the
    /// stamps; the one that leaves the list takes the oldest of those stamps.
    list: [u64; LIST],
    stamps: [u32; LIST],
    len: usize,
    /// The list's length limit: [`LIST`], or 2 while few references land between depth 3 and
    /// [`LIST`] (a uniform random trace), where scanning the list would cost more than it saves.
    limit: usize,
    /// Since the limit was last chosen (every 1,024 references past the top two): references
    /// at depths 3 to [`LIST`], and those deeper or first.
    near: u64,
    far: u64,
    /// `hist[d]`: references at stack distance `d` (1-based) for `d <= max`; `hist[max + 1]`:
    /// deeper or first references.
    pub hist: Vec<u64>,
    max: u32,
    /// Whether [`FaStack::access_slow`] may use the `popcnt` instruction: the processor has it.
    popcnt: bool,
}

impl FaStack {
    /// A stack that resolves distances up to `max`.
    pub(crate) fn new(max: u32) -> FaStack {
        let cap = 1024;
        FaStack {
            map: KeyMap::default(),
            bits: vec![0; cap / 64],
            wcnt: vec![0; cap / 64],
            tree: vec![0; cap / 64 / BLOCK_WORDS + 1],
            owner: vec![EMPTY; cap],
            now: 0,
            live: 0,
            holes: BTreeSet::new(),
            list: [EMPTY; LIST],
            stamps: [0; LIST],
            len: 0,
            limit: LIST,
            near: 0,
            far: 0,
            hist: vec![0; max as usize + 2],
            max,
            popcnt: has_popcnt(),
        }
    }

    /// One reference to `key`.
    #[inline(always)]
    pub(crate) fn access(&mut self, key: u64) {
        if key == self.list[0] {
            self.hist[1] += 1;
        } else if key == self.list[1] {
            self.add_top_run(0, 1);
        } else if let Some(d) = self.list[2..self.limit].iter().position(|&k| k == key) {
            // At depth d + 3: to the front of the list (no stamp changes).
            let d = d + 2;
            self.near += 1;
            self.hist[(d + 1).min(self.max as usize + 1)] += 1;
            self.list[..=d].rotate_right(1);
            self.stamps[..=d].rotate_right(1);
        } else {
            self.access_slow(key);
        }
    }

    /// The two most recently used pages, most recent first, while the stack has no holes
    /// (else `[EMPTY; 2]`; the second is `EMPTY` before there are two).
    #[inline(always)]
    pub(crate) fn top(&self) -> [u64; 2] {
        [self.list[0], self.list[1]]
    }

    /// [`FaStack::access`] of a run of references to the top two pages: `same` to the page
    /// used just before, `switch` to the other one (each at depth 2, and the two swap).
    #[inline(always)]
    pub(crate) fn add_top_run(&mut self, same: u64, switch: u64) {
        self.hist[1] += same;
        self.hist[2.min(self.max as usize + 1)] += switch;
        if switch & 1 == 1 {
            self.list.swap(0, 1);
            self.stamps.swap(0, 1);
        }
    }

    /// Gives the list's pages their stamps in their order (the newest to the most recent) and
    /// keeps the first `keep` of them in the list: before a hole is made (none), or when the
    /// limit drops to 2.
    fn settle(&mut self, keep: usize) {
        let n = self.len;
        let mut stamps = self.stamps;
        stamps[..n].sort_unstable_by(|x, y| y.cmp(x));
        for ((&k, &t), &was) in self.list[..n].iter().zip(&stamps[..n]).zip(&self.stamps[..n]) {
            if was != t {
                *self.map.get_mut(&k).expect("list pages are mapped") = t;
                self.owner[t as usize] = k;
            }
        }
        self.stamps = stamps;
        self.len = n.min(keep);
        self.list[self.len..].fill(EMPTY);
    }

    /// Chooses the list's limit from the references since the last choice.
    #[cold]
    fn choose_limit(&mut self) {
        // A list hit saves a tree update (a few hundred instructions); scanning six more
        // entries costs a few dozen on every reference below the top two.
        if self.near >= self.far / 8 {
            self.limit = LIST;
        } else if self.limit == LIST {
            self.settle(2);
            self.limit = 2;
        }
        (self.near, self.far) = (0, 0);
    }

    /// A reference below the list: the map, the tree and the list. Compiled twice, with and
    /// without the `popcnt` instruction, which x86-64 processors have had since about 2008 but
    /// the baseline target does not assume: a distance's population count of one word then
    /// costs one instruction instead of a dozen (the curve on the benchmark's synthetic trace
    /// 4 % faster, docs/curve.md).
    #[inline(never)]
    fn access_slow(&mut self, key: u64) {
        #[cfg(target_arch = "x86_64")]
        if self.popcnt {
            // SAFETY: `popcnt` is set only where the processor has the instruction (`new`).
            return unsafe { self.access_slow_popcnt(key) };
        }
        self.access_slow_with(key)
    }

    /// [`FaStack::access_slow`] compiled with the `popcnt` instruction.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    #[inline(never)]
    unsafe fn access_slow_popcnt(&mut self, key: u64) {
        self.access_slow_with(key)
    }

    #[inline(always)]
    fn access_slow_with(&mut self, key: u64) {
        if self.now as usize == self.owner.len() {
            // Before the page's own stamp is read: compacting renumbers it.
            self.compact();
        }
        let s = self.now;
        // One hash operation: the page's old stamp out, its new one in.
        let old = self.map.insert(key, s);
        let depth = match old {
            Some(t) => self.live - self.prefix(t),
            None => u32::MAX,
        };
        self.hist[depth.min(self.max + 1) as usize] += 1;
        // The topmost hole above the page (or anywhere, for a miss) is filled.
        let hole = self.holes.last().copied().filter(|&h| old.map_or(true, |t| h > t));
        match (hole, old) {
            (Some(h), Some(t)) => {
                self.holes.remove(&h);
                self.add(h, -1);
                self.owner[h as usize] = EMPTY;
                self.holes.insert(t);
                self.owner[t as usize] = HOLE;
                self.live -= 1;
            }
            (Some(h), None) => {
                self.holes.remove(&h);
                self.add(h, -1);
                self.owner[h as usize] = EMPTY;
                self.live -= 1;
            }
            (None, Some(t)) => {
                self.add(t, -1);
                self.owner[t as usize] = EMPTY;
                self.live -= 1;
            }
            (None, None) => {}
        }
        self.now += 1;
        self.add(s, 1);
        self.live += 1;
        self.owner[s as usize] = key;
        if self.holes.is_empty() {
            if self.limit == 2 && self.len == 2 {
                // What the general case below does, for the list of two (uniform traces).
                if self.stamps[0] < self.stamps[1] {
                    self.swap_list_stamps(0, 1);
                }
                self.list[1] = self.list[0];
                self.stamps[1] = self.stamps[0];
                self.list[0] = key;
                self.stamps[0] = s;
                self.count_list_depth(depth);
                return;
            }
            if self.len == self.limit {
                // The least recent page leaves the list with its oldest stamp.
                let last = self.limit - 1;
                let m = (0..self.limit).min_by_key(|&i| self.stamps[i]).expect("a full list");
                if m != last {
                    self.swap_list_stamps(m, last);
                }
                self.len -= 1;
                self.list[last] = EMPTY;
            }
            // The whole arrays (a fixed size: no call): the entries past `len` are `EMPTY`.
            self.list.copy_within(0..LIST - 1, 1);
            self.stamps.copy_within(0..LIST - 1, 1);
            self.list[0] = key;
            self.stamps[0] = s;
            self.len += 1;
            self.count_list_depth(depth);
        } else {
            debug_assert_eq!(self.len, 0, "no list while there are holes");
        }
    }

    /// Swaps the stamps of list entries `a` and `b` (their pages keep their places).
    fn swap_list_stamps(&mut self, a: usize, b: usize) {
        let (ka, kb, ta, tb) = (self.list[a], self.list[b], self.stamps[a], self.stamps[b]);
        *self.map.get_mut(&ka).expect("list pages are mapped") = tb;
        *self.map.get_mut(&kb).expect("list pages are mapped") = ta;
        self.owner[tb as usize] = ka;
        self.owner[ta as usize] = kb;
        self.stamps.swap(a, b);
    }

    /// Counts a reference past the list's top two for the choice of its limit.
    #[inline(always)]
    fn count_list_depth(&mut self, depth: u32) {
        if (3..=LIST as u32).contains(&depth) {
            self.near += 1;
        } else {
            self.far += 1;
        }
        if self.near + self.far >= 1024 {
            self.choose_limit();
        }
    }

    /// Invalidates `key` if present: it leaves a hole.
    pub(crate) fn invalidate(&mut self, key: u64) {
        self.settle(0);
        if let Some(t) = self.map.remove(&key) {
            self.owner[t as usize] = HOLE;
            self.holes.insert(t);
        }
    }

    /// Every key present for which `f` holds (for range invalidations; allocates).
    pub(crate) fn keys_where(&self, f: impl Fn(u64) -> bool) -> Vec<u64> {
        self.map.keys().copied().filter(|&k| f(k)).collect()
    }

    /// Occupied stamps before `t`.
    #[inline(always)]
    fn prefix(&self, t: u32) -> u32 {
        let (w, b) = (t as usize / 64, t % 64);
        let mut s = (self.bits[w] & ((1u64 << b) - 1)).count_ones();
        let first = w / BLOCK_WORDS * BLOCK_WORDS;
        let counts: &[u8; BLOCK_WORDS] = self.wcnt[first..first + BLOCK_WORDS].try_into().unwrap();
        let within = sum_before(counts, w - first);
        debug_assert_eq!(
            within,
            self.bits[first..w].iter().map(|x| x.count_ones()).sum::<u32>(),
            "word counts of block {}",
            w / BLOCK_WORDS
        );
        s += within;
        let mut i = w / BLOCK_WORDS;
        while i > 0 {
            s += self.tree[i];
            i &= i - 1;
        }
        s
    }

    /// Marks stamp `t` occupied (`v` = 1) or free (`v` = -1).
    #[inline(always)]
    fn add(&mut self, t: u32, v: i32) {
        let w = t as usize / 64;
        let bit = 1u64 << (t % 64);
        debug_assert_eq!(self.bits[w] & bit != 0, v < 0, "stamp {t} occupied twice or freed twice");
        self.bits[w] ^= bit;
        self.wcnt[w] = self.wcnt[w].wrapping_add_signed(v as i8);
        let mut i = w / BLOCK_WORDS + 1;
        let n = self.tree.len();
        while i < n {
            self.tree[i] = self.tree[i].wrapping_add_signed(v);
            i += i & i.wrapping_neg();
        }
    }

    /// Renumbers the occupied stamps from 0 in order (growing the axis if more than half of it
    /// is occupied) and rebuilds the bit set and the tree. In place, in time linear in the
    /// occupied stamps and the axis's words: a stamp's new number is at most its old one.
    #[cold]
    fn compact(&mut self) {
        let mut n = 0u32;
        let mut holes = BTreeSet::new();
        let words = (self.now as usize).div_ceil(64);
        for w in 0..words {
            let mut x = self.bits[w];
            while x != 0 {
                let t = w * 64 + x.trailing_zeros() as usize;
                x &= x - 1;
                let k = self.owner[t];
                self.owner[n as usize] = k;
                if k == HOLE {
                    holes.insert(n);
                } else {
                    *self.map.get_mut(&k).expect("owner of a stamp is mapped") = n;
                }
                n += 1;
            }
        }
        debug_assert_eq!(n, self.live);
        self.holes = holes;
        let mut cap = self.owner.len();
        while n as usize * 2 > cap {
            cap *= 2;
        }
        if cap != self.owner.len() {
            self.owner.resize(cap, EMPTY);
            self.bits.resize(cap / 64, 0);
            self.wcnt.resize(cap / 64, 0);
            self.tree.resize(cap / 64 / BLOCK_WORDS + 1, 0);
        }
        // Stamps 0..n occupied: full words, then a partial one; the tree built in linear time
        // (each node passed on to its parent).
        let (full, rest) = (n as usize / 64, n % 64);
        self.bits.fill(0);
        self.bits[..full].fill(u64::MAX);
        self.wcnt.fill(0);
        self.wcnt[..full].fill(64);
        if rest > 0 {
            self.bits[full] = (1u64 << rest) - 1;
            self.wcnt[full] = rest as u8;
        }
        let tree = &mut self.tree;
        tree.fill(0);
        for (b, c) in self.wcnt.chunks(BLOCK_WORDS).enumerate() {
            tree[b + 1] = c.iter().map(|&x| x as u32).sum();
        }
        let nb = tree.len();
        for i in 1..nb {
            let j = i + (i & i.wrapping_neg());
            if j < nb {
                tree[j] += tree[i];
            }
        }
        self.now = n;
        for i in 0..self.len {
            self.stamps[i] = self.map[&self.list[i]];
        }
    }
}

/// Whether the processor has the `popcnt` instruction.
fn has_popcnt() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("popcnt");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The sum of `counts[..k]` (`k < 16`): a few vector instructions.
#[inline(always)]
fn sum_before(counts: &[u8; 16], k: usize) -> u32 {
    debug_assert!(k < 16);
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of x86-64; the load reads the 16 bytes of `counts`.
        unsafe {
            let v = _mm_loadu_si128(counts.as_ptr() as *const __m128i);
            let lanes = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            let keep = _mm_cmpgt_epi8(_mm_set1_epi8(k as i8), lanes);
            let sums = _mm_sad_epu8(_mm_and_si128(v, keep), _mm_setzero_si128());
            (_mm_cvtsi128_si32(sums) + _mm_extract_epi16::<4>(sums)) as u32
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        counts[..k].iter().map(|&c| c as u32).sum()
    }
}

/// Per-set LRU stacks for one number of sets (a power of two), `depth` entries deep.
#[derive(Clone, Debug)]
pub(crate) struct SetStacks {
    /// `sets * depth` keys, each set most recent first; [`EMPTY`] at the tail, [`HOLE`]s anywhere.
    slots: Vec<u64>,
    mask: u64,
    depth: usize,
    /// Holes anywhere (else the hole search is skipped).
    holes: u64,
    /// `hist[d]`: references at distance `d` within their set; `hist[depth + 1]`: deeper or first.
    pub hist: Vec<u64>,
}

impl SetStacks {
    pub(crate) fn new(sets: u32, depth: u32) -> SetStacks {
        SetStacks {
            slots: vec![EMPTY; sets as usize * depth as usize],
            mask: sets as u64 - 1,
            depth: depth as usize,
            holes: 0,
            hist: vec![0; depth as usize + 2],
        }
    }

    /// The set of `key` (its page number's low bits, as the TLB indexes it).
    #[inline(always)]
    pub(crate) fn set_of(&self, key: u64) -> usize {
        (key & self.mask) as usize
    }

    /// [`SetStacks::access`] of a run of references to `x`, the most recent key, and `y`, the
    /// one before it (`EMPTY`: none), which [`SetStacks::access`] of `y` then `x` (and any
    /// references to them) left at the top of their sets, or `y` second in a set shared with
    /// `x`: `same` references to the key used just before, `switch` to the other one.
    #[inline(always)]
    pub(crate) fn add_pair_run(&mut self, x: u64, y: u64, same: u64, switch: u64) {
        if y == EMPTY || (x ^ y) & self.mask != 0 {
            // Each key keeps the top of its own set.
            self.hist[1] += same + switch;
            return;
        }
        // One set: a switch finds the other key second (in a one-way set, missing: depth 2 is
        // then the miss bucket) and puts it on top.
        self.hist[1] += same;
        self.hist[2] += switch;
        if switch & 1 == 1 {
            let base = self.set_of(x) * self.depth;
            if self.depth == 1 {
                self.slots[base] = y;
            } else {
                self.slots.swap(base, base + 1);
            }
        }
    }

    #[inline(always)]
    pub(crate) fn access(&mut self, key: u64) {
        if self.slots[self.set_of(key) * self.depth] == key {
            self.hist[1] += 1;
            return;
        }
        if self.holes == 0 {
            // Below the top, the common depths without a branch on where the key is (a random
            // trace's depth is a guess): a fixed-length search and shift, as conditional moves.
            match self.depth {
                8 => return self.access_fixed::<8>(key),
                4 => return self.access_fixed::<4>(key),
                2 => return self.access_fixed::<2>(key),
                _ => {}
            }
        }
        self.access_any(key)
    }

    /// [`SetStacks::access`] in sets `D` deep without holes, of a key not at the top of its set.
    #[inline(always)]
    fn access_fixed<const D: usize>(&mut self, key: u64) {
        debug_assert!(self.depth == D && self.holes == 0);
        let set = self.set_of(key);
        let s: &mut [u64; D] = (&mut self.slots[set * D..(set + 1) * D]).try_into().expect("sets of D slots");
        debug_assert_ne!(s[0], key);
        let mut pos = D;
        for j in (1..D).rev() {
            pos = if s[j] == key { j } else { pos };
        }
        self.hist[pos + 1] += 1;
        // `copy_within(0..end, 1)` with `end` the key's position (the last slot for a miss).
        let end = pos.min(D - 1);
        for j in (1..D).rev() {
            s[j] = if j <= end { s[j - 1] } else { s[j] };
        }
        s[0] = key;
    }

    /// [`SetStacks::access`] of a key not at the top of its set.
    #[inline(always)]
    fn access_any(&mut self, key: u64) {
        let set = self.set_of(key);
        let s = &mut self.slots[set * self.depth..(set + 1) * self.depth];
        let pos = s.iter().position(|&k| k == key);
        let end = pos.unwrap_or(self.depth);
        self.hist[end + 1] += 1;
        let hole = if self.holes > 0 { s[..end].iter().position(|&k| k == HOLE) } else { None };
        match hole {
            Some(h) => {
                s.copy_within(0..h, 1);
                self.holes -= 1;
                if let Some(p) = pos {
                    s[p] = HOLE;
                    self.holes += 1;
                }
            }
            None => {
                let end = end.min(self.depth - 1);
                if let Some(&HOLE) = s.get(end).filter(|_| pos.is_none()) {
                    self.holes -= 1; // a hole at the bottom falls off
                }
                s.copy_within(0..end, 1);
            }
        }
        s[0] = key;
    }

    /// Invalidates every key for which `f` holds.
    pub(crate) fn invalidate_where(&mut self, f: impl Fn(u64) -> bool) {
        for k in &mut self.slots {
            if *k != EMPTY && *k != HOLE && f(*k) {
                *k = HOLE;
                self.holes += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain LRU list of `cap` entries with invalid entries filled first.
    struct Lru {
        cap: usize,
        v: Vec<u64>,
    }
    impl Lru {
        fn access(&mut self, k: u64) -> bool {
            if let Some(p) = self.v.iter().position(|&x| x == k) {
                self.v.remove(p);
                self.v.insert(0, k);
                return true;
            }
            if self.v.len() == self.cap {
                self.v.pop();
            }
            self.v.insert(0, k);
            false
        }
        fn invalidate(&mut self, k: u64) {
            self.v.retain(|&x| x != k);
        }
    }

    fn rng(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn key_map_matches_a_hash_map() {
        // Inserts, updates and removals over key sets that cluster (consecutive pages, which
        // share probe runs) and spread, through several growths; every answer against std's map.
        let mut st = 7u64;
        for spread in [1u64, 3, 1 << 20] {
            let (mut m, mut r) = (KeyMap::default(), std::collections::HashMap::new());
            for i in 0..40_000u32 {
                let x = rng(&mut st);
                let key = (x % 3000) * spread;
                match x >> 60 {
                    0..=2 => assert_eq!(m.remove(&key), r.remove(&key), "remove {key}"),
                    3 => assert_eq!(m.get_mut(&key).map(|t| *t), r.get(&key).copied(), "get {key}"),
                    _ => assert_eq!(m.insert(key, i), r.insert(key, i), "insert {key}"),
                }
                assert_eq!(m.len, r.len());
            }
            let mut keys: Vec<u64> = m.keys().copied().collect();
            keys.sort_unstable();
            let mut want: Vec<u64> = r.keys().copied().collect();
            want.sort_unstable();
            assert_eq!(keys, want);
            for (k, t) in &r {
                assert_eq!(m[k], *t);
            }
            assert!(m.entries.len() >= 2 * m.len && m.entries.len() > 1024, "{} places", m.entries.len());
        }
    }

    #[test]
    fn fa_list_limit_changes_keep_distances_exact() {
        // Phases of uniform references over many pages (the list drops to the top two) and
        // of references among a few (it grows back to eight), with invalidations, compactions
        // and hits at every depth of the list.
        let sizes = [1usize, 2, 3, 4, 6, 8, 9, 12, 30, 100];
        let mut fa = FaStack::new(100);
        let mut refs: Vec<Lru> = sizes.iter().map(|&c| Lru { cap: c, v: Vec::new() }).collect();
        let mut misses = vec![0u64; sizes.len()];
        let mut st = 12345u64;
        let mut limits = Vec::new();
        let mut recent = [0u64; 6];
        for i in 0..120_000u64 {
            let r = rng(&mut st);
            let phase = (i / 20_000) % 2;
            // Uniform phases go back to the page of a few references before now and then: a
            // hit deep in the list, which leaves its stamps out of order when it shrinks.
            let key = match phase {
                0 if i % 10 == 0 => recent[(i as usize + 4) % 6],
                0 => r % 500,
                _ => (r >> 9) % 10,
            };
            recent[i as usize % 6] = key;
            if i % 4999 == 0 {
                fa.invalidate(key);
                refs.iter_mut().for_each(|l| l.invalidate(key));
                continue;
            }
            let (list, limit) = (fa.list, fa.limit);
            let mut keys = vec![key];
            if limit == LIST {
                // If this access shrinks the list, the pages that leave it come next, oldest
                // first: their depths show whether they left with their stamps in order.
                keys.extend(list.iter().rev().filter(|&&k| k != EMPTY && k != key));
            }
            for (j, &k) in keys.iter().enumerate() {
                if j > 0 && fa.limit == limit {
                    break;
                }
                fa.access(k);
                for (l, m) in refs.iter_mut().zip(&mut misses) {
                    *m += !l.access(k) as u64;
                }
            }
            if i % 7919 == 0 {
                fa.compact();
            }
            if i % 20_000 == 19_999 {
                limits.push(fa.limit);
            }
        }
        assert!(limits.contains(&2) && limits.contains(&LIST), "limits {limits:?}");
        assert_misses(&fa, &sizes, &misses, "");
    }

    /// The stack's misses of each fully associative size in `sizes` are `misses`.
    fn assert_misses(fa: &FaStack, sizes: &[usize], misses: &[u64], what: &str) {
        let total: u64 = fa.hist.iter().sum();
        for (&c, &m) in sizes.iter().zip(misses) {
            let hits: u64 = fa.hist[1..=c].iter().sum();
            assert_eq!(total - hits, m, "{what}FA size {c}");
        }
    }

    #[test]
    fn fa_matches_plain_lru_over_an_axis_of_several_blocks() {
        // A footprint of thousands of pages: the axis grows to several blocks of the tree, and
        // distances cross them (uniform references, with invalidations and their holes). Both
        // builds of the slow path: with the `popcnt` instruction where the processor has it,
        // and without.
        for popcnt in [false, true] {
            let sizes = [1usize, 64, 700, 1500, 2999];
            let mut fa = FaStack::new(3000);
            fa.popcnt = popcnt && has_popcnt();
            let mut refs: Vec<Lru> = sizes.iter().map(|&c| Lru { cap: c, v: Vec::new() }).collect();
            let mut misses = vec![0u64; sizes.len()];
            let mut st = 99u64;
            for i in 0..30_000u64 {
                let key = rng(&mut st) % 2500;
                if i % 89 == 0 {
                    fa.invalidate(key);
                    refs.iter_mut().for_each(|l| l.invalidate(key));
                    continue;
                }
                fa.access(key);
                for (l, m) in refs.iter_mut().zip(&mut misses) {
                    *m += !l.access(key) as u64;
                }
            }
            assert!(fa.tree.len() > 4, "an axis of {} blocks", fa.tree.len() - 1);
            assert_misses(&fa, &sizes, &misses, &format!("popcnt {}: ", fa.popcnt));
        }
    }

    #[test]
    fn set_stacks_of_each_depth_match_plain_lru() {
        // The depths with a search and shift of their own (2, 4, 8) and others, 16 sets, with
        // a phase of invalidations in the middle: their holes take the general path until
        // they are gone.
        for depth in [1usize, 2, 3, 4, 8] {
            let mut sets = SetStacks::new(16, depth as u32);
            let mut set_refs: Vec<Vec<Lru>> =
                (1..=depth).map(|w| (0..16).map(|_| Lru { cap: w, v: Vec::new() }).collect()).collect();
            let mut set_misses = vec![0u64; depth];
            let (mut st, mut total, mut holes_seen) = (depth as u64 * 31, 0u64, false);
            for i in 0..20_000u64 {
                let r = rng(&mut st);
                // Uniform over 300 pages, or one of 40 (hits at every depth).
                let key = if r % 4 == 0 { (r >> 8) % 300 } else { (r >> 8) % 40 };
                if (8_000..9_000).contains(&i) && i % 37 == 0 {
                    sets.invalidate_where(|k| k == key);
                    set_refs.iter_mut().for_each(|w| w[(key & 15) as usize].invalidate(key));
                    continue;
                }
                holes_seen |= sets.holes > 0;
                sets.access(key);
                total += 1;
                for (w, m) in set_refs.iter_mut().zip(&mut set_misses) {
                    *m += !w[(key & 15) as usize].access(key) as u64;
                }
            }
            assert!(holes_seen && sets.holes == 0, "depth {depth}: holes {}", sets.holes);
            for (w, &m) in set_misses.iter().enumerate() {
                let hits: u64 = sets.hist[1..=w + 1].iter().sum();
                assert_eq!(total - hits, m, "16 sets x {} ways, depth {depth}", w + 1);
            }
        }
    }

    #[test]
    fn fa_and_sets_match_plain_lru_with_invalidations() {
        let sizes = [1usize, 2, 3, 5, 8, 16, 40];
        for seed in 1..6u64 {
            let mut st = seed * 7919;
            let mut fa = FaStack::new(40);
            let mut sets = SetStacks::new(4, 6);
            let mut refs: Vec<Lru> = sizes.iter().map(|&c| Lru { cap: c, v: Vec::new() }).collect();
            let mut set_refs: Vec<Vec<Lru>> =
                (1..=6).map(|w| (0..4).map(|_| Lru { cap: w, v: Vec::new() }).collect()).collect();
            let mut misses = vec![0u64; sizes.len()];
            let mut set_misses = [0u64; 6];
            let n = 5000;
            for i in 0..n {
                let r = rng(&mut st);
                let key = if r % 3 == 0 { r % 60 } else { r % 9 };
                if i % 97 == 0 {
                    fa.invalidate(key);
                    sets.invalidate_where(|k| k == key);
                    refs.iter_mut().for_each(|l| l.invalidate(key));
                    set_refs.iter_mut().for_each(|w| w[(key & 3) as usize].invalidate(key));
                    continue;
                }
                fa.access(key);
                sets.access(key);
                for (l, m) in refs.iter_mut().zip(&mut misses) {
                    *m += !l.access(key) as u64;
                }
                for (w, m) in set_refs.iter_mut().zip(&mut set_misses) {
                    *m += !w[(key & 3) as usize].access(key) as u64;
                }
                if i % 1000 == 0 {
                    fa.compact();
                }
            }
            assert_misses(&fa, &sizes, &misses, &format!("seed {seed}: "));
            let total: u64 = fa.hist.iter().sum();
            for (w, &m) in set_misses.iter().enumerate() {
                let hits: u64 = sets.hist[1..=w + 1].iter().sum();
                assert_eq!(total - hits, m, "seed {seed}: 4 sets x {} ways", w + 1);
            }
        }
    }
}
