//! Itanium protection keys (`[itanium] protection_keys`, docs/itanium.md).
//!
//! Every TLB entry carries a protection key; with keys enabled, every reference checks that its
//! page's key is in one of the running process's protection key registers (PKRs, 16 on Itanium 2).
//! If not, a *key miss fault* traps to the OS, which loads the key into a PKR, replacing one
//! (`pkr_policy`). The PKRs are part of the process's context: a context switch reloads them
//! (chapman03 §2.2.2). A page's key is its region's (the short VHPT takes it from the region
//! register, chapman03 §2.3.1), except pages of an object in the global shared region, which
//! carry the object's own key (key-based sharing, §3.3): processes then share the object's TLB
//! entries while each holds the key in its own PKRs.

use serde::Deserialize;
use std::collections::HashMap;

/// Which PKR a key miss replaces when all are in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PkrPolicy {
    /// The least recently used key.
    #[default]
    Lru,
    /// The oldest loaded key (round robin).
    Fifo,
}

impl PkrPolicy {
    /// Name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            PkrPolicy::Lru => "lru",
            PkrPolicy::Fifo => "fifo",
        }
    }
}

/// Counters of the protection-key model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyStats {
    /// References whose key was checked.
    pub checks: u64,
    /// Key miss faults (the key was in no PKR).
    pub misses: u64,
    /// PKR file reloads on context switches.
    pub reloads: u64,
}

/// One process's PKR file.
#[derive(Clone, Debug, Default)]
struct File {
    keys: Vec<u32>,
    /// Last use (LRU) or load (FIFO) time of each register.
    stamps: Vec<u64>,
}

/// The PKR files of every process of one design.
#[derive(Clone, Debug)]
pub struct Keys {
    pkrs: usize,
    policy: PkrPolicy,
    files: HashMap<u32, File>,
    asid: u32,
    cur: File,
    /// The key of the last check (it is in a PKR).
    last: u32,
    clock: u64,
    stats: KeyStats,
}

impl Keys {
    /// `pkrs` registers per process, replaced by `policy`.
    pub fn new(pkrs: u32, policy: PkrPolicy) -> Keys {
        Keys {
            pkrs: pkrs as usize,
            policy,
            files: HashMap::new(),
            asid: 0,
            cur: File::default(),
            last: u32::MAX,
            clock: 0,
            stats: KeyStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> KeyStats {
        self.stats
    }

    /// A reference to a page with protection key `key`: true on a key miss fault.
    #[inline(always)]
    pub fn check(&mut self, key: u32) -> bool {
        self.stats.checks += 1;
        if key == self.last {
            return false;
        }
        self.check_slow(key)
    }

    #[inline(never)]
    fn check_slow(&mut self, key: u32) -> bool {
        self.clock += 1;
        self.last = key;
        let f = &mut self.cur;
        if let Some(i) = f.keys.iter().position(|&k| k == key) {
            if self.policy == PkrPolicy::Lru {
                f.stamps[i] = self.clock;
            }
            return false;
        }
        self.stats.misses += 1;
        if f.keys.len() < self.pkrs {
            f.keys.push(key);
            f.stamps.push(self.clock);
        } else {
            let (i, _) = f.stamps.iter().enumerate().min_by_key(|&(_, &s)| s).expect("pkrs >= 1");
            f.keys[i] = key;
            f.stamps[i] = self.clock;
        }
        true
    }

    /// A switch to process `asid`: its PKRs are reloaded.
    pub fn switch_to(&mut self, asid: u32) {
        if asid == self.asid {
            return;
        }
        let next = self.files.remove(&asid).unwrap_or_default();
        let prev = std::mem::replace(&mut self.cur, next);
        self.files.insert(self.asid, prev);
        self.asid = asid;
        self.last = u32::MAX;
        self.stats.reloads += 1;
    }

    /// Process `asid` exits.
    pub fn exit(&mut self, asid: u32) {
        if asid == self.asid {
            self.cur = File::default();
            self.last = u32::MAX;
        } else {
            self.files.remove(&asid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference: a list of at most n keys, most recent first (LRU) or in load order (FIFO).
    fn reference(keys: &[u32], n: usize, lru: bool) -> u64 {
        let mut file: Vec<u32> = Vec::new();
        let mut misses = 0;
        for &k in keys {
            match file.iter().position(|&x| x == k) {
                Some(i) => {
                    if lru {
                        file.remove(i);
                        file.insert(0, k);
                    }
                }
                None => {
                    misses += 1;
                    if file.len() == n {
                        file.pop();
                    }
                    file.insert(0, k);
                }
            }
        }
        misses
    }

    #[test]
    fn pkr_replacement_matches_a_reference() {
        let mut x = 12345u64;
        let keys: Vec<u32> = (0..5000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Mostly a few hot keys, sometimes one of many.
                if x % 4 == 0 {
                    (x % 40) as u32
                } else {
                    (x % 6) as u32
                }
            })
            .collect();
        for (policy, lru) in [(PkrPolicy::Lru, true), (PkrPolicy::Fifo, false)] {
            for n in [1usize, 4, 16] {
                let mut k = Keys::new(n as u32, policy);
                let misses = keys.iter().filter(|&&key| k.check(key)).count() as u64;
                assert_eq!(misses, reference(&keys, n, lru), "{policy:?} {n}");
                assert_eq!(k.stats().checks, keys.len() as u64);
            }
        }
    }

    #[test]
    fn each_process_keeps_its_own_pkrs() {
        let mut k = Keys::new(2, PkrPolicy::Lru);
        assert!(k.check(7));
        k.switch_to(1);
        assert!(k.check(7), "another process has not loaded it");
        k.switch_to(0);
        assert!(!k.check(7), "reloaded with the process");
        assert_eq!(k.stats().reloads, 2);
    }
}
