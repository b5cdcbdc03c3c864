//! `airlock review --console`: decide human tasks in a plain terminal, one at a time, as
//! Inspect's console approver asks (`Approve (a), Reject (r), or Terminate (t)`). `i` with a
//! note marks the task shown as an incident (an attack) when it is decided.
//!
//! The console talks to a reviewer service's HTTP API (`--api URL --token T`), so storage,
//! deduplication and sending answers stay in one place. With `--amqp` instead it starts a
//! reviewer service of its own in this process (its store in `--store`, its API on
//! loopback) and talks to that: tasks are stored and acknowledged at once, never held open
//! while you think. Everything from the model is shown display-safe: escape sequences and
//! invisible characters appear as `‹U+XXXX›` instead of acting on the terminal.

use std::io::BufRead as _;
use std::path::PathBuf;
use std::time::Duration;

use airlock_policy::Kind;
use airlock_records::review::{Settled, TaskView};
use airlock_reviewer::auth::{Reviewer, Reviewers, new_token, sha256_hex};
use airlock_reviewer::client::{ApiClient, RequestError};
use airlock_reviewer::ui::why::WhyHere;
use airlock_reviewer::ui::{display_safe, has_unsafe, utc};
use airlock_reviewer::{ReviewerConfig, Service, instance_for_store};
use clap::Args;
use tokio::sync::mpsc;

use super::{Failure, FleetArgs, FleetOptions, ReplicationArgs, TlsArgs, connect, reviewer_signing_key};

/// How often an empty queue is looked at again.
const POLL: Duration = Duration::from_secs(1);

/// What marks the task shown as an incident (no choice starts with it).
const INCIDENT_KEY: &str = "i";

/// Arguments of `airlock review`.
#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// Decide in this terminal (the only mode so far).
    #[arg(long)]
    console: bool,
    /// A reviewer service's address, e.g. http://127.0.0.1:8080
    #[arg(long, conflicts_with = "amqp", requires = "token")]
    api: Option<String>,
    /// Your reviewer token for --api.
    #[arg(long, env = "AIRLOCK_REVIEW_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Serve the human queues of this broker directly (an embedded reviewer service).
    #[arg(long)]
    amqp: Option<String>,
    /// The fleet's prefix (with --amqp).
    #[arg(long, env = "AIRLOCK_PREFIX", default_value = "airlock")]
    prefix: String,
    #[command(flatten)]
    tls: TlsArgs,
    #[command(flatten)]
    replication: ReplicationArgs,
    /// The key your answers are signed with, as a reviewer service's (with --amqp).
    #[arg(long, env = "AIRLOCK_REVIEWER_SIGNING_KEY")]
    signing_key: Option<PathBuf>,
    /// The pools to serve (with --amqp), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "default")]
    pools: Vec<String>,
    /// Where the embedded service stores tasks (with --amqp).
    #[arg(long, default_value = "sqlite:airlock-review-console.db")]
    store: String,
    /// Your name, recorded as `decided_by` (with --amqp).
    #[arg(long, default_value = "console")]
    name: String,
    /// Where named policies live, for their `incident:` rule (with --amqp; see `airlock
    /// reviewer --policy-dir`).
    #[arg(long)]
    policy_dir: Option<PathBuf>,
}

