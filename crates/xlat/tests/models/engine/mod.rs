//! The engine end to end: events, the plain designs' loop, Itanium layouts and regions.

mod events;
mod itanium;
mod plain;
mod vhpt_short;
