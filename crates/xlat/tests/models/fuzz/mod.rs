//! Seeded mutation fuzzing: `inputs` (every input xlat reads, and the engine over what the
//! readers accept) and `events` (event records with extreme ranges through every kind of OS
//! model). What both share is here: a seeded generator, the iteration count and seed from the
//! environment, a reader over records in memory, and the check that no design failed by a bug.

mod events;
mod inputs;

use xlat::engine::{self, System};
use xlat::trace::{ReaderStats, Record, TraceError, TraceReader};

/// A small seeded generator (xorshift), so that every run makes the same mutants.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// An index below `n` (0 if `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    /// A number below `n` (0 if `n` is 0).
    pub fn under(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len())]
    }
}

/// Mutants per target and seed input: `XLAT_FUZZ_ITERS`, default 300.
pub fn iterations() -> usize {
    std::env::var("XLAT_FUZZ_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(300)
}

/// `XLAT_FUZZ_SEED`, default 1.
pub fn seed() -> u64 {
    std::env::var("XLAT_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1)
}

/// Records in memory, read in batches.
pub struct VecReader(pub Vec<Record>, pub usize);

impl TraceReader for VecReader {
    fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, TraceError> {
        out.clear();
        let n = (self.0.len() - self.1).min(max);
        out.extend_from_slice(&self.0[self.1..self.1 + n]);
        self.1 += n;
        Ok(n)
    }
    fn stats(&self) -> ReaderStats {
        ReaderStats::default()
    }
}

/// A design may fail on a trace it cannot simulate, but never by a bug: the engine turns a
/// panic inside a design into `DesignError::Internal`, which is a finding here.
pub fn no_internal_errors(systems: &[System]) {
    for s in systems {
        if let Some(f) = s.failure() {
            assert!(!matches!(f.error, engine::DesignError::Internal { .. }), "{}", f.error);
        }
    }
}