/// Runs the console until end of input, `q`, or Ctrl-C.
pub async fn run(args: ReviewArgs) -> Result<(), Failure> {
    if !args.console {
        return Err(Failure::config("only --console is supported: airlock review --console --api URL --token T"));
    }
    match (&args.api, &args.amqp) {
        (Some(api), None) => {
            let token = args.token.clone().ok_or_else(|| Failure::config("--api needs --token"))?;
            console(Api::new(api, &token)).await
        }
        (None, Some(amqp)) => {
            let token = new_token();
            let reviewers = Reviewers::from_list(vec![Reviewer {
                name: args.name.clone(),
                token_sha256: sha256_hex(&token),
                pools: vec!["*".into()],
                admin: false,
                overrides: Vec::new(),
            }]);
            let config = ReviewerConfig {
                prefix: args.prefix.clone(),
                policy_dir: args.policy_dir.clone(),
                pools: args.pools.clone(),
                instance: instance_for_store(&args.store),
                metrics: Default::default(),
                store: args.store.clone(),
                listen: "127.0.0.1:0".parse().expect("a loopback address"),
                public_url: None,
                server: Default::default(),
                reviewers,
                signing_key: reviewer_signing_key(args.signing_key.as_deref())?,
                webhooks: Default::default(),
                canaries: None,
                claims: Default::default(),
            };
            config.validate().map_err(|e| Failure::config(e.to_string()))?;
            let transport = connect(
                &FleetArgs {
                    amqp: amqp.clone(),
                    options: FleetOptions {
                        prefix: args.prefix.clone(),
                        tls: args.tls.clone(),
                        replication: args.replication.clone(),
                    },
                },
                "review",
            )
            .await?;
            let service = Service::start(transport.clone(), config).await.map_err(|e| Failure::other(e.to_string()))?;
            let api = Api::new(&format!("http://{}", service.local_addr()), &token);
            let outcome = console(api).await;
            service.stop().await;
            use airlock_transport::Transport as _;
            transport.close().await;
            outcome
        }
        _ => Err(Failure::config("give either --api URL --token T, or --amqp URL")),
    }
}

/// A reviewer service's API, with errors as the command reports them.
struct Api {
    client: ApiClient,
    base: String,
}

impl Api {
    fn new(base: &str, token: &str) -> Self {
        Api { client: ApiClient::new(base, token), base: base.to_owned() }
    }

    /// A failure to reach the service.
    fn unreachable(&self, e: impl std::fmt::Display) -> Failure {
        Failure::other(format!("cannot reach {}: {e}", self.base))
    }
}

async fn console(api: Api) -> Result<(), Failure> {
    let me = match api.client.me().await {
        Ok(me) => me,
        Err(RequestError::Refused { status: 401, .. }) => {
            return Err(Failure::config("the reviewer service refused the token"));
        }
        Err(RequestError::Refused { status, error }) => {
            return Err(Failure::other(format!("asking who you are failed ({status}): {}", error.error)));
        }
        Err(e) => return Err(api.unreachable(e)),
    };
    println!(
        "Reviewing as {} (pools: {}). Answer with the letter shown; add words after it to explain \
         (e.g. `r not on prod`); `i` and a note marks the task as an incident, an attack, when you \
         decide it (e.g. `i exfiltrates ~/.ssh`, then `r`); `q` quits and leaves the task pending.",
        me.name,
        me.pools.join(", ")
    );
    let mut lines = stdin_lines();
    let mut waiting = false;
    loop {
        let tasks = match api.client.tasks().await {
            Ok(tasks) => tasks,
            Err(RequestError::Refused { status, error }) => {
                return Err(Failure::other(format!("listing tasks failed ({status}): {}", error.error)));
            }
            Err(e) => return Err(api.unreachable(e)),
        };
        // A task another reviewer claims is theirs to decide: the console takes the next one.
        let Some(task) =
            tasks.into_iter().find(|task| task.claim.as_ref().is_none_or(|c| !c.by.eq_ignore_ascii_case(&me.name)))
        else {
            if !waiting {
                println!("Waiting for tasks… (Ctrl-C to quit)");
                waiting = true;
            }
            tokio::select! {
                () = tokio::time::sleep(POLL) => continue,
                _ = tokio::signal::ctrl_c() => return Ok(()),
            }
        };
        waiting = false;
        print!("{}", render(&task));
        let choices: Vec<String> = task.choices.iter().map(|c| c.as_str().to_owned()).collect();
        let prompt = prompt(&choices);
        // `i` and a note: the task is marked as an incident when it is decided.
        let mut incident: Option<String> = None;
        let (decision, explanation) = loop {
            print!("{prompt} [{}]: ", choices.first().and_then(|c| c.get(..1)).unwrap_or("a"));
            let _ = std::io::Write::flush(&mut std::io::stdout());
            let line = tokio::select! {
                line = lines.recv() => line,
                _ = tokio::signal::ctrl_c() => None,
            };
            let Some(line) = line else { return Ok(()) };
            let line = line.trim();
            if line == "q" {
                return Ok(());
            }
            let (key, note) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            if key == INCIDENT_KEY {
                incident = Some(note.trim().to_owned());
                println!("It will be marked as an incident, an attack, when you decide it.");
                continue;
            }
            let key = if key.is_empty() { choices.first().map_or("a", |c| &c[..1]) } else { key };
            match choices.iter().find(|c| c.starts_with(&key.to_lowercase()) && key.len() == 1) {
                Some(choice) => break (choice.clone(), (!note.trim().is_empty()).then(|| note.trim().to_owned())),
                None => println!(
                    "Please answer with one of: {}",
                    choices.iter().map(|c| &c[..1]).collect::<Vec<_>>().join(", ")
                ),
            }
        };
        match api.client.decide_marked(&task.id, &decision, explanation.as_deref(), incident.as_deref()).await {
            Ok(_) if incident.is_some() => println!("Decision: {}, marked as an incident\n", capitalize(&decision)),
            Ok(_) => println!("Decision: {}\n", capitalize(&decision)),
            Err(RequestError::Refused { status: 409, error }) => match (error.settled, error.claim) {
                (Some(Settled::Decided { decision, decided_by, .. }), _) => {
                    println!("Already decided ({decision} by {decided_by}).\n")
                }
                (_, Some(claim)) => {
                    println!(
                        "Claimed by {} until {}: theirs to decide.\n",
                        display_safe(&claim.by),
                        utc(claim.until_unix_ms)
                    )
                }
                _ => println!("Already decided or withdrawn: {}.\n", error.error),
            },
            Err(RequestError::Refused { status, error }) => {
                println!("The decision was not recorded ({status}): {}\n", error.error)
            }
            Err(e) => return Err(api.unreachable(e)),
        }
    }
}

