//! Trace formats: readers, writers, compression and detection, the synthetic generator.

mod champsim;
mod gen;
mod lackey;
mod open;
mod xtr;
