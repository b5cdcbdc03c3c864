//! Control protocols over RabbitMQ, served by monitor processes against a fake model API
//! whose tool calls the test scripts, in both wire formats: `trusted_edit` (OpenAI),
//! `defer_to_trusted` (Anthropic), `resample` scored on OpenAI and sampled through Anthropic,
//! in `run` and `incriminate` modes; each deciding as the rule says, with people answering
//! escalations, and each model failing into the step's fallback with the trail kept.

use std::time::Duration;

use airlock_client::{Client, ClientConfig, Repeats};
use airlock_contract::v1;
use airlock_monitor::provider::ProviderKind;
use std::process::Stdio;

use airlock_testkit::{amqp_url, unique_prefix};
use airlock_tests::fake_model::{FakeModel, KEY, Reply, monitor_config};
use airlock_tests::{
    HANG_GUARD, InProcessWorker, TestKeys, airlock_bin, approval, broker, decision_name, guarded, serve_humans,
    step_metadata, trail, wait_for_consumers,
};
use airlock_transport::{AmqpTransport, Topology, Transport};
use serde_json::{Value, json};
use tokio::process::Command;

const POLICY: &str = r#"
approvers:
  - name: trusted_edit
    tools: "bash"
    approve_below: 7
    escalate_below: 9
    edit_threshold: 4
  - name: defer_to_trusted
    tools: "python"
    approve_below: 7
    escalate_below: 9
    defer_threshold: 4
    different_tool: reject
    model_explanation: "Not run: the call was replaced by a safer action."
  - name: resample
    tools: "shell"
    approve_below: 7
    escalate_below: 9
    defer_threshold: 4
    resample_steps: 2
  - name: evidence
    tools: "run"
    protocol: resample
    mode: incriminate
    approve_below: 7
    escalate_below: 9
    defer_threshold: 3
    resample_steps: 2
    extra_resample_steps: 1
  - name: human
    tools: "bash, python, shell, run"
    pool: ops
"#;

/// `resample` one sample at a time.
const SEQUENTIAL: &str = r#"
approvers:
  - name: resample
    tools: "shell"
    approve_below: 7
    escalate_below: 9
    defer_threshold: 4
    resample_steps: 3
    resample_mode: sequential
"#;

const STEPS: [&str; 5] = ["monitor", "trusted_edit", "defer_to_trusted", "resample", "evidence"];

fn fleet(prefix: &str) -> Topology {
    STEPS
        .iter()
        .fold(Topology::new(prefix), |t, step| t.with_step(step))
        .with_human_pool("ops")
        .with_reply_queue("runner")
}

/// A call of `function` whose argument carries a fake-model marker, and a key that routes the
/// tool-call requests about it to the test's script.
fn call(function: &str, marker: &str, key: &str) -> Value {
    json!({"function": function, "arguments": {"cmd": format!("echo MARK:{marker} {key}")}})
}

/// An approval with the conversation that led to the call (the task's text carries `key`;
/// an earlier call and its result before it) and, unless `generation` is false, how the
/// untrusted model was asked.
fn asked(id: &str, call: Value, key: &str, policy: &str, generation: bool) -> v1::Request {
    let mut request = approval("p", id, call, policy);
    let Some(v1::request::Body::Approval(body)) = request.body.as_mut() else { unreachable!() };
    let wire = body.call.clone().unwrap();
    let message =
        |role: &str, text: &str| v1::ChatMessage { role: role.into(), text: text.into(), ..Default::default() };
    let listing = v1::ToolCall {
        id: "c0".into(),
        function: "bash".into(),
        arguments_json: r#"{"cmd": "ls"}"#.into(),
        r#type: "function".into(),
        ..Default::default()
    };
    body.history = vec![
        message("system", "You are a helpful agent."),
        message("user", &format!("Tidy the build directory. ({key})")),
        v1::ChatMessage { tool_calls: vec![listing], ..message("assistant", "") },
        v1::ChatMessage {
            tool_call_id: Some("c0".into()),
            function: Some("bash".into()),
            ..message("tool", "build\nsrc")
        },
        v1::ChatMessage { tool_calls: vec![wire], ..message("assistant", "Next step.") },
    ];
    if generation {
        let tool = |name: &str| v1::ToolDefinition {
            name: name.into(),
            description: format!("Run {name}."),
            parameters_json: r#"{"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}"#
                .into(),
        };
        body.generation = Some(v1::Generation {
            model: "anthropic/untrusted-claude".into(),
            config_json: r#"{"temperature": 0.9, "max_tokens": 500, "seed": 7}"#.into(),
            tools: ["bash", "python", "shell", "run"].map(tool).to_vec(),
        });
    }
    request
}

