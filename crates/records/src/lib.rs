//! The records that cross Airlock's crates and processes, with one Rust type each.
//!
//! Layout:
//! - [`convert`]: between the wire contract and the policy engine's types.
//! - [`time`]: wall-clock helpers shared by every role.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod convert;
pub mod time;
