"""Real Inspect evals (`inspect_ai.eval()` and the `inspect eval` command) on the scripted
`mockllm/model`, approved and reviewed by `airlock worker` processes over RabbitMQ: approve,
reject, modify, terminate, an escalation a person answers, calls a person decides (or edits)
through the reviewer service's HTTP API, reviews that continue and terminate, a step that fails
the sample, many samples at once, a bridged agent, and a fleet that is down. The `.eval` logs are
read back with `read_eval_log`."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import steps
from conftest import HANG_GUARD, Fleet, call_api, queues_named, unique_prefix
from evaltask import SECRET_OUTPUT, airlock_bridge, airlock_script
from inspect_ai import eval as inspect_eval
from inspect_ai.approval import ApprovalPolicy
from inspect_ai.event import ApprovalEvent, ModelEvent, ReviewEvent, ToolEvent
from inspect_ai.log import EvalLog, EvalSample, read_eval_log
from inspect_ai.model import GenerateConfig
from inspect_ai.review import ReviewPolicy

from airlock import fleet_approver, fleet_reviewer
from airlock._proto import airlock_pb2 as pb

HERE = Path(__file__).resolve().parent

POLICY = """
approvers:
  - name: auto
    tools: "shell(cmd='ls"
  - name: pattern
    tools: shell
    regex: "rm -rf"
    explanation: destructive command
  - name: pattern
    tools: shell
    regex: shutdown
    decision: terminate
    explanation: the agent tried to power off the host
  - name: append_flag
    tools: "shell(cmd='kubectl"
    flag: "--dry-run=server"
  - name: auto
    tools: "shell(cmd='deploy"
    decision: escalate
  - name: human
    tools: "shell(cmd='deploy"
    pool: ops
  - name: auto
    tools: "shell(cmd='env"
  - name: swap_function
    tools: "shell(cmd='mv"
    to: python
reviewers:
  - name: pattern
    tools: shell
    output: true
    regex: "password="
    explanation: secret in output
  - name: auto
    tools: "shell(cmd='ls"
