//! `airlock demo`: arguments for [`airlock_demo::run`], the whole fleet in one process
//! driving a simulated eval run.

use airlock_demo::{AutoHuman, DemoConfig, DemoError};
use clap::{Args, ValueEnum};

use super::{EXIT_UNAVAILABLE, Failure};

/// Arguments of `airlock demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Run over this RabbitMQ broker instead of in process.
    #[arg(long)]
    amqp: Option<String>,
    /// The fleet's prefix (default: a fresh one, removed at the end, when on a broker).
    #[arg(long)]
    prefix: Option<String>,
    /// Samples of the simulated eval, run concurrently.
    #[arg(long, default_value_t = 8)]
    samples: usize,
    /// Answer escalations with a simulated human; without it the reviewer UI starts and a
    /// person decides them there.
    #[arg(long, value_enum)]
    auto_human: Option<AutoHumanArg>,
    /// Where the reviewer UI listens (without --auto-human; a free port if this one is taken).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: std::net::SocketAddr,
}

/// The simulated human's constant answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AutoHumanArg {
    /// Approve (or continue, for reviews).
    Approve,
    /// Reject (terminate, for reviews).
    Reject,
    /// Terminate the sample.
    Terminate,
}

/// Runs the demo.
pub async fn run(args: DemoArgs) -> Result<(), Failure> {
    let config = DemoConfig {
        amqp: args.amqp,
        prefix: args.prefix,
        samples: args.samples,
        auto_human: args.auto_human.map(|human| match human {
            AutoHumanArg::Approve => AutoHuman::Approve,
            AutoHumanArg::Reject => AutoHuman::Reject,
            AutoHumanArg::Terminate => AutoHuman::Terminate,
        }),
        listen: args.listen,
    };
    airlock_demo::run(config).await.map_err(|e| match e {
        DemoError::Config(message) => Failure::config(message),
        e @ DemoError::Unavailable(_) => Failure { code: EXIT_UNAVAILABLE, message: e.to_string() },
        e => Failure::other(e.to_string()),
    })
}
