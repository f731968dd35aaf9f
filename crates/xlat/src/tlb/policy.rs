//! Replacement policies.
//!
//! Every policy sees the same hooks: a hit on a way, a fill of a way, an invalidation of a way,
//! and a request for a victim in a full set (empty ways are filled first by the TLB itself, so
//! `victim` is only asked when every way is valid). LRU and FIFO need no state of their own: the
//! TLB's per-set order list *is* their state (recency order for LRU, insertion order for FIFO).

use serde::Deserialize;

/// A replacement policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Least recently used.
    #[default]
    Lru,
    /// First in, first out: hits do not change the order.
    Fifo,
    /// Uniformly random way (seeded xorshift), as in the MIPS R3000's random register.
    Random,
    /// Not recently used: one reference bit per way, set on hit and fill; when every bit of a set
    /// is set, all but the one just used are cleared. The victim is the lowest way whose bit is
    /// clear.
    Nru,
    /// Tree pseudo-LRU over a power-of-two number of ways.
    Plru,
}

impl Policy {
    /// Name used in configs.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Lru => "lru",
            Policy::Fifo => "fifo",
            Policy::Random => "random",
            Policy::Nru => "nru",
            Policy::Plru => "plru",
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) enum PolicyState {
    Lru,
    Fifo,
    Random { ways: u32, state: u64 },
    Nru { ways: u32, bits: Vec<bool>, set_count: Vec<u32> },
    Plru { ways: u32, tree: Vec<bool> },
}

impl PolicyState {
    pub(crate) fn new(policy: Policy, sets: u32, ways: u32, seed: u64) -> PolicyState {
        let n = (sets * ways) as usize;
        match policy {
            Policy::Lru => PolicyState::Lru,
            Policy::Fifo => PolicyState::Fifo,
            Policy::Random => PolicyState::Random {
                ways,
                // xorshift64* must not start at zero.
                state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            },
            Policy::Nru => PolicyState::Nru { ways, bits: vec![false; n], set_count: vec![0; sets as usize] },
            Policy::Plru => PolicyState::Plru {
                ways,
                // ways - 1 internal nodes per set, heap-numbered from 1 (index 0 unused).
                tree: vec![false; (sets * ways) as usize],
            },
        }
    }

    #[inline(always)]
    pub(crate) fn on_hit(&mut self, set: u32, way: u32) {
        match self {
            PolicyState::Lru | PolicyState::Fifo | PolicyState::Random { .. } => {}
            PolicyState::Nru { ways, bits, set_count } => nru_touch(*ways, bits, set_count, set, way),
            PolicyState::Plru { ways, tree } => plru_touch(*ways, tree, set, way),
        }
    }

    #[inline(always)]
    pub(crate) fn on_fill(&mut self, set: u32, way: u32) {
        self.on_hit(set, way)
    }

    pub(crate) fn on_invalidate(&mut self, set: u32, way: u32) {
        if let PolicyState::Nru { ways, bits, set_count } = self {
            let i = (set * *ways + way) as usize;
            if bits[i] {
                bits[i] = false;
                set_count[set as usize] -= 1;
            }
        }
    }

    /// The way to evict from a full set (LRU/FIFO: handled by the caller's list tail).
    #[inline(always)]
    pub(crate) fn victim(&mut self, set: u32, tail_way: u32) -> u32 {
        match self {
            PolicyState::Lru | PolicyState::Fifo => tail_way,
            PolicyState::Random { ways, state } => {
                let mut x = *state;
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                *state = x;
                let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
                (((r >> 32) * *ways as u64) >> 32) as u32
            }
            PolicyState::Nru { ways, bits, .. } => {
                let base = (set * *ways) as usize;
                (0..*ways).find(|&w| !bits[base + w as usize]).unwrap_or(0)
            }
            PolicyState::Plru { ways, tree } => {
                let base = (set * *ways) as usize;
                let mut node = 1usize;
                while node < *ways as usize {
                    // false: the left subtree is older, go left; true: go right.
                    node = 2 * node + tree[base + node] as usize;
                }
                (node - *ways as usize) as u32
            }
        }
    }
}

fn nru_touch(ways: u32, bits: &mut [bool], set_count: &mut [u32], set: u32, way: u32) {
    let base = (set * ways) as usize;
    let i = base + way as usize;
    if bits[i] {
        return;
    }
    bits[i] = true;
    set_count[set as usize] += 1;
    if set_count[set as usize] == ways {
        for b in &mut bits[base..base + ways as usize] {
            *b = false;
        }
        bits[i] = true;
        set_count[set as usize] = 1;
    }
}

fn plru_touch(ways: u32, tree: &mut [bool], set: u32, way: u32) {
    let base = (set * ways) as usize;
    let mut node = way as usize + ways as usize;
    while node > 1 {
        let parent = node / 2;
        // Point the parent away from the child just used.
        tree[base + parent] = node % 2 == 0;
        node = parent;
    }
}
