//! The records that cross Airlock's crates and processes, with one Rust type each.
//!
//! Layout:
//! - [`convert`]: between the wire contract and the policy engine's types.
//! - [`time`]: wall-clock helpers shared by every role.
//! - [`review`]: the reviewer API's views (task, pending list and history, caller, refusals).
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod convert;
pub mod review;
pub mod time;
