//! A panic inside one design's simulation is a bug in xlat, but it need not cost the other
//! designs of the run their results: the engine runs each design's share of a batch under
//! [`run`], and a panic there fails that design alone (`DesignError::Internal`, reported as
//! FAILED with the panic's message and place) while the others go on.
//!
//! A program's panic hook decides what a panic prints and whether the process ends; one that
//! ends it (as the `xlat` command's does) should first ask [`active`]: while it is true the
//! panic will be caught here, and the hook should only [`note`] where it happened.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    static PLACE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// True while a design's simulation runs on this thread under [`run`]: a panic now fails that
/// design only.
pub fn active() -> bool {
    ACTIVE.with(Cell::get)
}

/// Records where the panic being caught happened ("file:line"), for its design's error.
pub fn note(place: String) {
    PLACE.with(|p| *p.borrow_mut() = Some(place));
}

/// Runs `f`; a panic in it becomes `Err` with its message (and place, if a hook noted one).
pub(super) fn run<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    let was = ACTIVE.with(|a| a.replace(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    ACTIVE.with(|a| a.set(was));
    r.map_err(|payload| {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string());
        let msg = msg.replace('\n', " ");
        match PLACE.with(|p| p.borrow_mut().take()) {
            Some(at) => format!("{msg} (at {at})"),
            None => msg,
        }
    })
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::engine::{self, DesignError, RunOptions, System};
    use crate::trace::{Kind, ReaderStats, Record, TraceError, TraceReader};

    struct Records(Vec<Record>);

    impl TraceReader for Records {
        fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, TraceError> {
            out.clear();
            let n = self.0.len().min(max);
            out.extend(self.0.drain(..n));
            Ok(n)
        }
        fn stats(&self) -> ReaderStats {
            ReaderStats::default()
        }
    }

    /// A design whose own range check is disabled reaches its page table's assertion on an
    /// address above its 32 bits: the panic fails that design alone, and the design beside it
    /// keeps every counter it would have had running alone.
    #[test]
    fn a_panic_in_one_design_fails_it_and_spares_the_others() {
        let narrow = Config::from_toml(
            "name = \"narrow\"\n[[tlb]]\nname = \"L1\"\nentries = 16\n[page_table]\nva_bits = 32\n",
            "narrow.toml",
        )
        .unwrap();
        let x86 = Config::preset("x86-64").unwrap();
        let mut records: Vec<Record> =
            (0..5000u64).map(|i| Record::Access { kind: Kind::Load, size: 8, addr: 0x1000 + 72 * i }).collect();
        records.push(Record::Access { kind: Kind::Store, size: 8, addr: 1 << 40 });
        records.extend((0..3000u64).map(|i| Record::Access { kind: Kind::Ifetch, size: 4, addr: 0x40_0000 + 4 * i }));

        let mut alone = [System::new(&x86).unwrap()];
        engine::run(&mut Records(records.clone()), &mut alone, RunOptions::default(), |_| {}).unwrap();

        let mut broken = System::new(&narrow).unwrap();
        broken.m.walk.vpn_limit = u64::MAX;
        let mut both = [broken, System::new(&x86).unwrap()];
        engine::run(&mut Records(records), &mut both, RunOptions::default(), |_| {}).unwrap();
        let f = both[0].failure().expect("the narrow design failed");
        match &f.error {
            DesignError::Internal { config, message, first, last } => {
                assert_eq!(config, "narrow");
                assert!(message.contains("virtual page space"), "{message}");
                assert!(*first <= 5001 && 5001 <= *last, "records {first} to {last}");
            }
            other => panic!("expected an internal error, got {other}"),
        }
        assert!(both[1].failure().is_none());
        assert_eq!(both[1].stats(), alone[0].stats());
    }
}
