//! `airlock mcp`: the MCP proxy ([`airlock_mcp`]) as a runner of the fleet. It fronts a
//! server command (`-- COMMAND ARGS...`, one per session) or a server URL (`--server-url`),
//! for one client on its stdio (the default) or for clients over streamable HTTP
//! (`--listen`).

use std::net::SocketAddr;
use std::sync::Arc;

use airlock_client::{Client, ClientConfig, Repeats};
use airlock_mcp::{Gate, Proxy, Server};
use airlock_transport::Transport as _;
use clap::Args;

use super::{Failure, FleetArgs, PolicyArgs, ServerArgs, VerifyArgs, connect, seconds, shutdown_signal};

/// Arguments of `airlock mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    fleet: FleetArgs,
    #[command(flatten)]
    policy: PolicyArgs,
    /// Seconds a call waits for a decision (and a result for its review) before it fails
    /// closed: an approval rejects, a review terminates.
    #[arg(long, default_value_t = 300.0)]
    timeout: f64,
    /// The sample id of every request; the run is the MCP session (`mcp-<uuid>`).
    #[arg(long, default_value = "mcp")]
    sample_id: String,
    /// Seconds between the progress notifications a waiting call sends a client that gave a
    /// progress token.
    #[arg(long, default_value_t = 5.0)]
    progress_interval: f64,
    /// Serve MCP clients over streamable HTTP on this address (e.g. 127.0.0.1:8765) instead
    /// of one client on stdin and stdout; the endpoint's URL is printed on stdout.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// The path of the streamable HTTP endpoint, with --listen.
    #[arg(long, default_value = "/mcp", requires = "listen")]
    path: String,
    /// The MCP server's streamable HTTP endpoint, instead of a command.
    #[arg(long, conflicts_with = "command", required_unless_present = "command")]
    server_url: Option<reqwest::Url>,
    /// The MCP server command and its arguments, after `--`: started for each session,
    /// speaking MCP on its stdio.
    #[arg(last = true)]
    command: Vec<String>,
    #[command(flatten)]
    verify: VerifyArgs,
    #[command(flatten)]
    server_limits: ServerArgs,
}

/// Runs the proxy until its client leaves (stdio) or it is stopped (HTTP). A session the
/// fleet terminates ends a stdio proxy with an error.
pub async fn run(args: McpArgs) -> Result<(), Failure> {
    let policy = args.policy.source()?;
    let server = match (args.server_url, args.command.split_first()) {
        (Some(url), _) => Server::Url(url),
        (None, Some((program, rest))) => Server::Command { program: program.clone(), args: rest.to_vec() },
        (None, None) => return Err(Failure::config("give the MCP server: -- COMMAND ARGS... or --server-url URL")),
    };
    let timeout = seconds(args.timeout, "--timeout")?;
    let progress_every = seconds(args.progress_interval, "--progress-interval")?;
    let limits = args.server_limits.limits()?;
    let replies = args.verify.replies()?;
    let transport = connect(&args.fleet, "mcp").await?;
    let config = ClientConfig {
        prefix: args.fleet.options.prefix.clone(),
        runner_id: format!("{}.mcp-{}", transport.user(), uuid::Uuid::now_v7()),
        default_timeout: timeout,
        replies,
        repeats: Repeats::default(),
    };
    let client = Client::connect(transport.clone(), config)
        .await
        .map_err(|e| Failure::other(format!("cannot start the fleet's client: {e}")))?;
    let gate = Arc::new(Gate { client: client.clone(), policy, timeout, sample: args.sample_id });
    let proxy = Arc::new(Proxy { gate, server, progress_every });
    let result = match args.listen {
        None => proxy.serve_stdio().await.map_err(|e| Failure::other(e.to_string())),
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| Failure::config(format!("--listen {addr}: {e}")))?;
            let bound = listener.local_addr().map_err(|e| Failure::other(e.to_string()))?;
            println!("http://{bound}{}", args.path);
            tracing::info!(%bound, path = %args.path, "Serving MCP over streamable HTTP.");
            proxy.serve_http(listener, &args.path, limits, shutdown_signal()).await;
            Ok(())
        }
    };
    client.close().await;
    transport.close().await;
    result
}
