//! The policy engine: pure and synchronous, no I/O.
//!
//! Layout:
//! - [`call`]: the call under decision, decisions and step answers.
//! - [`render`]: the call as Inspect's `format_function_call` renders it.
//! - [`steps`]: built-in and external steps.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod call;
pub mod chain;
pub mod document;
pub mod glob;
pub mod render;
pub mod shell;
pub mod steps;

pub use call::{Answer, Call, CallError, Decision, Kind};