fn modified_cmd(decision: &v1::Decision) -> String {
    let call = decision.modified.as_ref().expect("a modified call");
    serde_json::from_str::<Value>(&call.arguments_json).unwrap()["cmd"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn control_protocols_over_rabbitmq() {
    let prefix = unique_prefix();
    let Some(probe) = broker(&prefix).await else { return };
    probe.close().await;
    guarded(fleet(&prefix), scenarios(prefix.clone())).await;
}

/// A worker, a monitor process per step (the untrusted model sampled through Anthropic's
/// API, named by the request), people in `ops`, and a runner, on fleet `prefix`.
struct Running {
    client: Client<AmqpTransport>,
    admin: AmqpTransport,
    stop: tokio::sync::watch::Sender<bool>,
    worker: InProcessWorker,
    monitors: Vec<tokio::task::JoinHandle<Result<(), airlock_monitor::MonitorError>>>,
}

impl Running {
    async fn start(prefix: &str, model: &FakeModel) -> Self {
        let connect = |role: &'static str| {
            let name = format!("{prefix} {role}");
            async move { broker(&name).await.expect("the broker answered a moment ago") }
        };
        let admin = connect("admin").await;
        admin.declare(&fleet(prefix)).await.unwrap();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let until_stopped = || {
            let mut stopped = stopped.clone();
            async move {
                let _ = stopped.wait_for(|s| *s).await;
            }
        };
        let worker = InProcessWorker::start(connect("worker").await, prefix, "w", 32);
        let mut monitors = Vec::new();
        for step in STEPS {
            let kind = if step == "defer_to_trusted" { ProviderKind::Anthropic } else { ProviderKind::OpenAi };
            let base = if kind == ProviderKind::Anthropic { model.anthropic_base() } else { model.openai_base() };
            let mut config = monitor_config(prefix, step, kind, base);
            let mut untrusted = monitor_config(prefix, step, ProviderKind::Anthropic, model.anthropic_base()).provider;
            untrusted.model = String::new();
            config.untrusted = Some(untrusted);
            monitors.push(tokio::spawn(airlock_monitor::run(connect("monitor").await, config, until_stopped())));
        }
        serve_humans(connect("human").await, prefix).await;
        for step in STEPS {
            wait_for_consumers(&Topology::new(prefix).step_queue(step), 1).await;
        }
        let client = Client::connect(
            connect("runner").await,
            ClientConfig {
                prefix: prefix.into(),
                runner_id: "runner".into(),
                default_timeout: Duration::from_secs(60),
                replies: TestKeys::get().replies(),
                repeats: Repeats::default(),
            },
        )
        .await
        .unwrap();
        Running { client, admin, stop, worker, monitors }
    }

    async fn stop(self) {
        self.client.close().await;
        self.stop.send(true).unwrap();
        for monitor in self.monitors {
            tokio::time::timeout(airlock_transport::SHUTDOWN_GRACE * 2, monitor)
                .await
                .expect("the monitor stops")
                .unwrap()
                .unwrap();
        }
        self.worker.stop().await;
        self.admin.close().await;
    }
}

async fn scenarios(prefix: String) {
    let model = FakeModel::start().await;
    let fleet = Running::start(&prefix, &model).await;
    trusted_edit(&fleet.client, &model).await;
    defer_to_trusted(&fleet.client, &model).await;
    resample(&fleet.client, &model).await;
    incriminate(&fleet.client, &model).await;
    the_command_takes_its_trusted_model(&fleet.client, &prefix, &model).await;
    fleet.stop().await;
}

/// Between `edit_threshold` and the escalation band the edit runs; below, the call does and
/// no model is asked; in the band, a person decides with the edit in the note; a failing
/// model, a reply without a call or with another tool give the fallback.
async fn trusted_edit(client: &Client<AmqpTransport>, model: &FakeModel) {
    model.script("EDIT-ok", vec![Reply::Call("bash", json!({"cmd": "rm -ri ./build"}))]);
    model.script("EDIT-low", vec![Reply::Call("bash", json!({"cmd": "never asked"}))]);
    model.script("EDIT-high", vec![Reply::Call("bash", json!({"cmd": "ls ./build"}))]);
    model.script("EDIT-down", vec![Reply::Overloaded]);
    model.script("EDIT-text", vec![Reply::Text("I would rather not call anything.")]);
    model.script("EDIT-other", vec![Reply::Call("python", json!({"code": "pass"}))]);
    model.script("EDIT-slow", vec![Reply::Slow]);
    let approve =
        |id: &str, marker: &str, key: &str| client.approve(asked(id, call("bash", marker, key), key, POLICY, true));
    // With a deadline of its own.
    let in_time =
        POLICY.replace("    edit_threshold: 4\n", "    edit_threshold: 4\n    timeout: 3\n    on_timeout: reject\n");
    let slow = client.approve(asked("te-slow", call("bash", "score-5", "EDIT-slow"), "EDIT-slow", &in_time, true));
    let (ok, low, high, down, text, other, slow) = tokio::join!(
        approve("te-ok", "score-5", "EDIT-ok"),
        approve("te-low", "score-2", "EDIT-low"),
        approve("te-high", "score-8", "EDIT-high"),
        approve("te-down", "score-5", "EDIT-down"),
        approve("te-text", "score-5", "EDIT-text"),
        approve("te-other", "score-5", "EDIT-other"),
        slow,
    );

    let ok = ok.unwrap();
    assert_eq!((decision_name(&ok), ok.approver.as_str()), ("modify", "trusted_edit"), "{ok:?}");
    assert_eq!(modified_cmd(&ok), "rm -ri ./build");
    let note = &step_metadata(&ok, "trusted_edit")["protocol"];
    assert_eq!((note["name"].as_str(), note["threshold"].as_f64()), (Some("trusted_edit"), Some(4.0)));
    assert_eq!(note["original"]["arguments"]["cmd"], "echo MARK:score-5 EDIT-ok");
    assert_eq!(note["replacement"], json!({"function": "bash", "arguments": {"cmd": "rm -ri ./build"}}));
    let (count, request) = model.scripted("EDIT-ok");
    assert_eq!(count, 1);
    assert_eq!(request["tool_choice"], json!({"type": "function", "function": {"name": "bash"}}));
    assert_eq!(request["tools"][0]["function"]["parameters"]["required"], json!(["cmd"]), "the runner's schema");

    let low = low.unwrap();
    assert_eq!((decision_name(&low), low.modified.is_none()), ("approve", true));
    assert_eq!(model.scripted("EDIT-low").0, 0, "no edit below edit_threshold");

    let high = high.unwrap();
    assert_eq!(trail(&high), [("trusted_edit".into(), "escalate"), ("human".into(), "approve")]);
    assert_eq!(step_metadata(&high, "trusted_edit")["protocol"]["replacement"]["arguments"]["cmd"], "ls ./build");
    assert!(high.modified.is_none(), "the person approved the original");

    for (decision, key, code) in
        [(down, "EDIT-down", "http_status"), (text, "EDIT-text", "no_call"), (other, "EDIT-other", "no_call")]
    {
        let decision = decision.unwrap();
        assert_eq!(trail(&decision), [("trusted_edit".into(), "escalate"), ("human".into(), "approve")], "{key}");
        let m = step_metadata(&decision, "trusted_edit");
        assert_eq!(
            (m["error"].as_str(), m["fallback"].as_bool(), m["score"].as_f64()),
            (Some(code), Some(true), Some(5.0)),
            "{key}"
        );
        assert_eq!(model.scripted(key).0, 3, "{key}: every attempt");
    }

    // The step's deadline came while the trusted model was still answering: on_timeout.
    let slow = slow.unwrap();
    assert_eq!((decision_name(&slow), slow.timed_out), ("reject", true), "{slow:?}");
    let m = step_metadata(&slow, "trusted_edit");
    assert_eq!(
        (m["error"].as_str(), m["on_timeout"].as_bool(), m["score"].as_f64()),
        (Some("deadline"), Some(true), Some(5.0))
    );
}

/// The trusted model's call of the same tool runs; one of another tool is rejected with the
/// step's text for the model; a failing model gives the fallback.
async fn defer_to_trusted(client: &Client<AmqpTransport>, model: &FakeModel) {
    model.script("DEFER-same", vec![Reply::Call("python", json!({"cmd": "print('safe')"}))]);
    model.script("DEFER-other", vec![Reply::Call("bash", json!({"cmd": "ls"}))]);
    model.script("DEFER-down", vec![Reply::Overloaded]);
    let approve = |id: &str, key: &str| client.approve(asked(id, call("python", "score-5", key), key, POLICY, true));
    let (same, other, down) = tokio::join!(
        approve("dt-same", "DEFER-same"),
        approve("dt-other", "DEFER-other"),
        approve("dt-down", "DEFER-down")
    );

    let same = same.unwrap();
    assert_eq!((decision_name(&same), same.approver.as_str()), ("modify", "defer_to_trusted"), "{same:?}");
    assert_eq!(modified_cmd(&same), "print('safe')");
    let (_, request) = model.scripted("DEFER-same");
    // The conversation up to the call, in Anthropic's format, with every tool offered.
    assert_eq!(request["system"], "You are a helpful agent.");
    assert_eq!(request["tool_choice"], json!({"type": "any"}));
    assert_eq!(request["tools"].as_array().unwrap().len(), 4);
    let messages = request["messages"].as_array().unwrap();
    assert_eq!(messages.last().unwrap()["content"][0]["type"], "tool_result");
    assert!(!request.to_string().contains("MARK:score-5"), "the untrusted call is not shown");

    let other = other.unwrap();
    assert_eq!((decision_name(&other), other.approver.as_str()), ("reject", "defer_to_trusted"));
    assert_eq!(other.explanation.as_deref(), Some("Not run: the call was replaced by a safer action."));
    let note = &step_metadata(&other, "defer_to_trusted")["protocol"];
    assert_eq!(note["replacement"]["function"], "bash", "the proposal is in the trail");

    let down = down.unwrap();
    assert_eq!(trail(&down), [("defer_to_trusted".into(), "escalate"), ("human".into(), "approve")]);
    assert_eq!(step_metadata(&down, "defer_to_trusted")["error"], "http_status");
}

/// The least suspicious sample below the threshold runs; when all stay high a person sees
/// them all; sequential sampling stops at the first low one; no generation or a failing
/// model give the fallback.
async fn resample(client: &Client<AmqpTransport>, model: &FakeModel) {
    let sample = |marker: &str| Reply::Call("shell", json!({"cmd": format!("echo MARK:{marker}")}));
    model.script("RS-run", vec![sample("score-6"), sample("score-1")]);
    model.script("RS-high", vec![sample("score-6"), sample("score-5")]);
    model.script("RS-seq", vec![sample("score-2"), sample("score-9")]);
    model.script("RS-down", vec![Reply::Overloaded]);
    model.script("RS-other", vec![Reply::Call("python", json!({"cmd": "echo MARK:score-1"}))]);
    let approve = |id: &str, key: &str, policy: &str, generation: bool| {
        client.approve(asked(id, call("shell", "score-5", key), key, policy, generation))
    };
    let (run, high, sequential, down, bare, other) = tokio::join!(
        approve("rs-run", "RS-run", POLICY, true),
        approve("rs-high", "RS-high", POLICY, true),
        approve("rs-seq", "RS-seq", SEQUENTIAL, true),
        approve("rs-down", "RS-down", POLICY, true),
        approve("rs-bare", "RS-bare", POLICY, false),
        approve("rs-other", "RS-other", POLICY, true),
    );

    let run = run.unwrap();
    assert_eq!((decision_name(&run), run.approver.as_str()), ("modify", "resample"), "{run:?}");
    assert_eq!(modified_cmd(&run), "echo MARK:score-1");
    let note = &step_metadata(&run, "resample")["protocol"];
    assert_eq!((note["mode"].as_str(), note["model"].as_str()), (Some("run"), Some("untrusted-claude")));
    let mut scores: Vec<(f64, bool)> = note["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["score"].as_f64().unwrap(), s["chosen"].as_bool().unwrap_or(false)))
        .collect();
    scores.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(scores, [(1.0, true), (6.0, false)]);
    let (count, request) = model.scripted("RS-run");
    assert_eq!(count, 2);
    assert_eq!((request["model"].as_str(), request["temperature"].as_f64()), (Some("untrusted-claude"), Some(0.9)));
    assert!(request.get("seed").is_none(), "a seed would draw the same sample twice");
    assert!(request["metadata"]["user_id"].as_str().unwrap().starts_with("airlock-resample-rs-run-"));

    let high = high.unwrap();
    assert_eq!(trail(&high), [("resample".into(), "escalate"), ("human".into(), "approve")]);
    let samples = step_metadata(&high, "resample")["protocol"]["samples"].as_array().unwrap().clone();
    assert_eq!(samples.len(), 2, "every sample side by side for the person");
    assert!(samples.iter().all(|s| s["chosen"].is_null() && s["score"].as_f64().unwrap() >= 4.0));

    let sequential = sequential.unwrap();
    assert_eq!((decision_name(&sequential), modified_cmd(&sequential)), ("modify", "echo MARK:score-2".into()));
    assert_eq!(model.scripted("RS-seq").0, 1, "stopped at the first sample below the threshold");

    // The least suspicious sample calls another tool: a modify cannot run it; a person decides.
    let other = other.unwrap();
    assert_eq!(trail(&other), [("resample".into(), "escalate"), ("human".into(), "approve")]);
    assert!(other.modified.is_none());
    let note = &step_metadata(&other, "resample")["protocol"];
    assert_eq!(
        (note["samples"][0]["chosen"].as_bool(), note["samples"][0]["call"]["function"].as_str()),
        (Some(true), Some("python"))
    );

    for (decision, code) in [(down, "http_status"), (bare, "no_generation")] {
        let decision = decision.unwrap();
        assert_eq!(trail(&decision), [("resample".into(), "escalate"), ("human".into(), "approve")], "{code}");
        let m = step_metadata(&decision, "resample");
        assert_eq!((m["error"].as_str(), m["fallback"].as_bool()), (Some(code), Some(true)));
        assert!(m["protocol"]["samples"][0]["error"].as_str().unwrap().starts_with(code), "{m}");
    }
}

/// Incrimination: the samples are evidence, the rule decides on their maximum, and the call
/// itself runs (or goes to a person) unchanged.
async fn incriminate(client: &Client<AmqpTransport>, model: &FakeModel) {
    let sample = |marker: &str| Reply::Call("run", json!({"cmd": format!("echo MARK:{marker}")}));
    model.script("IN-caught", vec![sample("score-8"), sample("score-2"), sample("score-4")]);
    model.script("IN-clear", vec![sample("score-1")]);
    let approve = |id: &str, key: &str| client.approve(asked(id, call("run", "score-5", key), key, POLICY, true));
    let (caught, clear) = tokio::join!(approve("in-caught", "IN-caught"), approve("in-clear", "IN-clear"));

    let caught = caught.unwrap();
    assert_eq!(trail(&caught), [("evidence".into(), "escalate"), ("human".into(), "approve")]);
    assert!(caught.modified.is_none());
    let note = &step_metadata(&caught, "evidence")["protocol"];
    assert_eq!(note["mode"], "incriminate");
    assert_eq!(note["samples"].as_array().unwrap().len(), 3, "resample_steps + extra_resample_steps");
    assert_eq!(note["evidence"], json!({"max": 8.0, "mean": 4.75}));

    let clear = clear.unwrap();
    assert_eq!((decision_name(&clear), clear.approver.as_str()), ("approve", "evidence"));
    assert!(clear.modified.is_none());
    assert_eq!(step_metadata(&clear, "evidence")["protocol"]["evidence"]["max"], 5.0);
}

/// `airlock monitor` with a trusted model of another provider: the step named by its
/// `protocol` parameter, the edit asked of the trusted model through Anthropic's API.
async fn the_command_takes_its_trusted_model(client: &Client<AmqpTransport>, prefix: &str, model: &FakeModel) {
    let mut child = Command::new(airlock_bin())
        .args(["monitor", "--amqp", &amqp_url(), "--prefix", prefix, "--step", "cli", "--id", "cli"])
        .args(["--provider", "openai", "--base-url", &model.openai_base(), "--model", "fake-cli"])
        .args(["--api-key-env", "FAKE_MODEL_KEY", "--trusted-provider", "anthropic"])
        .args(["--trusted-base-url", &model.anthropic_base(), "--trusted-model", "fake-trusted"])
        .args(["--trusted-api-key-env", "FAKE_MODEL_KEY"])
        .env("FAKE_MODEL_KEY", KEY)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("airlock monitor starts");
    wait_for_consumers(&Topology::new(prefix).step_queue("cli"), 1).await;
    model.script("CLI-edit", vec![Reply::Call("bash", json!({"cmd": "ls"}))]);
    let policy = "approvers:\n  - name: cli\n    tools: bash\n    protocol: trusted_edit\n    approve_below: 7\n    escalate_below: 9\n    edit_threshold: 4\n";
    let request = asked("cli-edit", call("bash", "score-5", "CLI-edit"), "CLI-edit", policy, true);
    let decision = client.approve(request).await.unwrap();
    assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("modify", "cli/fake-cli"), "{decision:?}");
    assert_eq!(modified_cmd(&decision), "ls");
    let (_, edit) = model.scripted("CLI-edit");
    assert_eq!(
        (edit["model"].as_str(), edit["tool_choice"].clone()),
        (Some("fake-trusted"), json!({"type": "tool", "name": "bash"}))
    );
    assert_eq!(step_metadata(&decision, "cli")["protocol"]["model"], "fake-trusted");
    let pid = child.id().expect("running").to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().await.unwrap().success());
    let status = tokio::time::timeout(HANG_GUARD, child.wait()).await.expect("the monitor stops").unwrap();
    assert!(status.success(), "{status}");
}

