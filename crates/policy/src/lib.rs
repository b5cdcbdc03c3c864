//! The policy engine: pure and synchronous, no I/O.
//!
//! `Policy::parse(source, text, kind)` compiles an Inspect policy document once;
//! `Policy::evaluate` then runs its chain for a call until it is decided or reaches an external
//! step, and `Policy::resume` continues it with that step's answer.
//!
//! Layout:
//! - [`document`]: Inspect policy documents (YAML or JSON) with every node's location.
//! - [`call`]: the call under decision, decisions and step answers.
//! - [`limits`]: what a document's names, timeouts, globs and strings are held to.
//! - [`render`]: the call as Inspect's `format_function_call` renders it.
//! - [`glob`]: tool globs matched as Inspect's fnmatch-based `policy_approver` matches them.
//! - [`steps`]: built-in and external steps.
//! - [`shell`]: the shell command-line reader behind `bash_allowlist`.
//! - [`chain`]: a compiled policy and its evaluation, with Inspect's defaults.
//! - [`control`]: a policy's breaker per sample and its response to incidents in a run.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod call;
pub mod chain;
pub mod control;
pub mod document;
pub mod glob;
pub mod limits;
pub mod render;
pub mod shell;
pub mod steps;

pub use call::{Answer, Call, CallError, Decision, Kind, ReadError};
