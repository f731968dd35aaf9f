//! What the command does differently when it talks to a terminal: the width its tables fit, and
//! the progress line it keeps on standard error during long work.

use std::io::IsTerminal;
use std::time::{Duration, Instant};
use xlat::trace::{BatchWords, ReaderStats, Record, SpareWork, TraceError, TraceNotes, TraceReader};

/// The width of tables when standard output is not a terminal (a file, a pipe).
pub const DEFAULT_WIDTH: usize = 100;

/// Progress lines are redrawn at most this many times a second.
const REDRAWS_PER_SECOND: u8 = 4;

/// The width the tables on standard output fit: the terminal's columns, or [`DEFAULT_WIDTH`].
pub fn stdout_width() -> usize {
    if !std::io::stdout().is_terminal() {
        return DEFAULT_WIDTH;
    }
    // SAFETY: TIOCGWINSZ writes one winsize into the zeroed struct it is given.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    if r == 0 && ws.ws_col > 0 {
        ws.ws_col as usize
    } else {
        DEFAULT_WIDTH
    }
}

/// Whether a command shows progress: only on a terminal, and never under `-q`.
pub fn shows_progress(quiet: bool, stderr_is_terminal: bool) -> bool {
    !quiet && stderr_is_terminal
}

/// A progress line on standard error with this `indicatif` template, redrawn a few times a
/// second; `None` (nothing drawn) under `quiet` or when standard error is not a terminal.
pub fn progress(quiet: bool, template: &str) -> Option<indicatif::ProgressBar> {
    shows_progress(quiet, std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::with_draw_target(
            None,
            indicatif::ProgressDrawTarget::stderr_with_hz(REDRAWS_PER_SECOND),
        );
        b.set_style(indicatif::ProgressStyle::with_template(template).expect("valid template"));
        b
    })
}

/// A message that changes at most a few times a second (a rate, a byte count), however often
/// it is offered.
pub struct Throttle {
    last: Option<Instant>,
}

impl Throttle {
    pub fn new() -> Throttle {
        Throttle { last: None }
    }

    /// True when a quarter of a second has passed since the last time it said so.
    pub fn due(&mut self) -> bool {
        let now = Instant::now();
        let due = self.last.map_or(true, |t| now.duration_since(t) >= Duration::from_millis(250));
        if due {
            self.last = Some(now);
        }
        due
    }
}

/// A reader that moves a progress line by the records of each batch it hands out.
pub struct Counting<'a> {
    pub inner: &'a mut dyn TraceReader,
    pub bar: Option<&'a indicatif::ProgressBar>,
    records: u64,
}

impl<'a> Counting<'a> {
    pub fn new(inner: &'a mut dyn TraceReader, bar: Option<&'a indicatif::ProgressBar>) -> Counting<'a> {
        Counting { inner, bar, records: 0 }
    }

    fn count(&mut self, n: usize) {
        self.records += n as u64;
        if let Some(b) = self.bar {
            b.set_position(self.records);
        }
    }
}

impl TraceReader for Counting<'_> {
    fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, TraceError> {
        let n = self.inner.read_batch(out, max)?;
        self.count(n);
        Ok(n)
    }

    fn read_batch_words(&mut self, out: &mut Vec<Record>, max: usize, w: BatchWords<'_>) -> Result<usize, TraceError> {
        let n = self.inner.read_batch_words(out, max, w)?;
        self.count(n);
        Ok(n)
    }

    fn stats(&self) -> ReaderStats {
        self.inner.stats()
    }

    fn notes(&self) -> TraceNotes {
        self.inner.notes()
    }

    fn spare_work(&self) -> Option<std::sync::Arc<dyn SpareWork>> {
        self.inner.spare_work()
    }

    fn busy_threads(&self) -> usize {
        self.inner.busy_threads()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_only_on_a_terminal_and_not_quiet() {
        assert!(shows_progress(false, true));
        assert!(!shows_progress(true, true));
        assert!(!shows_progress(false, false));
        assert!(!shows_progress(true, false));
    }

    #[test]
    fn a_throttle_says_due_at_most_four_times_a_second() {
        let mut t = Throttle::new();
        assert!(t.due());
        let start = Instant::now();
        let mut n = 1;
        while start.elapsed() < Duration::from_millis(600) {
            n += t.due() as u32;
        }
        // At 0, 250 and 500 ms (and possibly one more at the very end).
        assert!((2..=4).contains(&n), "{n}");
    }
}
