//! The records that cross Airlock's crates and processes, with one Rust type each.
//!
//! Layout:
//! - [`convert`]: between the wire contract and the policy engine's types, with typed errors;
//!   which decisions count as denials ([`convert::counts_as_denial`]: no timeouts).
//! - [`time`]: wall-clock helpers and [`time::Deadline`], read from the wire's `0`-is-none.
//! - [`code`]: the stable error codes of replies and dead-letter reasons.
//! - [`view`]: the JSON views of decisions: `airlock request`, `policy eval`, the decision log.
//! - [`monitor`]: the note a model monitor leaves in its answer's metadata.
//! - [`review`]: the reviewer API's views (task, pending list and history, caller, refusals,
//!   standing decisions).
//! - [`signed`]: reply proofs as runners open them; human answers as reviewer services sign
//!   them and workers check them.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod code;
pub mod convert;
pub mod monitor;
pub mod review;
pub mod signed;
pub mod time;
pub mod view;
