//! Behavioural tests of the transports.
//!
//! - `suite`: one behavioural suite, run against both the in-process transport and RabbitMQ.
//! - `recovery`: RabbitMQ only: killed connections, redeclaration, a broker restart.
//! - `nodes`: RabbitMQ only: several broker addresses, one of them stopping.
//! - `tls`: `amqps://` verified against a CA file, on a node of the test's own.
//! - `support`: the broker gate, unique prefixes, cleanup and the connection killer.
//!
//! Broker tests read `AIRLOCK_AMQP_URL` (default `amqp://guest:guest@127.0.0.1:5672/%2f`).
//! When the broker cannot be reached they are skipped, unless `CI` is set: then they fail.

mod nodes;
mod recovery;
mod suite;
mod support;
mod tls;