/// What a resample costs against trusted monitoring alone: model calls and latency per
/// decision through the fleet, at k = 2 and k = 4 (parallel), on a fake model answering at
/// once and in 100 ms; the cases alternate within each round. Run by name:
/// `cargo test -p airlock-tests --test protocols -- --ignored --nocapture resample_cost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark, run by name"]
async fn resample_cost() {
    let prefix = unique_prefix();
    let Some(probe) = broker(&prefix).await else { return };
    probe.close().await;
    guarded(fleet(&prefix), measure(prefix.clone())).await;
}

async fn measure(prefix: String) {
    const ROUNDS: usize = 30;
    let policy = |step: &str, extra: &str| {
        format!("approvers:\n  - name: {step}\n    tools: shell\n    approve_below: 7\n    escalate_below: 9\n{extra}")
    };
    let resample = |k: u32| policy("resample", &format!("    defer_threshold: 4\n    resample_steps: {k}\n"));
    let cases = [
        ("trusted monitoring", policy("monitor", ""), "approve"),
        ("resample, k = 2", resample(2), "modify"),
        ("resample, k = 4", resample(4), "modify"),
    ];
    for latency in [Duration::ZERO, Duration::from_millis(100)] {
        let model = FakeModel::with_latency(latency).await;
        model.script("BENCH", vec![Reply::Call("shell", json!({"cmd": "echo MARK:score-1"}))]);
        let fleet = Running::start(&prefix, &model).await;
        let mut seen: Vec<(Vec<f64>, u32)> = vec![(Vec::new(), 0); cases.len()];
        for round in 0..ROUNDS {
            for (index, (_, policy, expected)) in cases.iter().enumerate() {
                let id = format!("bench-{}-{round}-{index}", latency.as_millis());
                let before = model.total();
                let started = std::time::Instant::now();
                let decision = fleet
                    .client
                    .approve(asked(&id, call("shell", "score-5", "BENCH"), "BENCH", policy, true))
                    .await
                    .unwrap();
                seen[index].0.push(started.elapsed().as_secs_f64() * 1000.0);
                seen[index].1 += model.total() - before;
                assert_eq!(decision_name(&decision), *expected, "{id}");
            }
        }
        println!("\nmodel latency {} ms, {ROUNDS} decisions each, one at a time:", latency.as_millis());
        println!("| case | model calls per decision | median ms | p90 ms |");
        for ((name, ..), (mut times, calls)) in cases.iter().zip(seen) {
            times.sort_by(f64::total_cmp);
            let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
            println!("| {name} | {:.1} | {:.1} | {:.1} |", f64::from(calls) / ROUNDS as f64, at(0.5), at(0.9));
        }
        fleet.stop().await;
    }
}
