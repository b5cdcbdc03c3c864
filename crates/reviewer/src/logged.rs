//! Untrusted text in the service's log, escaped as every role escapes it (see
//! [`airlock_telemetry::logged`]).

pub use airlock_telemetry::logged::Logged;
