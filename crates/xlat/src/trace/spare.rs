//! Work that a thread with nothing else to do may take on for a trace reader
//! ([`TraceReader::spare_work`](super::TraceReader::spare_work)): decompressing the next frames
//! of its input ([`compress::frames`](super::compress::frames)), decoding the next blocks of an
//! xtr stream (the queue of [`xtr`](super::xtr)). A run's simulation thread, when it is ahead of
//! the reader, or an idle `--jobs` worker takes it on before it polls or sleeps.

use std::sync::{Arc, Mutex};

/// Work that a thread with nothing else to do may take on for a trace reader.
pub trait SpareWork: Send + Sync {
    /// Does one piece of the work if there is one ready to do; returns whether it did.
    fn help(&self) -> bool;
}

/// One piece of spare work: takes it from `state` with `take` if the lock is free (never
/// waiting for it), then does it with `finish` outside the lock; whether there was one.
pub(super) fn help_once<S, T>(
    state: &Mutex<S>,
    take: impl FnOnce(&mut S) -> Option<T>,
    finish: impl FnOnce(T),
) -> bool {
    let t = match state.try_lock() {
        Ok(mut s) => take(&mut s),
        Err(_) => None,
    };
    t.map(finish).is_some()
}

/// Two kinds of spare work, the first preferred.
pub(super) struct Both(pub(super) Arc<dyn SpareWork>, pub(super) Arc<dyn SpareWork>);

impl SpareWork for Both {
    fn help(&self) -> bool {
        self.0.help() || self.1.help()
    }
}