"""


def alice(human: pb.HumanTask) -> pb.StepAnswer:
    """The person in the `ops` pool: approves, with a word."""
    assert list(human.choices) == [pb.DECISION_KIND_APPROVE, pb.DECISION_KIND_REJECT, pb.DECISION_KIND_TERMINATE]
    return pb.StepAnswer(decision=pb.DECISION_KIND_APPROVE, explanation="deploy window is open", decided_by="alice")


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


@pytest.fixture
def served(fleet: Fleet) -> Fleet:
    """The fleet with its external steps and its person."""
    fleet.serve("append_flag", steps.serve_inspect_step)
    fleet.serve("swap_function", steps.serve_inspect_step)
    fleet.serve_human("ops", alice)
    return fleet


def wrapper_policy(tmp_path: Path, fleet: Fleet, policy: Path) -> Path:
    """The Inspect policy file a user writes: `airlock/fleet` for every tool, both ways."""
    path = tmp_path / "airlock.yaml"
    entry = (
        f'    tools: "*"\n    url: "{fleet.url}"\n    prefix: {fleet.prefix}\n    policy: {policy}\n    timeout: 60\n'
        f"    verify_key: {fleet.verify_key}\n"
    )
    path.write_text(f"approvers:\n  - name: airlock/fleet\n{entry}reviewers:\n  - name: airlock/fleet\n{entry}")
    return path


def run_eval(tmp_path: Path, **kwargs: Any) -> EvalLog:
    [log] = inspect_eval(display="none", log_dir=str(tmp_path / "logs"), **kwargs)
    assert log.location
    return read_eval_log(log.location)


def of(sample: EvalSample, kind: type) -> list[Any]:
    return [event for event in sample.events if isinstance(event, kind)]


def test_an_eval_decided_and_reviewed_by_the_fleet(served: Fleet, policy: Path, tmp_path: Path) -> None:
    log = run_eval(
        tmp_path,
        tasks=airlock_script(),
        approval=str(wrapper_policy(tmp_path, served, policy)),
        review=str(wrapper_policy(tmp_path, served, policy)),
    )
    assert log.status == "success", log.error
    samples = {sample.id: sample for sample in log.samples or []}
    digest = hashlib.sha256(policy.read_bytes()).hexdigest()
    for sample in samples.values():
        for event in of(sample, ApprovalEvent) + of(sample, ReviewEvent):
            record = event.metadata["airlock"]
            assert record["policy_digest"] == digest and record["decision_id"]
        assert all(event.approver == "airlock/fleet" for event in of(sample, ApprovalEvent))
        assert all(event.reviewer == "airlock/fleet" for event in of(sample, ReviewEvent))

    # approve, then a review that continues.
    [approval] = of(samples["approve"], ApprovalEvent)
    assert (approval.decision, approval.explanation) == ("approve", "Automatic decision.")
    assert (approval.metadata["airlock"]["approver"], approval.metadata["airlock"]["decided_by"]) == (
        "auto",
        "py-worker-0",
    )
    [tool] = of(samples["approve"], ToolEvent)
    assert tool.result == "ran: ls /" and tool.error is None
    [review] = of(samples["approve"], ReviewEvent)
    assert (review.decision, review.explanation) == ("continue", "Automatic decision.")
    trail = [(t["approver"], t["decision"]) for t in review.metadata["airlock"]["trail"]]
    assert trail == [("pattern", "escalate"), ("auto", "continue")]

    # reject: the model is told why and the sample goes on.
    [approval] = of(samples["reject"], ApprovalEvent)
    assert (approval.decision, approval.explanation) == ("reject", "destructive command")
    [tool] = of(samples["reject"], ToolEvent)
    assert tool.error is not None and (tool.error.type, tool.error.message) == ("approval", "destructive command")
    assert of(samples["reject"], ReviewEvent) == [], "rejected calls are not reviewed"
    assert samples["reject"].output.completion == "done"

    # modify: the tool runs the modified call; the approval keeps the model's proposal.
    [approval] = of(samples["modify"], ApprovalEvent)
    assert approval.decision == "modify" and approval.explanation == "appended --dry-run=server"
    assert approval.call.arguments == {"cmd": "kubectl apply -f x.yaml"}
    assert approval.modified is not None and approval.modified.arguments == {
        "cmd": "kubectl apply -f x.yaml --dry-run=server"
    }
    assert approval.metadata["airlock"]["decided_by"] == "py-step/append_flag"
    [tool] = of(samples["modify"], ToolEvent)
    assert tool.arguments == {"cmd": "kubectl apply -f x.yaml --dry-run=server"}
    assert tool.result == "ran: kubectl apply -f x.yaml --dry-run=server"

    # terminate: the sample ends on the operator's word, its second turn never happens.
    [approval] = of(samples["terminate"], ApprovalEvent)
    assert (approval.decision, approval.explanation) == ("terminate", "the agent tried to power off the host")
    assert samples["terminate"].limit is not None and samples["terminate"].limit.type == "operator"
    assert [event.call.id for event in of(samples["terminate"], ApprovalEvent)] == ["call-off"]

    # escalate: auto escalates, the person in `ops` approves; the trail shows both.
    [approval] = of(samples["escalate"], ApprovalEvent)
    assert (approval.decision, approval.explanation) == ("approve", "deploy window is open")
    record = approval.metadata["airlock"]
    assert (record["approver"], record["step"], record["decided_by"]) == ("human", 5, "alice")
    assert [(t["approver"], t["decision"], t["decided_by"]) for t in record["trail"]] == [
        ("pattern", "escalate", "py-worker-0"),
        ("pattern", "escalate", "py-worker-0"),
        ("auto", "escalate", "py-worker-0"),
        ("human", "approve", "alice"),
    ]
    [tool] = of(samples["escalate"], ToolEvent)
    assert tool.result == "ran: deploy prod"

    # review terminate: the secret reached the tool result, the sample ends before the model sees it.
    [review] = of(samples["review_terminate"], ReviewEvent)
    assert (review.decision, review.explanation) == ("terminate", "secret in output")
    assert samples["review_terminate"].limit is not None and samples["review_terminate"].limit.type == "operator"
    [tool] = of(samples["review_terminate"], ToolEvent)
    assert tool.result == SECRET_OUTPUT

    # review continue, for calls of one turn and of the next.
    reviews = of(samples["review_continue"], ReviewEvent)
    assert [(r.call.id, r.decision) for r in reviews] == [
        ("call-a", "continue"),
        ("call-b", "continue"),
        ("call-c", "continue"),
    ]


def test_an_approval_carries_how_the_model_was_asked(fleet: Fleet, tmp_path: Path) -> None:
    """With `generation`, a step sees the model's name, the generate config the task and the
    eval set, the tools with their JSON Schemas, and the whole history (a bound too small for
    it is not applied); without it, none of that."""
    fleet.serve("capture", lambda task: pb.StepAnswer(decision=pb.DECISION_KIND_APPROVE, explanation="seen"))
    [capture] = fleet.servers
    policy = tmp_path / "capture.yaml"
    policy.write_text('approvers:\n  - name: capture\n    tools: "*"\n')
    task = airlock_script(scripts="approve")
    task.config = GenerateConfig(temperature=0.25, max_tokens=321)
    approver = fleet_approver(**fleet.settings(), policy=str(policy), timeout=60, generation=True)
    log = run_eval(tmp_path, tasks=task, approval=[ApprovalPolicy(approver, "*")], seed=7)
    assert log.status == "success", log.error

    [asked] = [task.request.approval for task in capture.tasks]
    generation = asked.generation
    assert generation.model == "mockllm/model"
    config = json.loads(generation.config_json)
    assert (config["temperature"], config["max_tokens"], config["seed"]) == (0.25, 321, 7)
    [shell] = generation.tools
    assert (shell.name, shell.description) == ("shell", "Run a shell command.")
    parameters = json.loads(shell.parameters_json)
    assert parameters["properties"]["cmd"] == {"type": "string", "description": "The command to run."}
    assert parameters["required"] == ["cmd"]
    assert [m.role for m in asked.history] == ["user", "assistant"] and asked.history_omitted == 0
    assert asked.history[-1].tool_calls[0].id == "call-ls"

    without = fleet_approver(**fleet.settings(), policy=str(policy), timeout=60, history_bytes=1)
    log = run_eval(tmp_path, tasks=airlock_script(scripts="approve"), approval=[ApprovalPolicy(without, "*")])
    assert log.status == "success", log.error
    asked = capture.tasks[-1].request.approval
    assert not asked.HasField("generation")
    assert (len(asked.history), asked.history_omitted) == (1, 1)


NOT_APPROVED = "This action was not approved."
"""What the model is shown of a silent reject."""

SILENT_POLICY = POLICY.replace(
    "    explanation: destructive command\n",
    f"    explanation: destructive command\n    model_explanation: {NOT_APPROVED}\n",
)
"""`POLICY`, its destructive-command step rejecting silently."""


def test_a_silent_reject_shows_the_model_only_the_fixed_text(served: Fleet, tmp_path: Path) -> None:
    """The model's tool message, and every later input of the model, carry the step's
    `model_explanation`; the eval log's approval event keeps the step's reason in its record."""
    policy = tmp_path / "silent.yaml"
    policy.write_text(SILENT_POLICY)
    approver = fleet_approver(**served.settings(), policy=str(policy), timeout=60)
    log = run_eval(tmp_path, tasks=airlock_script(scripts="reject,approve"), approval=[ApprovalPolicy(approver, "*")])
    assert log.status == "success", log.error
    samples = {sample.id: sample for sample in log.samples or []}

    [approval] = of(samples["reject"], ApprovalEvent)
    assert (approval.decision, approval.explanation) == ("reject", NOT_APPROVED)
    record = approval.metadata["airlock"]
    assert (record["approver"], record["step_explanation"], record["timed_out"]) == (
        "pattern",
        "destructive command",
        False,
    )
    assert [(t["approver"], t["decision"], t["explanation"]) for t in record["trail"]] == [
        ("pattern", "reject", "destructive command"),
    ]
    [tool] = of(samples["reject"], ToolEvent)
    assert tool.error is not None and (tool.error.type, tool.error.message) == ("approval", NOT_APPROVED)
    [message] = [m for m in samples["reject"].messages if m.role == "tool"]
    assert message.error is not None and message.error.message == NOT_APPROVED
    # What the model was given after the reject: the fixed text, never the reason.
    *_, last = of(samples["reject"], ModelEvent)
    seen = "".join(m.model_dump_json() for m in last.input)
    assert NOT_APPROVED in seen and "destructive" not in seen
    assert samples["reject"].output.completion == "done"

    # A call the step does not reject is told what it always was.
    [approval] = of(samples["approve"], ApprovalEvent)
    assert (approval.decision, approval.explanation) == ("approve", "Automatic decision.")


TIMEOUT_POLICY = """
approvers:
  - name: human
    tools: "shell(cmd='deploy"
    pool: ops
    timeout: 1
  - name: auto
    tools: "*"