/// Reads stdin on a thread of its own, line by line.
fn stdin_lines() -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Inspect's console prompt: `Approve (a), Reject (r), or Terminate (t)`.
pub fn prompt(choices: &[String]) -> String {
    let parts: Vec<String> = choices.iter().map(|c| format!("{} ({})", capitalize(c), &c[..1])).collect();
    match parts.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{}, or {last}", rest.join(", ")),
    }
}

fn capitalize(word: &str) -> String {
    let mut out = word.to_owned();
    if let Some(first) = out.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    out
}

/// What the console shows of a task, every model-supplied string display-safe.
pub fn render(task: &TaskView) -> String {
    let safe = display_safe;
    let rule = "─".repeat(72);
    let title = if task.kind == Kind::Review { "Review Tool Result" } else { "Approve Tool" };
    let mut out = format!("\n┌ {title} {}\n", "─".repeat(70usize.saturating_sub(title.len())));
    let origin = task.origin.clone().unwrap_or_default();
    let mut heading = format!("sample {}, epoch {}", safe(&task.key.sample_id), task.key.epoch);
    if !origin.task.is_empty() {
        heading = format!("{} ({heading})", safe(&origin.task));
    }
    if !origin.model.is_empty() {
        heading = format!("{heading}: {}", safe(&origin.model));
    }
    out.push_str(&format!("│ {heading} · pool {}\n", safe(&task.pool)));
    if let Some(deadline) = task.deadline_unix_ms {
        let left = (deadline - airlock_records::time::now_ms()) / 1000;
        out.push_str(&format!("│ deadline in {left}s, then {}\n", task.on_timeout));
    }
    if let Some(claim) = &task.claim {
        out.push_str(&format!("│ claimed by {} until {}\n", safe(&claim.by), utc(claim.until_unix_ms)));
    }
    let why = WhyHere::of_view(task);
    out.push_str(&why_here(&why));
    let message = safe(&task.message);
    if !message.trim().is_empty() {
        out.push_str(&format!("\nAssistant\n{}\n", message.trim()));
    }
    let shown = &task.shown;
    if let Some(context) = &shown.context {
        if let Some(title) = &context.title {
            out.push_str(&format!("\n{}\n", safe(title)));
        }
        out.push_str(&format!("\n{}\n", safe(&context.text)));
    }
    out.push_str(&format!("\n{}\n", "․".repeat(72)));
    if let Some(title) = &shown.call.title {
        out.push_str(&format!("{}\n", safe(title)));
    }
    out.push_str(&format!("{}\n{rule}\n", safe(&shown.call.text)));
    let contents = shown.context.iter().chain([&shown.call]);
    let mut texts = contents.flat_map(|c| [c.title.as_deref().unwrap_or_default(), c.text.as_str()]);
    let trail_unsafe = why.answers.iter().any(|a| {
        has_unsafe(&a.approver)
            || a.explanation.as_deref().is_some_and(has_unsafe)
            || a.fields.iter().any(|f| has_unsafe(&f.label) || has_unsafe(&f.value))
            || a.protocol.iter().flat_map(|p| p.lines()).any(|line| has_unsafe(&line))
    });
    if has_unsafe(&task.message) || texts.any(has_unsafe) || trail_unsafe {
        out.push_str("Note: control or invisible characters in this task are shown as ‹U+XXXX›.\n");
    }
    out
}

