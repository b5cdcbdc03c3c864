//! The wire contract: every message runners, workers, steps and reviewers exchange.
//!
//! Generated from `proto/airlock/v1/airlock.proto`; see that file for the documentation of
//! each message and field, and for which queue carries which message. [`key`] gives a call
//! key its text form, the AMQP correlation id.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod key;

/// `airlock.v1`, the current version of the contract.
pub mod v1 {
    #![allow(missing_docs, clippy::doc_lazy_continuation, clippy::large_enum_variant)]
    include!(concat!(env!("OUT_DIR"), "/airlock.v1.rs"));
}