"""
"""Deploys go to a person of the pool `ops`, who has a second to answer."""


def test_a_step_that_times_out_reads_as_a_timeout_in_the_eval_log(
    fleet: Fleet, reviewer: tuple[str, str], tmp_path: Path
) -> None:
    """Nobody in `ops` answers the deploy: the reviewer service's deadline gives the human step's
    `on_timeout` (reject), and the eval log's approval event says it timed out; an approval
    that somebody gave does not."""
    policy = tmp_path / "timeout.yaml"
    policy.write_text(TIMEOUT_POLICY)
    approver = fleet_approver(**fleet.settings(), policy=str(policy), timeout=HANG_GUARD)
    log = run_eval(tmp_path, tasks=airlock_script(scripts="escalate,approve"), approval=[ApprovalPolicy(approver, "*")])
    assert log.status == "success", log.error
    samples = {sample.id: sample for sample in log.samples or []}

    [approval] = of(samples["escalate"], ApprovalEvent)
    assert approval.decision == "reject"
    assert approval.metadata["timed_out"] is True
    record = approval.metadata["airlock"]
    assert (record["approver"], record["decided_by"], record["timed_out"]) == ("human", "timeout", True)
    assert [(t["approver"], t["decision"], t.get("timed_out")) for t in record["trail"]] == [("human", "reject", True)]
    assert approval.explanation is not None and approval.explanation.startswith("No human decision before the deadline")
    [tool] = of(samples["escalate"], ToolEvent)
    assert tool.error is not None and tool.error.type == "approval"

    [approval] = of(samples["approve"], ApprovalEvent)
    assert approval.decision == "approve" and "timed_out" not in approval.metadata
    assert approval.metadata["airlock"]["timed_out"] is False


def test_a_step_that_changes_the_function_fails_the_sample_as_inspect_does(
    served: Fleet, policy: Path, tmp_path: Path
) -> None:
    approver = fleet_approver(**served.settings(), policy=str(policy), timeout=60)
    log = run_eval(tmp_path, tasks=airlock_script(scripts="swap"), approval=[ApprovalPolicy(approver, "*")])
    assert log.status == "error"
    [sample] = log.samples or []
    assert sample.error is not None
    expected = (
        "An approver returned a modified call to 'python' for a call to 'shell'. A 'modify' decision "
        "may change only the arguments of a tool call, not the function called."
    )
    assert expected in sample.error.message
    assert of(sample, ToolEvent) == [], "neither call ran"


def test_many_samples_at_once_share_one_connection(fleet: Fleet, policy: Path, tmp_path: Path) -> None:
    fleet.start_worker()
    settings = dict(**fleet.settings(), policy=str(policy), timeout=60)
    log = run_eval(
        tmp_path,
        tasks=airlock_script(scripts="approve,reject,review_continue", copies=20),
        approval=[ApprovalPolicy(fleet_approver(**settings), "*")],
        review=[ReviewPolicy(fleet_reviewer(**settings), "*")],
        max_samples=60,
    )
    assert log.status == "success", log.error
    assert len(log.samples or []) == 60
    for sample in log.samples or []:
        decisions = [event.decision for event in of(sample, ApprovalEvent)]
        expected = {"approve": ["approve"], "reject": ["reject"], "review_continue": ["approve"] * 3}
        assert decisions == expected[str(sample.id).rsplit("-", 1)[0]], sample.id
    runners = {
        event.metadata["airlock"]["decided_by"] for sample in log.samples or [] for event in of(sample, ApprovalEvent)
    }
    assert runners <= {"py-worker-0", "py-worker-1"}
    assert queues_named(f"{fleet.prefix}.reply.") == [], "the run's end deleted the reply queue"


def test_the_inspect_command_with_the_three_line_setup(served: Fleet, policy: Path, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "AIRLOCK_AMQP_URL": served.url,
        "AIRLOCK_PREFIX": served.prefix,
        "AIRLOCK_POLICY": str(policy),
        "AIRLOCK_VERIFY_KEY": served.verify_key,
        "INSPECT_DISPLAY": "none",
    }
    command = [
        sys.executable,
        "-m",
        "inspect_ai",
        "eval",
        f"{HERE / 'evaltask.py'}@airlock_script",
        "-T",
        "scripts=approve,modify,review_terminate",
        "--model",
        "mockllm/model",
        "--approval",
        "airlock/fleet",
        "--review",
        "airlock/fleet",
        "--log-dir",
        str(tmp_path / "logs"),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    [location] = list((tmp_path / "logs").glob("*.eval"))
    log = read_eval_log(str(location))
    assert log.status == "success", log.error
    assert log.eval.config.approval is not None and log.eval.config.approval.approvers[0].name == "airlock/fleet"
    samples = {sample.id: sample for sample in log.samples or []}
    assert [e.decision for e in of(samples["modify"], ApprovalEvent)] == ["modify"]
    assert of(samples["modify"], ToolEvent)[0].arguments == {"cmd": "kubectl apply -f x.yaml --dry-run=server"}
    assert [e.decision for e in of(samples["review_terminate"], ReviewEvent)] == ["terminate"]


def test_a_fleet_that_is_down_fails_closed_without_failing_the_eval(policy: Path, tmp_path: Path) -> None:
    down = "amqp://guest:guest@127.0.0.1:1/%2f"
    settings = dict(url=down, prefix=unique_prefix(), policy=str(policy), timeout=1, insecure=True)
    log = run_eval(
        tmp_path,
        tasks=airlock_script(scripts="approve,reject"),
        approval=[ApprovalPolicy(fleet_approver(**settings), "*")],
        review=[ReviewPolicy(fleet_reviewer(**settings), "*")],
    )
    assert log.status == "success", log.error
    for sample in log.samples or []:
        [approval] = of(sample, ApprovalEvent)
        assert approval.decision == "reject"
        assert approval.explanation is not None and approval.explanation.startswith(
            "The Airlock fleet did not answer within 1.0s: "
        )
        assert approval.metadata["airlock"]["approver"] == "timeout"
        assert approval.metadata["timed_out"] is True, "the runner's own deadline decided"
        assert sample.output.completion == "done"


def test_a_bridged_agent_is_approved_by_the_fleet(served: Fleet, policy: Path, tmp_path: Path) -> None:
    """Inspect approves a bridged agent's model responses (reviews do not apply to them): a
    rejected response is discarded and generated again, a modified one reaches the agent
    with the fleet's arguments."""
    approver = fleet_approver(**served.settings(), policy=str(policy), timeout=60)
    log = run_eval(tmp_path, tasks=airlock_bridge(), approval=[ApprovalPolicy(approver, "*")])
    assert log.status == "success", log.error
    samples = {sample.id: sample for sample in log.samples or []}
    outcomes = {
        name: (
            [(e.decision, e.explanation) for e in of(sample, ApprovalEvent)],
            [m.text for m in sample.messages if m.role == "tool"],
        )
        for name, sample in samples.items()
    }
    assert outcomes == {
        "approve": ([("approve", "Automatic decision.")], ["ran: ls /"]),
        "reject": ([("reject", "destructive command")], []),
        "modify": ([("modify", "appended --dry-run=server")], ["ran: kubectl apply -f x.yaml --dry-run=server"]),
    }


