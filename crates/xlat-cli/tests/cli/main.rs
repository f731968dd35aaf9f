//! The `xlat` command's tests, one test binary run against the built `xlat`, a module per
//! command or concern (`cargo test -p xlat-cli --test cli sweep::`): `run`, `errors`,
//! `robustness` (inputs that once crashed or ran unbounded), `convert`, `curve`, `jobs`,
//! `model`, `reproduce` (the papers' claims on `--quick` runs), `shootdowns` (the shootdown
//! study), `snapshot`, `sweep`, `tools`,
//! `trace` (tracing real programs), `workloads`, and `doc_examples` (every console example of
//! the documentation). What they share is `common`.

mod common;
mod convert;
mod cores;
mod curve;
mod doc_examples;
mod errors;
mod jobs;
mod model;
mod reproduce;
mod reproduce_all;
mod robustness;
mod run;
mod shootdowns;
mod snapshot;
mod sweep;
mod terminal;
mod tools;
mod trace;
mod workloads;
