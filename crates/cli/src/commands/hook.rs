//! `airlock hook`: a Claude Code command hook (`PreToolUse`, `PostToolUse`) that asks the
//! fleet through the gateway's hook route (`POST /v1/hooks/claude-code`,
//! [`airlock_gateway::claude_code`]): the hook's JSON on stdin, the gateway's answer on stdout.
//!
//! It fails closed on any error: input that is not a hook's, a missing token, a gateway that
//! cannot be reached, does not answer within the timeout or answers anything but `200` with a
//! JSON object. Then it writes the fail-closed output ([`claude_code::fail_closed`]: deny,
//! block) on stdout, the reason on stderr, and exits 2, which Claude Code reads as a
//! blocking error whatever the output says: the call does not run (`PreToolUse`), or the
//! model is shown the reason (`PostToolUse`). Bad arguments exit 2 too (clap's usage error).

use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use airlock_gateway::claude_code;
use airlock_gateway::http::CLAUDE_CODE_HOOKS;
use clap::Args;

/// Claude Code's exit status for a blocking error.
pub const EXIT_BLOCK: u8 = 2;

/// How much longer than `--timeout` the gateway may take to give its own fail-closed answer.
const GRACE: Duration = Duration::from_secs(2);

/// Arguments of `airlock hook`.
#[derive(Debug, Args)]
pub struct HookArgs {
    /// The gateway, e.g. http://127.0.0.1:8090.
    #[arg(long, env = "AIRLOCK_GATEWAY_URL")]
    gateway: String,
    /// The named policy the calls are decided by.
    #[arg(long, env = "AIRLOCK_GATEWAY_POLICY")]
    policy: String,
    /// A file holding the gateway token; without it, AIRLOCK_GATEWAY_TOKEN.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Seconds the fleet may take (at most the gateway's --max-wait); past them the call is
    /// denied. Give the hook's own `timeout` in Claude Code's settings more than this.
    #[arg(long, default_value_t = 30.0)]
    timeout: f64,
    /// What a call is answered when every step that matched it escalated: deny, or ask the
    /// person at Claude Code.
    #[arg(long, value_enum, default_value_t = EscalatedArg::Deny)]
    escalated: EscalatedArg,
}

/// `--escalated`, as [`claude_code::Escalated`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EscalatedArg {
    /// Deny, as Inspect decides.
    Deny,
    /// Ask the person at Claude Code.
    Ask,
}

impl EscalatedArg {
    /// Its name in the hook route's query.
    fn name(self) -> &'static str {
        match self {
            EscalatedArg::Deny => "deny",
            EscalatedArg::Ask => "ask",
        }
    }
}

/// Reads the hook's input, asks the gateway, and writes the hook's output.
pub fn run(args: HookArgs) -> ExitCode {
    let mut input = Vec::new();
    let answer = match std::io::stdin().read_to_end(&mut input) {
        // A panic is an error too: it must not end the process with a status Claude Code lets
        // the call run on.
        Ok(_) => std::panic::catch_unwind(|| {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
            runtime.block_on(ask(&args, &input))
        })
        .unwrap_or_else(|_| Err("airlock hook failed (a panic, above)".into())),
        Err(e) => Err(format!("the hook's input could not be read: {e}")),
    };
    let mut stdout = std::io::stdout().lock();
    match answer {
        Ok(output) if writeln!(stdout, "{output}").and_then(|()| stdout.flush()).is_ok() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(EXIT_BLOCK),
        Err(reason) => {
            let reason = format!("Airlock could not decide this call, so it is refused: {reason}");
            let output = claude_code::fail_closed(claude_code::Event::of(&input), &reason);
            let _ = writeln!(stdout, "{output}");
            eprintln!("{reason}");
            ExitCode::from(EXIT_BLOCK)
        }
    }
}

/// The gateway's answer to `input`, or why there is none.
async fn ask(args: &HookArgs, input: &[u8]) -> Result<serde_json::Value, String> {
    claude_code::parse(input).map_err(|invalid| format!("the hook's input is not usable: {}", invalid.message))?;
    let token = token(args)?;
    let timeout = super::seconds(args.timeout, "--timeout").map_err(|failure| failure.message)?;
    let mut url = reqwest::Url::parse(&args.gateway)
        .and_then(|base| base.join(CLAUDE_CODE_HOOKS))
        .map_err(|e| format!("--gateway {}: {e}", args.gateway))?;
    url.query_pairs_mut()
        .append_pair("policy", &args.policy)
        .append_pair("timeout", &timeout.as_secs_f64().to_string())
        .append_pair("escalated", args.escalated.name());
    let http = match url.scheme() {
        "https" => super::http_client()?,
        _ => super::plain_http_client()?,
    };
    let response = http
        .post(url)
        .bearer_auth(token)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(input.to_vec())
        .timeout(timeout + GRACE)
        .send()
        .await
        .map_err(|e| format!("the gateway could not be asked: {e}"))?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| format!("the gateway's answer could not be read: {e}"))?;
    if status != reqwest::StatusCode::OK {
        return Err(format!("the gateway answered {status}: {}", String::from_utf8_lossy(&body)));
    }
    match serde_json::from_slice(&body) {
        Ok(output @ serde_json::Value::Object(_)) => Ok(output),
        _ => Err("the gateway's answer is not a JSON object".into()),
    }
}

/// The token from `--token-file`, else `AIRLOCK_GATEWAY_TOKEN`.
fn token(args: &HookArgs) -> Result<String, String> {
    let token = match &args.token_file {
        Some(path) => std::fs::read_to_string(path).map_err(|e| format!("--token-file {}: {e}", path.display()))?,
        None => std::env::var("AIRLOCK_GATEWAY_TOKEN")
            .map_err(|_| "no token: pass --token-file or set AIRLOCK_GATEWAY_TOKEN".to_owned())?,
    };
    let token = token.trim();
    if token.is_empty() {
        return Err("the token is empty".into());
    }
    Ok(token.to_owned())
}