HUMAN_POLICY = """
approvers:
  - name: human
    tools: "shell(cmd='deploy, shell(cmd='rm"
    pool: ops
  - name: auto
    tools: "*"
"""
"""Deploys and removals go to a person of the pool `ops`; everything else is approved."""


def decide_as_alice(
    api: str, token: str, answers: dict[str, dict[str, Any]], stop: threading.Event
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Alice at work: polls her pending tasks and decides each with the decision body `answers`
    gives for its command, until every command was decided (or `stop`). Returns each task as
    listed and as the decision left it."""
    decided: list[tuple[dict[str, Any], dict[str, Any]]] = []
    deadline = time.monotonic() + HANG_GUARD
    while len(decided) < len(answers) and not stop.is_set():
        assert time.monotonic() < deadline, f"alice saw {len(decided)} of {len(answers)} tasks"
        for task in call_api(api, token, "/api/tasks")["tasks"]:
            body = answers[task["call"]["arguments"]["cmd"]]
            decided.append((task, call_api(api, token, f"/api/tasks/{task['id']}/decision", body)))
        time.sleep(0.05)
    return decided


def test_a_person_decides_through_the_reviewer_api(fleet: Fleet, reviewer: tuple[str, str], tmp_path: Path) -> None:
    """The `human` step's tasks reach a real reviewer service; alice approves one call and
    rejects another over its HTTP API, and the eval log records her decisions as hers."""
    api, token = reviewer
    policy = tmp_path / "human.yaml"
    policy.write_text(HUMAN_POLICY)
    answers = {
        "deploy prod": {"decision": "approve", "explanation": "deploy window is open"},
        "rm -rf /": {"decision": "reject", "explanation": "not on this host"},
    }
    approver = fleet_approver(**fleet.settings(), policy=str(policy), timeout=HANG_GUARD)
    stop = threading.Event()
    with ThreadPoolExecutor(1) as person:
        alice_at_work = person.submit(decide_as_alice, api, token, answers, stop)
        try:
            log = run_eval(
                tmp_path,
                tasks=airlock_script(scripts="approve,escalate,reject"),
                approval=[ApprovalPolicy(approver, "*")],
            )
        finally:
            stop.set()
        decided = alice_at_work.result()

    # What alice saw: each call, as an approval of her pool, from its sample; her answer recorded.
    seen = {task["key"]["sample_id"]: (task, after) for task, after in decided}
    assert sorted(seen) == ["escalate", "reject"]
    for sample_id, call_id, cmd in [("escalate", "call-deploy", "deploy prod"), ("reject", "call-rm", "rm -rf /")]:
        task, after = seen[sample_id]
        assert (task["kind"], task["pool"], task["state"]) == ("approval", "ops", "pending")
        assert task["choices"] == ["approve", "reject", "terminate"]
        assert task["call"] == {"id": call_id, "function": "shell", "arguments": {"cmd": cmd}}
        assert task["key"]["tool_call_id"] == call_id
        assert (after["state"], after["decided_by"]) == ("decided", "alice")
        assert (after["decision"], after["explanation"]) == (answers[cmd]["decision"], answers[cmd]["explanation"])

    assert log.status == "success", log.error
    samples = {sample.id: sample for sample in log.samples or []}

    # Not escalated: the worker approves, the tool runs.
    [approval] = of(samples["approve"], ApprovalEvent)
    assert approval.decision == "approve"
    assert (approval.metadata["airlock"]["approver"], approval.metadata["airlock"]["decided_by"]) == (
        "auto",
        "py-worker-0",
    )
    assert [tool.result for tool in of(samples["approve"], ToolEvent)] == ["ran: ls /"]

    # Approved by alice: her explanation and name in the log, the tool runs.
    [approval] = of(samples["escalate"], ApprovalEvent)
    assert (approval.decision, approval.explanation) == ("approve", "deploy window is open")
    record = approval.metadata["airlock"]
    assert (record["approver"], record["step"], record["decided_by"]) == ("human", 0, "alice")
    assert [(t["approver"], t["decision"], t["decided_by"]) for t in record["trail"]] == [("human", "approve", "alice")]
    [tool] = of(samples["escalate"], ToolEvent)
    assert tool.result == "ran: deploy prod" and tool.error is None

    # Rejected by alice: the model is told why, the tool never runs, the sample goes on.
    [approval] = of(samples["reject"], ApprovalEvent)
    assert (approval.decision, approval.explanation) == ("reject", "not on this host")
    record = approval.metadata["airlock"]
    assert (record["approver"], record["step"], record["decided_by"]) == ("human", 0, "alice")
    [tool] = of(samples["reject"], ToolEvent)
    assert tool.error is not None and (tool.error.type, tool.error.message) == ("approval", "not on this host")
    assert not any("ran:" in message.text for message in samples["reject"].messages if message.role == "tool")
    assert samples["reject"].output.completion == "done"


EDITABLE_POLICY = HUMAN_POLICY.replace("    pool: ops\n", "    pool: ops\n    choices: [approve, reject, modify]\n")
"""As `HUMAN_POLICY`, the person also offered `modify` (an Airlock extension)."""


def test_a_person_modifies_a_call_through_the_reviewer_api(
    fleet: Fleet, reviewer: tuple[str, str], tmp_path: Path
) -> None:
    """A `human` step that offers modify: alice edits the deploy's arguments over the API, and
    Inspect runs the modified call and logs her modify, the approval keeping the proposal."""
    api, token = reviewer
    policy = tmp_path / "editable.yaml"
    policy.write_text(EDITABLE_POLICY)
    edit = {"decision": "modify", "arguments": {"cmd": "deploy staging"}, "explanation": "staging first"}
    approver = fleet_approver(**fleet.settings(), policy=str(policy), timeout=HANG_GUARD)
    stop = threading.Event()
    with ThreadPoolExecutor(1) as person:
        alice_at_work = person.submit(decide_as_alice, api, token, {"deploy prod": edit}, stop)
        try:
            log = run_eval(tmp_path, tasks=airlock_script(scripts="escalate"), approval=[ApprovalPolicy(approver, "*")])
        finally:
            stop.set()
        [(task, after)] = alice_at_work.result()

    assert task["choices"] == ["approve", "reject", "modify"]
    assert (after["state"], after["decision"], after["decided_by"]) == ("decided", "modify", "alice")
    assert log.status == "success", log.error
    [sample] = log.samples or []
    [approval] = of(sample, ApprovalEvent)
    assert (approval.decision, approval.explanation) == ("modify", "staging first")
    assert approval.call.arguments == {"cmd": "deploy prod"}
    assert approval.modified is not None and approval.modified.function == "shell"
    assert approval.modified.arguments == {"cmd": "deploy staging"}
    assert approval.metadata["airlock"]["decided_by"] == "alice"
    [tool] = of(sample, ToolEvent)
    assert tool.arguments == {"cmd": "deploy staging"} and tool.result == "ran: deploy staging"