/// Why the task is here, as the web UI says it: the policy, then each earlier step's answer
/// with its explanation and metadata (a monitor's score, reason and model first).
fn why_here(why: &WhyHere) -> String {
    let safe = display_safe;
    let mut out = String::new();
    if let Some(policy) = &why.policy {
        let digest = policy.digest.get(..12).unwrap_or(&policy.digest);
        out.push_str(&format!("│ policy {} ({})\n", safe(&policy.name), safe(digest)));
    }
    if why.answers.is_empty() {
        return out;
    }
    out.push_str("\nWhy it is here\n");
    for (index, answer) in why.answers.iter().enumerate() {
        out.push_str(&format!("{}. {} → {}", index + 1, safe(&answer.approver), answer.decision));
        if let Some(by) = &answer.decided_by {
            out.push_str(&format!(" (by {})", safe(by)));
        }
        out.push('\n');
        if let Some(explanation) = answer.explanation.as_deref().map(str::trim).filter(|e| !e.is_empty()) {
            out.push_str(&format!("   {}\n", safe(explanation)));
        }
        for field in &answer.fields {
            out.push_str(&format!("   {}: {}\n", safe(&field.label), safe(&field.value)));
        }
        for line in answer.protocol.iter().flat_map(|protocol| protocol.lines()) {
            out.push_str(&format!("   {}\n", safe(&line)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_is_inspects() {
        let choices: Vec<String> = ["approve", "reject", "terminate"].map(String::from).to_vec();
        assert_eq!(prompt(&choices), "Approve (a), Reject (r), or Terminate (t)");
        assert_eq!(prompt(&["continue".into(), "terminate".into()]), "Continue (c), or Terminate (t)");
    }

    #[test]
    fn escapes_never_reach_the_terminal() {
        let task: TaskView = serde_json::from_value(serde_json::json!({
            "id": "t1", "correlation": "approval/r/s/1/c", "step": 1, "choices": ["approve", "reject"],
            "kind": "approval", "message": "hi\u{1b}[2J", "pool": "ops",
            "key": {"run_id": "r", "sample_id": "s", "epoch": 1, "tool_call_id": "c"},
            "call": null, "view": null, "result": null, "output": null,
            "origin": {"run_id": "r", "eval_id": "e", "task": "t", "sample_id": "s", "epoch": 1, "model": "m",
                       "runner_id": "x"},
            "shown": {"call": {"text": "bash(cmd='\u{202e}exe')", "title": null, "markdown": true}, "context": null},
            "received_at_unix_ms": 1, "deadline_unix_ms": null, "on_timeout": "reject", "state": "pending",
        }))
        .unwrap();
        let shown = render(&task);
        assert!(!shown.contains('\u{1b}') && !shown.contains('\u{202e}'), "{shown:?}");
        assert!(!shown.contains("Why it is here"), "no step answered before: {shown}");
        assert!(!shown.contains("claimed by"), "nobody holds it: {shown}");
        assert!(shown.contains("hi‹U+001B›[2J") && shown.contains("‹U+202E›exe"), "{shown}");
    }

    #[test]
    fn a_claimed_task_names_its_holder() {
        let task: TaskView = serde_json::from_value(serde_json::json!({
            "id": "t1", "correlation": "approval/r/s/1/c", "step": 1, "choices": ["approve", "reject"],
            "kind": "approval", "message": "", "pool": "ops",
            "key": {"run_id": "r", "sample_id": "s", "epoch": 1, "tool_call_id": "c"},
            "call": null, "view": null, "result": null, "output": null, "origin": null,
            "shown": {"call": {"text": "bash(cmd='ls')", "title": null, "markdown": true}, "context": null},
            "received_at_unix_ms": 1, "deadline_unix_ms": null, "on_timeout": "reject", "state": "pending",
            "claim": {"by": "alice\u{1b}", "until_unix_ms": 1_800_000_000_000_i64},
        }))
        .unwrap();
        let shown = render(&task);
        assert!(shown.contains("│ claimed by alice‹U+001B› until 2027-01-15 08:00:00 UTC\n"), "{shown}");
    }

    #[test]
    fn a_task_says_why_it_is_here() {
        let task: TaskView = serde_json::from_value(serde_json::json!({
            "id": "t1", "correlation": "approval/r/s/1/c", "step": 2, "choices": ["approve", "reject"],
            "kind": "approval", "message": "", "pool": "ops",
            "key": {"run_id": "r", "sample_id": "s", "epoch": 1, "tool_call_id": "c"},
            "call": null, "view": null, "result": null, "output": null, "origin": null,
            "shown": {"call": {"text": "bash(cmd='rm -rf /tmp/x')", "title": null, "markdown": true}, "context": null},
            "received_at_unix_ms": 1, "deadline_unix_ms": null, "on_timeout": "reject", "state": "pending",
            "policy": {"name": "ops-policy", "digest": "0123456789abcdef0123"},
            "trail": [
                {"approver": "allow_reads", "decision": "escalate", "explanation": "not a read"},
                {"approver": "monitor", "decision": "escalate", "explanation": "looks destructive",
                 "decided_by": "monitor-1",
                 "metadata": {"score": 7.5, "reason": "deletes files\u{1b}[2J", "model": "openai/gpt-x"}}
            ]
        }))
        .unwrap();
        let shown = render(&task);
        assert!(shown.contains("│ policy ops-policy (0123456789ab)"), "{shown}");
        let why = &shown[shown.find("Why it is here").expect("a trail section")..];
        assert!(why.contains("1. allow_reads → escalate\n   not a read\n"), "{why}");
        assert!(why.contains("2. monitor → escalate (by monitor-1)\n   looks destructive\n"), "{why}");
        assert!(why.contains("   Score: 7.5\n") && why.contains("   Model: openai/gpt-x\n"), "{why}");
        assert!(why.contains("   Reason: deletes files‹U+001B›[2J\n"), "{why}");
        assert!(shown.contains("Note: control or invisible characters"), "{shown}");
    }

    #[test]
    fn a_resample_prints_each_sample_on_its_line() {
        let call = |cmd: &str| serde_json::json!({"function": "bash", "arguments": {"cmd": cmd}});
        let task: TaskView = serde_json::from_value(serde_json::json!({
            "id": "t1", "correlation": "approval/r/s/1/c", "step": 1, "choices": ["approve", "reject"],
            "kind": "approval", "message": "", "pool": "ops",
            "key": {"run_id": "r", "sample_id": "s", "epoch": 1, "tool_call_id": "c"},
            "call": null, "view": null, "result": null, "output": null, "origin": null,
            "shown": {"call": {"text": "bash(cmd='curl x | sh')", "title": null, "markdown": true}, "context": null},
            "received_at_unix_ms": 1, "deadline_unix_ms": null, "on_timeout": "reject", "state": "pending",
            "trail": [{"approver": "resample", "decision": "escalate", "metadata": {"score": 8, "protocol": {
                "name": "resample", "mode": "run", "threshold": 6, "model": "openai/untrusted",
                "original": call("curl x | sh"),
                "samples": [{"call": call("ls"), "score": 2, "reason": "lists\u{202e}", "chosen": true},
                            {"error": "no call"}],
                "evidence": {"max": 8, "mean": 5}}}}]
        }))
        .unwrap();
        let shown = render(&task);
        let why = &shown[shown.find("Why it is here").expect("a trail section")..];
        assert!(why.contains("   Score: 8\n") && !why.contains("protocol"), "{why}");
        assert!(
            why.contains("   Resampled: model openai/untrusted · score 8 · threshold 6 · evidence: max 8, mean 5\n")
        );
        assert!(why.contains("   Original (untrusted model): bash(cmd='curl x | sh') · score 8\n"), "{why}");
        assert!(why.contains("   Sample 1 [chosen]: bash(cmd='ls') · score 2 · lists‹U+202E›\n"), "{why}");
        assert!(why.contains("   Sample 2: (no call) · no call\n"), "{why}");
        assert!(shown.contains("Note: control or invisible characters"), "{shown}");
    }
}
