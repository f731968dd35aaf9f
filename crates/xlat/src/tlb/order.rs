//! The replacement order of a TLB's sets: one circular list of slots per set, most recent
//! (LRU) or newest (FIFO) at the head, the next victim at the tail and empty slots behind it.

use super::entry::NIL;
use crate::padded::Padded;

/// Per-set circular doubly linked lists of slots (head: most recent; tail, the head's `prev`:
/// next victim), as one array of `[prev, next]` links and one of heads. Every way of a set is
/// always on its list, so no link is ever missing: moving the tail to the head (every fill of a
/// full LRU set) or the head to the tail only moves the head.
#[derive(Clone, Debug)]
pub(super) struct Order {
    links: Padded<[u32; 2]>,
    heads: Padded<u32>,
}

impl Order {
    /// Every set ordered so that way 0 is at the tail: empty ways fill in index order.
    pub(super) fn new(sets: u32, ways: u32) -> Order {
        let mut links = vec![[NIL; 2]; (sets * ways) as usize];
        let mut heads = vec![NIL; sets as usize];
        for s in 0..sets {
            let base = s * ways;
            for w in 0..ways {
                // From the head (way `ways - 1`) down to the tail (way 0), and round.
                links[(base + w) as usize] = [base + (w + 1) % ways, base + (w + ways - 1) % ways];
            }
            heads[s as usize] = base + ways - 1;
        }
        Order { links: links.into(), heads: heads.into() }
    }

    #[inline(always)]
    pub(super) fn tail(&self, set: u32) -> u32 {
        self.before(self.heads[set as usize])
    }

    /// [`Order::move_to_head`] of the tail of `set`'s list: the head moves one back.
    #[inline(always)]
    pub(super) fn tail_to_head(&mut self, set: u32) {
        self.heads[set as usize] = self.tail(set);
    }

    /// Takes `slot` (neither the head nor the tail) out of its list and puts it back between
    /// the tail `t` and the head `h`.
    #[inline(always)]
    fn relink(&mut self, slot: u32, t: u32, h: u32) {
        let [p, n] = self.links[slot as usize];
        self.links[p as usize][1] = n;
        self.links[n as usize][0] = p;
        self.links[slot as usize] = [t, h];
        self.links[t as usize][1] = slot;
        self.links[h as usize][0] = slot;
    }

    #[inline(always)]
    pub(super) fn move_to_head(&mut self, set: u32, slot: u32) {
        let mut head = self.heads[set as usize];
        self.move_to_head_held(&mut head, slot);
        self.heads[set as usize] = head;
    }

    /// [`Order::move_to_head`] of the set whose head is `head`, held by the caller (written
    /// back with [`Order::set_head`]).
    #[inline(always)]
    pub(super) fn move_to_head_held(&mut self, head: &mut u32, slot: u32) {
        let h = *head;
        if h == slot {
            return;
        }
        let t = self.links[h as usize][0];
        if t != slot {
            self.relink(slot, t, h);
        }
        *head = slot;
    }

    #[inline(always)]
    pub(super) fn head(&self, set: u32) -> u32 {
        self.heads[set as usize]
    }

    #[inline(always)]
    pub(super) fn set_head(&mut self, set: u32, head: u32) {
        self.heads[set as usize] = head;
    }

    /// The tail of the list whose head is `head`.
    #[inline(always)]
    pub(super) fn before(&self, head: u32) -> u32 {
        self.links[head as usize][0]
    }

    pub(super) fn move_to_tail(&mut self, set: u32, slot: u32) {
        let h = self.heads[set as usize];
        let t = self.links[h as usize][0];
        if t == slot {
            return;
        }
        if h == slot {
            self.heads[set as usize] = self.links[h as usize][1];
        } else {
            self.relink(slot, t, h);
        }
    }
}
