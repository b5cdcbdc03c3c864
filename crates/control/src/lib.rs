//! The fleet's control log: what only a fleet can do, because it sees every sample of a run.
//!
//! Run switches thrown by hand (`airlock run pause|resume|terminate`), incidents people mark,
//! and the approvals a breaker counts are entries of one append-only log on the broker
//! (`<p>.control`). Every worker and reviewer service reads it from its first entry when it
//! starts and follows it after, so each folds the same entries in the same order into the same
//! [`ControlState`]: it survives restarts and agrees across processes. A policy's `breaker:`
//! and `incident:` sections ([`airlock_policy::control`]) say what the state makes of a call.
//!
//! Layout:
//! - [`state`]: the entries folded into runs and samples, and the response a call gets.
//! - [`log`]: a log followed by a task, and entries appended: the control log, or the log of a
//!   budgeted step's scores that its monitor processes share.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod log;
pub mod state;

/// The approver, in a trail or a step's answer, of what the fleet's control decides.
pub const APPROVER: &str = "control";

pub use log::{ControlError, ControlLog, ControlView, Fold};
pub use state::{ControlState, Controlled, RunControl, Switch, Switched};
