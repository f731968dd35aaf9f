//! The engine end to end: events, the plain designs' loop, Itanium layouts and regions.

mod cores;
mod cores_ref;
mod events;
mod itanium;
mod plain;
mod plain_cow;
mod vhpt_short;
