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
//! scheduler moves one (probes at the start gave up in 4 of 10 runs). The probe costs the
//! reader [`TRIPS`] round trips (about 10 µs near, 80 µs far), and the simulation one load a
//! batch until it is over.

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

/// Values of the line other than the turns (odd: the reader's, even: the answers).
const DONE: u64 = u64::MAX;
const ABANDONED: u64 = u64::MAX - 1;

/// The line the two threads pass back and forth, on lines of its own (two, for the adjacent
/// line prefetcher).
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct Probe {
    turn: AtomicU64,
}

impl Probe {
    /// The reader's side: the round trip in ns, or `None` if the simulation did not answer
    /// the first turn within `first` (it answers between batches: give it one batch's time)
    /// or a later one within [`PATIENCE`].
    pub(crate) fn ask(&self, first: Duration) -> Option<f64> {
        // The first turn, untimed: the simulation answers it when it next looks.
        if self.turn.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire).is_err() || !self.wait_for(2, first) {
            return None;
        }
        let mut groups = [0f64; GROUPS as usize];
        let mut turn = 2;
        for g in &mut groups {
            let t0 = Instant::now();
            for _ in 0..TRIPS / GROUPS {
                self.turn.store(turn + 1, Ordering::Release);
                turn += 2;
                if !self.wait_for(turn, PATIENCE) {
                    return None;
                }
            }
            *g = t0.elapsed().as_nanos() as f64 / (TRIPS / GROUPS) as f64;
        }
        self.turn.store(DONE, Ordering::Release);
        groups.sort_by(f64::total_cmp);
        Some(groups[GROUPS as usize / 2])
    }

    /// Waits until the line holds `value` (an answer); false, with the probe abandoned, if it
    /// did not within `patience`.
    fn wait_for(&self, value: u64, patience: Duration) -> bool {
        let mut since = None;
        let mut spins = 0u32;
        loop {
            let v = self.turn.load(Ordering::Acquire);
            if v == value {
                return true;
            }
            if v == ABANDONED {
                return false;
            }
            spins += 1;
            // The clock only every 1024 polls, not on the round trips measured. Give up,
            // unless the answer came meanwhile.
            if spins % 1024 == 0
                && since.get_or_insert_with(Instant::now).elapsed() > patience
                && self.turn.compare_exchange(v, ABANDONED, Ordering::AcqRel, Ordering::Acquire).is_ok()
            {
                return false;
            }
            std::hint::spin_loop();
        }
    }

    /// The simulation's side, between batches: answers the reader's turns if it has started
    /// the probe, until it is over. True once the probe is over (no need to look again).
    pub(crate) fn serve(&self) -> bool {
        let mut v = self.turn.load(Ordering::Acquire);
        if v == 0 {
            return false;
        }
        let mut since = None;
        let mut spins = 0u32;
        while v != DONE && v != ABANDONED {
            if v % 2 == 1 {
                // The reader waits for this and writes nothing meanwhile.
                self.turn.store(v + 1, Ordering::Release);
                since = None;
            } else {
                spins += 1;
                if spins % 1024 == 0 && since.get_or_insert_with(Instant::now).elapsed() > PATIENCE {
                    // Give up, unless the reader took its turn meanwhile.
                    let _ = self.turn.compare_exchange(v, ABANDONED, Ordering::AcqRel, Ordering::Acquire);
                }
                std::hint::spin_loop();
            }
            v = self.turn.load(Ordering::Acquire);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sides_finish_and_a_lone_side_gives_up() {
        // With both sides: a round trip, or (a busy test machine) a side that gave up.
        let p = Probe::default();
        assert!(!p.serve(), "nothing asked yet");
        let rt = std::thread::scope(|s| {
            let asker = s.spawn(|| p.ask(Duration::from_secs(5)));
            while !p.serve() {
                std::thread::yield_now();
            }
            asker.join().unwrap()
        });
        match rt {
            Some(ns) => {
                assert!(ns > 0.0 && ns < 1e6, "{ns}");
                assert_eq!(p.turn.load(Ordering::Relaxed), DONE);
            }
            None => assert_eq!(p.turn.load(Ordering::Relaxed), ABANDONED),
        }
        assert!(p.serve(), "over");
        // The reader alone: no answer, gives up after `first` and says so.
        let p = Probe::default();
        let t = Instant::now();
        assert_eq!(p.ask(Duration::from_millis(3)), None);
        assert!(t.elapsed() >= Duration::from_millis(3));
        assert_eq!(p.turn.load(Ordering::Relaxed), ABANDONED);
        assert!(p.serve());
        // A probe is asked once: a second asks nothing of the simulation.
        assert_eq!(p.ask(Duration::from_secs(5)), None);
        // The simulation, the reader gone after its first turn: gives up after `PATIENCE`.
        let p = Probe::default();
        p.turn.store(1, Ordering::Relaxed);
        let t = Instant::now();
        assert!(p.serve());
        assert!(t.elapsed() >= PATIENCE);
        assert_eq!(p.turn.load(Ordering::Relaxed), ABANDONED);
    }
}
