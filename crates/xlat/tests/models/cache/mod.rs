//! Caches and what sits behind them.

mod hierarchy;
mod mtlb;
mod overlap;
