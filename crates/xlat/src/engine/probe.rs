//! How far apart the cores of a reader thread and of the simulation thread it feeds are: the
//! round trip of one cache line between them, measured once the run is under way
//! ([`Probe::ask`] on the reader's side, [`Probe::serve`] on the simulation's).
//!
//! A reader with a core to itself writes each batch's page words into buffers that the
//! simulation's core read last. Where moving a line's ownership between the two cores is slow
//! (a VM whose two vCPUs the host places far apart: round trips of about 470 ns to 1.2 µs
//! against about 125 ns), the reader stores the words around its cache instead, so that it
//! does not wait for those lines ([`BatchWords::for_other_core`](crate::trace::BatchWords));
//! where it is fast, storing around the cache costs more than it saves (the simulation then
//! reads every word from memory: on a Xeon VM whose round trips take 110–210 ns, the real
//! benchmark trace's run took 0.0765 s so against 0.0725 s with plain stores, both with the
//! words prefetched as [`super::feed`] does; medians of 16 alternated runs,
//! docs/performance.md).
//!
//! The reader asks after its first batches ([`super::feed`]), not as it starts: a new thread
//! starts on its parent's core, and the two threads can share it for milliseconds before the
//! scheduler moves one (probes at the start gave up in 2 to 4 of every 10 runs). It asks again
//! every few thousand batches, since a VM's placement can change during a long run (the EPYC
//! VM's changed every few seconds to minutes). Each round costs the reader [`TRIPS`] round
//! trips (about 10 µs near, 80 µs far), and the simulation one load a batch.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Round trips timed, in [`GROUPS`] groups (the median group's mean is the answer).
const TRIPS: u64 = 64;
const GROUPS: u64 = 8;

/// Round trips above this are far apart.
pub(crate) const FAR_NS: f64 = 350.0;

/// How long either side waits for the other's turn once the probe has started before it gives
/// up (the other thread preempted: a machine busy with other work). The reader then stores as
/// it does near (plain stores).
const PATIENCE: Duration = Duration::from_millis(2);

/// The line holds a round's number (high 32 bits) and its step (low 32 bits): odd, the
/// reader's turn, waiting for an answer; even from 2, the simulation's answer; [`DONE`] or
/// [`ABANDONED`] once the round is over. 0 before the first round.
const STEP: u64 = 0xffff_ffff;
const DONE: u64 = STEP;
const ABANDONED: u64 = STEP - 1;

/// The line the two threads pass back and forth, on lines of its own (two, for the adjacent
/// line prefetcher).
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct Probe {
    turn: AtomicU64,
}

impl Probe {
    /// The reader's side, a round: the round trip in ns, or `None` if the simulation did not
    /// answer the first turn within `first` (it answers between batches: give it one batch's
    /// time) or a later one within [`PATIENCE`]. Rounds follow one another (the reader's).
    pub(crate) fn ask(&self, first: Duration) -> Option<f64> {
        let last = self.turn.load(Ordering::Acquire);
        debug_assert!(last == 0 || matches!(last & STEP, DONE | ABANDONED), "a round under way");
        let round = ((last >> 32) + 1) << 32;
        // The first turn, untimed: the simulation answers it when it next looks.
        self.turn.store(round | 1, Ordering::Release);
        if !self.wait_for(round | 2, first) {
            return None;
        }
        let mut groups = [0f64; GROUPS as usize];
        let mut step = 2;
        for g in &mut groups {
            let t0 = Instant::now();
            for _ in 0..TRIPS / GROUPS {
                self.turn.store(round | (step + 1), Ordering::Release);
                step += 2;
                if !self.wait_for(round | step, PATIENCE) {
                    return None;
                }
            }
            *g = t0.elapsed().as_nanos() as f64 / (TRIPS / GROUPS) as f64;
        }
        self.turn.store(round | DONE, Ordering::Release);
        groups.sort_by(f64::total_cmp);
        Some(groups[GROUPS as usize / 2])
    }

    /// Waits until the line holds `value` (an answer); false, with the round abandoned, if it
    /// did not within `patience`.
    fn wait_for(&self, value: u64, patience: Duration) -> bool {
        let mut since = None;
        let mut spins = 0u32;
        loop {
            let v = self.turn.load(Ordering::Acquire);
            if v == value {
                return true;
            }
            if v & STEP == ABANDONED {
                return false;
            }
            spins += 1;
            // The clock only every 1024 polls, not on the round trips measured. Give up,
            // unless the answer came meanwhile.
            if spins % 1024 == 0
                && since.get_or_insert_with(Instant::now).elapsed() > patience
                && self.turn.compare_exchange(v, (v & !STEP) | ABANDONED, Ordering::AcqRel, Ordering::Acquire).is_ok()
            {
                return false;
            }
            std::hint::spin_loop();
        }
    }

    /// The simulation's side, between batches: if a round is under way, answers the reader's
    /// turns until it is over.
    pub(crate) fn serve(&self) {
        let mut v = self.turn.load(Ordering::Acquire);
        if v & STEP == 0 || over(v) {
            return;
        }
        let mut since = None;
        let mut spins = 0u32;
        while !over(v) {
            if v & 1 == 1 {
                // The reader waits for this and writes nothing meanwhile.
                self.turn.store(v + 1, Ordering::Release);
                since = None;
            } else {
                spins += 1;
                if spins % 1024 == 0 && since.get_or_insert_with(Instant::now).elapsed() > PATIENCE {
                    // Give up, unless the reader took its turn meanwhile.
                    let _ = self.turn.compare_exchange(v, (v & !STEP) | ABANDONED, Ordering::AcqRel, Ordering::Acquire);
                }
                std::hint::spin_loop();
            }
            v = self.turn.load(Ordering::Acquire);
        }
    }
}

/// Whether the round of line value `v` is over.
fn over(v: u64) -> bool {
    matches!(v & STEP, DONE | ABANDONED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_finish_with_both_sides_and_a_lone_side_gives_up() {
        let p = Probe::default();
        p.serve(); // nothing asked yet: returns at once
        assert_eq!(p.turn.load(Ordering::Relaxed), 0);
        // Three rounds with both sides (the simulation looking between "batches"): a round trip
        // each, or (a busy test machine) a side that gave up.
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    p.serve();
                    std::thread::yield_now();
                }
            });
            for round in 1..=3u64 {
                let rt = p.ask(Duration::from_secs(5));
                let v = p.turn.load(Ordering::Relaxed);
                assert_eq!(v >> 32, round);
                match rt {
                    Some(ns) => {
                        assert!(ns > 0.0 && ns < 1e6, "{ns}");
                        assert_eq!(v & STEP, DONE);
                    }
                    None => assert_eq!(v & STEP, ABANDONED),
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
        // The reader alone: no answer, gives up after `first` and says so; the next round
        // starts afresh.
        let t = Instant::now();
        assert_eq!(p.ask(Duration::from_millis(3)), None);
        assert!(t.elapsed() >= Duration::from_millis(3));
        assert_eq!(p.turn.load(Ordering::Relaxed), 4 << 32 | ABANDONED);
        p.serve(); // over: returns at once
                   // The simulation, the reader gone after its first turn: gives up after `PATIENCE`.
        p.turn.store(5 << 32 | 1, Ordering::Relaxed);
        let t = Instant::now();
        p.serve();
        assert!(t.elapsed() >= PATIENCE);
        assert_eq!(p.turn.load(Ordering::Relaxed), 5 << 32 | ABANDONED);
    }
}
