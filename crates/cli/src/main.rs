//! `airlock`: one program for every role of the fleet.
//!
//! Layout: `main` parses the command line once and hands each subcommand to its module in
//! `commands/`; each maps its errors to an exit status (64 for bad usage or configuration).
//! Roles run on a single-threaded tokio runtime: they share two cores with the broker, where
//! more threads cost more than they give.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

mod commands;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Airlock approves and reviews the tool calls of AI agents under evaluation, at fleet scale.
#[derive(Debug, Parser)]
#[command(name = "airlock", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check policy files and try them on calls, without a fleet.
    #[command(subcommand)]
    Policy(commands::policy::PolicyCommand),
    /// Run the whole fleet in one process and drive a simulated eval run through it.
    Demo(commands::demo::DemoArgs),
    /// Run a policy worker.
    Worker(commands::worker::WorkerArgs),
    /// Send one request through the fleet and print its decision as JSON.
    Request(commands::request::RequestArgs),
    /// Proxy an MCP server: every tools/call asks the fleet before it runs, and its result is
    /// reviewed before the client sees it.
    Mcp(commands::mcp::McpArgs),
    /// Run a model-based monitor for an external step, or calibrate one.
    Monitor(commands::monitor::MonitorArgs),
    /// AI-control figures of a run, from its decision log and Inspect's eval logs.
    #[command(subcommand)]
    Control(commands::control::ControlCommand),
    /// Run the reviewer service: human tasks in a web UI and an HTTP API (or add a reviewer).
    Reviewer(commands::reviewer::ReviewerArgs),
    /// Run the HTTP gateway: agent frameworks ask the fleet over HTTP (or add a token, make a
    /// webhook secret, measure).
    Gateway(commands::gateway::GatewayArgs),
    /// Answer a Claude Code hook (PreToolUse, PostToolUse) from the fleet, through the gateway:
    /// the hook's JSON on stdin, its answer on stdout; fails closed (exit 2) on any error.
    Hook(commands::hook::HookArgs),
    /// Decide human tasks in this terminal.
    Review(commands::review::ReviewArgs),
    /// Throw a switch on every later call of an eval run, fleet-wide.
    #[command(subcommand)]
    Run(commands::run::RunCommand),
    /// Manage the fleet's queues and exchanges.
    #[command(subcommand)]
    Topology(commands::topology::TopologyCommand),
    /// The decision log: write it, query it.
    #[command(subcommand)]
    Audit(commands::audit::AuditCommand),
    /// Make the keys of a signed fleet.
    #[command(subcommand)]
    Keys(commands::keys::KeysCommand),
    /// Measure the fleet's round trip over RabbitMQ against a bare AMQP echo.
    Bench(commands::bench::BenchArgs),
    /// The echo responder on Airlock's transport that `airlock bench` starts.
    #[command(hide = true)]
    BenchEcho(commands::bench::EchoArgs),
    /// The bare lapin echo responder that `airlock bench` starts for its denominator.
    #[command(hide = true)]
    BenchBareEcho(commands::bench::BareEchoArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Policy(command) => commands::policy::run(command),
        Command::Demo(args) => commands::block_on(commands::LOG_TOOL, commands::demo::run(args)),
        Command::Worker(args) => {
            let telemetry = args.telemetry.clone();
            commands::block_on_role("airlock-worker", &telemetry, |metrics| commands::worker::run(args, metrics))
        }
        Command::Request(args) => commands::block_on(commands::LOG_TOOL, commands::request::run(args)),
        Command::Mcp(args) => commands::block_on(commands::LOG_ROLE, commands::mcp::run(args)),
        Command::Monitor(args) => commands::monitor::run(args),
        Command::Control(command) => commands::report(commands::control::run(command)),
        Command::Reviewer(args) => commands::reviewer::run(args),
        Command::Gateway(args) => commands::gateway::run(args),
        Command::Hook(args) => commands::hook::run(args),
        Command::Review(args) => commands::block_on(commands::LOG_TOOL, commands::review::run(args)),
        Command::Run(command) => commands::block_on(commands::LOG_TOOL, commands::run::run(command)),
        Command::Topology(command) => commands::block_on(commands::LOG_TOOL, commands::topology::run(command)),
        Command::Audit(command) => commands::block_on(commands::LOG_ROLE, commands::audit::run(command)),
        Command::Keys(command) => commands::report(commands::keys::run(command)),
        Command::Bench(args) => commands::block_on(commands::LOG_TOOL, commands::bench::run(args)),
        Command::BenchEcho(args) => commands::block_on(commands::LOG_ROLE, commands::bench::serve_echo(args)),
        Command::BenchBareEcho(args) => commands::block_on(commands::LOG_ROLE, commands::bench::serve_bare_echo(args)),
    }
}
