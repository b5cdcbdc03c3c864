"""Unit tests without a broker: the wire mapping, decisions, configuration, registration, and
the check that the committed protobuf code is current."""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from inspect_ai._util.content import ContentImage, ContentText
from inspect_ai._util.registry import registry_info, registry_lookup
from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, ChatMessageUser
from inspect_ai.tool import ToolCall, ToolCallContent, ToolCallView

from airlock import INSECURE, FleetClient, FleetError, FleetUnanswered, _native, fleet_approver, fleet_reviewer
from airlock._proto import airlock_pb2 as pb
from airlock.client import _Pending
from airlock.config import FleetSettings, load_policy
from airlock.decisions import approval_from_decision, fallback, review_from_decision
from airlock.errors import FleetRefused
from airlock.nodes import Nodes, redact
from airlock.wire import call_to_wire, correlation_id, history_to_wire, message_to_wire, output_text, view_to_wire

HERE = Path(__file__).resolve().parent


def test_the_committed_protobuf_code_is_current(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("generate_proto", HERE.parent / "scripts" / "generate_proto.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    generator.generate(tmp_path)
    for name in generator.GENERATED:
        fresh = (tmp_path / name).read_text()
        committed = (generator.PACKAGE_PROTO / name).read_text()
        assert fresh == committed, f"{name} is stale: run integrations/inspect/scripts/generate_proto.py"


def test_both_are_registered_as_airlock_fleet() -> None:
    approver = registry_lookup("approver", "airlock/fleet")
    reviewer = registry_lookup("reviewer", "airlock/fleet")
    assert approver is not None and registry_info(approver).name == "airlock/fleet"
    assert reviewer is not None and registry_info(reviewer).name == "airlock/fleet"


def test_correlation_ids_are_the_rust_clients() -> None:
    key = pb.CallKey(run_id="run/1", sample_id="50%", epoch=2, tool_call_id="call/x")
    assert correlation_id(pb.KIND_APPROVAL, key) == "approval/run%2F1/50%25/2/call%2Fx"
    assert correlation_id(pb.KIND_REVIEW, key) == "review/run%2F1/50%25/2/call%2Fx"
    key.tenant = "al/ice"
    assert correlation_id(pb.KIND_APPROVAL, key) == "approval/run%2F1/50%25/2/call%2Fx/al%2Fice"


def test_calls_keep_their_argument_order_both_ways() -> None:
    call = ToolCall(id="c1", function="computer", arguments={"text": "x", "action": "key", "n": 1.0})
    wire = call_to_wire(call)
    assert wire.arguments_json == '{"text": "x", "action": "key", "n": 1.0}'
    decision = pb.Decision(decision=pb.DECISION_KIND_MODIFY, explanation="safer")
    decision.modified.CopyFrom(
        pb.ToolCall(id="c1", function="computer", arguments_json='{"z": 1, "a": [1, 2], "m": "é"}')
    )
    approval = approval_from_decision(decision, call)
    assert approval.decision == "modify" and approval.explanation == "safer"
    assert approval.modified is not None and list(approval.modified.arguments) == ["z", "a", "m"]
    assert approval.modified.arguments["m"] == "é" and approval.modified.id == "c1"


def test_decisions_carry_the_fleets_record() -> None:
    decision = pb.Decision(
        decision_id="d-1",
        decision=pb.DECISION_KIND_APPROVE,
        approver="human",
        step=2,
        decided_by="alice",
        policy_digest="abc",
        metadata_json='{"score": 0.2}',
    )
    decision.trail.add(
        step=1, approver="scan", decision=pb.DECISION_KIND_ESCALATE, explanation="unsure", decided_by="scanner"
    )
    decision.trail.add(step=2, approver="human", decision=pb.DECISION_KIND_APPROVE, decided_by="alice")
    approval = approval_from_decision(decision, ToolCall(id="c", function="f", arguments={}))
    assert approval.decision == "approve" and approval.explanation is None
    assert approval.metadata is not None and approval.metadata["score"] == 0.2
    record = approval.metadata["airlock"]
    assert (record["decision_id"], record["approver"], record["step"], record["decided_by"]) == (
        "d-1",
        "human",
        2,
        "alice",
    )
    assert record["policy_digest"] == "abc"
    assert [(t["approver"], t["decision"], t["decided_by"]) for t in record["trail"]] == [
        ("scan", "escalate", "scanner"),
        ("human", "approve", "alice"),
    ]


def test_a_silent_reject_tells_the_model_the_fixed_text_and_the_record_keeps_the_reason() -> None:
    decision = pb.Decision(
        decision=pb.DECISION_KIND_REJECT, explanation="This action was not approved.", approver="monitor", step=1
    )
    decision.trail.add(step=0, approver="auto", decision=pb.DECISION_KIND_ESCALATE, explanation="not mine")
    decision.trail.add(step=1, approver="monitor", decision=pb.DECISION_KIND_REJECT, explanation="Suspicion 9/10")
    approval = approval_from_decision(decision, ToolCall(id="c", function="f", arguments={}))
    assert (approval.decision, approval.explanation) == ("reject", "This action was not approved.")
    assert approval.metadata is not None and "timed_out" not in approval.metadata
    record = approval.metadata["airlock"]
    assert (record["step_explanation"], record["timed_out"]) == ("Suspicion 9/10", False)
    assert record["trail"][1]["explanation"] == "Suspicion 9/10" and "timed_out" not in record["trail"][1]
    # Inspect's own answer (`policy`, no step) is found as the deciding one too.
    review = pb.Decision(decision=pb.DECISION_KIND_CONTINUE, explanation="No reviewer took it", approver="policy")
    review.trail.add(approver="policy", decision=pb.DECISION_KIND_CONTINUE, explanation="No reviewer took it")
    assert review_from_decision(review).metadata["airlock"]["step_explanation"] == "No reviewer took it"


def test_a_decision_from_a_deadline_says_so_in_the_metadata() -> None:
    decision = pb.Decision(decision=pb.DECISION_KIND_TERMINATE, approver="human", step=0, timed_out=True)
    decision.trail.add(
        step=0, approver="human", decision=pb.DECISION_KIND_TERMINATE, decided_by="timeout", timed_out=True
    )
    review = review_from_decision(decision)
    assert review.metadata is not None and review.metadata["timed_out"] is True
    assert review.metadata["airlock"]["timed_out"] is True and review.metadata["airlock"]["trail"][0]["timed_out"]
    # The runner's own deadline, and a refusal, which is no timeout.
    unanswered = fallback(FleetUnanswered(2.0, None), "reject", "reject", "runner-1")
    assert unanswered.decision == "reject" and unanswered.metadata["timed_out"] is True
    assert unanswered.metadata["airlock"]["approver"] == "timeout" and unanswered.metadata["airlock"]["timed_out"]
    refused = fallback(FleetRefused("invalid_policy", "bad"), "reject", "reject", "runner-1")
    assert "timed_out" not in refused.metadata and "timed_out" not in refused.metadata["airlock"]


def test_decisions_of_the_wrong_kind_fail_closed() -> None:
    call = ToolCall(id="c", function="f", arguments={})
    assert approval_from_decision(pb.Decision(decision=pb.DECISION_KIND_CONTINUE), call).decision == "reject"
    assert review_from_decision(pb.Decision(decision=pb.DECISION_KIND_APPROVE)).decision == "terminate"
    review = review_from_decision(pb.Decision(decision=pb.DECISION_KIND_CONTINUE))
    assert (review.decision, review.explanation, review.metadata["airlock"]["approver"]) == ("continue", None, "")


def test_history_keeps_the_latest_messages_within_its_bound() -> None:
    call = ToolCall(id="c9", function="bash", arguments={"cmd": "ls"})
    history = [ChatMessageUser(content=f"message {i} " + "x" * 1000) for i in range(10)]
    history.append(ChatMessageAssistant(content="running ls", tool_calls=[call]))
    kept, omitted = history_to_wire(history, 2500)
    assert omitted == 8 and len(kept) == 3
    assert kept[-1].role == "assistant" and kept[-1].tool_calls[0].id == "c9"
    assert kept[0].text.startswith("message 8")
    kept, omitted = history_to_wire(history, 10)
    assert (len(kept), omitted) == (1, 10), "the message carrying the call is always kept"
    assert history_to_wire(history, 1 << 20)[1] == 0
    kept, omitted = history_to_wire(history, None)
    assert (len(kept), omitted) == (11, 0), "no bound: all of it"


def test_generation_sends_the_whole_history_unless_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    def settings(**kwargs: Any) -> FleetSettings:
        return FleetSettings.resolve("amqp://h", None, "p", None, insecure=True, **kwargs)

    monkeypatch.delenv("AIRLOCK_GENERATION", raising=False)
    assert (settings(history_bytes=None).generation, settings(history_bytes=None).history_bytes) == (False, 256 * 1024)
    assert settings(history_bytes=None, generation=True).history_bytes is None
    assert settings(history_bytes=4096, generation=True).history_bytes == 4096
    monkeypatch.setenv("AIRLOCK_GENERATION", "1")
    assert settings(history_bytes=None).generation is True
    monkeypatch.setenv("AIRLOCK_GENERATION", "yes")
    with pytest.raises(ValueError, match="AIRLOCK_GENERATION must be 0 or 1"):
        settings(history_bytes=None)


def test_messages_carry_what_their_fields_cannot_as_json() -> None:
    image = ChatMessageUser(content=[ContentText(text="look"), ContentImage(image="data:image/png;base64,AAAA")])
    wire = message_to_wire(image)
    assert wire.text == "look" and json.loads(wire.raw_json)["content"][1]["type"] == "image"
    assert message_to_wire(ChatMessageUser(content="plain")).raw_json == ""
    from inspect_ai.tool import ToolCallError

    tool = ChatMessageTool(content="denied", tool_call_id="c1", function="bash", error=ToolCallError("approval", "no"))
    wire = message_to_wire(tool)
    assert (wire.tool_call_id, wire.function, wire.error.type, wire.error.message) == ("c1", "bash", "approval", "no")


def test_views_and_outputs() -> None:
    view = ToolCallView(
        context=ToolCallContent(format="text", content="page"),
        call=ToolCallContent(title="t", format="markdown", content="**x**"),
    )
    wire = view_to_wire(view)
    assert (wire.context.content, wire.call.title, wire.call.format) == ("page", "t", "markdown")
    assert not view_to_wire(None).HasField("call")
    assert output_text("raw") == "raw" and output_text(3) == "3" and output_text(True) == "True"
    assert output_text([ContentText(text="a"), ContentText(text="b")]) == "a\nb"


def test_policies_are_files_sent_inline_or_names(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_bytes(b"approvers:\r\n  - name: auto\r\n    tools: ls\r\n")
    wire = load_policy(str(policy))
    assert wire.inline == "approvers:\r\n  - name: auto\r\n    tools: ls\r\n", "the text is sent byte for byte"
    assert wire.digest == hashlib.sha256(policy.read_bytes()).hexdigest()
    assert load_policy("strict").name == "strict"
    with pytest.raises(FileNotFoundError):
        load_policy(str(tmp_path / "missing.yaml"))


def test_bad_parameters_fail_at_creation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRLOCK_AMQP_URL", raising=False)
    monkeypatch.delenv("AIRLOCK_POLICY", raising=False)
    with pytest.raises(ValueError, match="AIRLOCK_AMQP_URL"):
        fleet_approver(policy="strict")
    with pytest.raises(ValueError, match="AIRLOCK_POLICY"):
        fleet_reviewer(url="amqp://localhost")
    with pytest.raises(ValueError, match="on_timeout"):
        fleet_approver(url="amqp://localhost", policy="strict", on_timeout="continue")
    with pytest.raises(ValueError, match="on_timeout"):
        fleet_reviewer(url="amqp://localhost", policy="strict", on_timeout="approve")
    with pytest.raises(ValueError, match="timeout"):
        fleet_approver(url="amqp://localhost", policy="strict", timeout=0)
    with pytest.raises(ValueError, match="not amqps://"):
        fleet_approver(url="amqp://localhost", policy="strict", ca_file=__file__)
    with pytest.raises(FileNotFoundError, match="CA file /nonexistent/ca.pem"):
        fleet_reviewer(url="amqps://localhost", policy="strict", ca_file="/nonexistent/ca.pem")
    monkeypatch.setenv("AIRLOCK_CA_FILE", "/nonexistent/ca.pem")
    with pytest.raises(FileNotFoundError, match="CA file /nonexistent/ca.pem"):
        fleet_approver(url="amqps://localhost", policy="strict")
    monkeypatch.delenv("AIRLOCK_CA_FILE")
    monkeypatch.setenv("AIRLOCK_AMQP_URL", "amqp://localhost")
    monkeypatch.setenv("AIRLOCK_POLICY", "strict")
    monkeypatch.setenv("AIRLOCK_INSECURE", "1")
    fleet_approver()
    fleet_reviewer()


def test_urls_lose_their_credentials_in_explanations() -> None:
    assert redact("amqp://guest:secret@broker:5672/%2f") == "amqp://broker:5672/%2f"
    nodes = Nodes.parse("amqp://u:secret@h1:5681/%2f, amqps://u:secret@h2/%2f")
    assert str(nodes) == "amqp://h1:5681/%2f,amqps://h2/%2f"
    assert [nodes[0].label, nodes[1].label] == ["h1:5681", "h2:5671"] and "secret" not in repr(nodes)


def test_a_list_of_nodes_must_name_one_user_and_vhost(monkeypatch: pytest.MonkeyPatch) -> None:
    """The nodes of one cluster, reached as one broker user: a list that mixes users or vhosts,
    has an empty entry or one that is not AMQP, is refused when the approver is created, and
    the message never shows a password."""
    monkeypatch.delenv("AIRLOCK_CA_FILE", raising=False)
    for url, message in [
        ("amqp://u:secret@h1/%2f,amqp://v:secret@h2/%2f", "URL 1 names user 'u' and vhost '/', URL 2 user 'v'"),
        ("amqp://h1,amqp://u:secret@h2", "URL 1 names user 'guest' and vhost '/', URL 2 user 'u'"),
        ("amqp://u:secret@h1/%2f,amqp://u:secret@h2/other", "URL 2 user 'u' and vhost 'other'"),
        ("amqp://u:secret@h1/%2f,", "AMQP URL 2 of the list is empty"),
        ("amqp://u:secret@h1/%2f,http://u:secret@h2", "AMQP URL 2 of the list does not start with amqp://"),
        ("amqp://u:secret@h1:port/%2f", "the AMQP URL has an invalid port"),
    ]:
        with pytest.raises(ValueError) as refused:
            fleet_approver(url=url, policy="strict")
        assert message in str(refused.value) and "secret" not in str(refused.value), url
    with pytest.raises(ValueError, match="same user and vhost"):
        FleetClient("amqp://u@h1,amqp://v@h2", "p", verify_key=INSECURE)
    with pytest.raises(ValueError, match="a broker URL is not amqps://"):
        fleet_approver(url="amqps://h1,amqp://h2", policy="strict", ca_file=__file__)
    fleet_approver(url="amqp://u:secret@h1:5672/%2f, amqp://u:secret@h2/%2F", policy="strict", insecure=True)
    assert FleetClient(
        "amqp://run%2Ener:s@h1/%2f,amqp://run%2Ener:s@h2/%2f", "p", verify_key=INSECURE
    ).runner_id.startswith("run.ner.")


def test_runner_ids_start_with_the_broker_user() -> None:
    """A least-privilege broker user `U` may only own reply queues `<p>.reply.U.…`."""
    client = FleetClient("amqp://run%2Ener:secret@broker/%2f", "p", verify_key=INSECURE)
    assert client.runner_id.startswith("run.ner.") and len(client.runner_id) > len("run.ner.")
    assert client.reply_queue == f"p.reply.{client.runner_id}"
    assert client.reply_key == f"reply.{client.runner_id}"
    assert FleetClient("amqp://broker", "p", verify_key=INSECURE).runner_id.startswith("guest.")


def test_one_drain_settles_every_call_it_names_and_skips_the_rest() -> None:
    """The socket's callback takes every completion at once: answers and failures settle their
    calls, a progress pages its call once, and a completion for a ticket that no longer waits
    (its sample was cancelled) or never did is skipped."""

    class Native:
        def __init__(self, completions: list[tuple[int, int, object, object]]) -> None:
            self.completions = completions

        def drain(self) -> list[tuple[int, int, object, object]]:
            completions, self.completions = self.completions, []
            return completions

    async def run() -> None:
        client = FleetClient("amqp://broker", "p", verify_key=INSECURE)
        loop = asyncio.get_running_loop()
        paged: list[str] = []

        async def page(progress: pb.Progress) -> None:
            paged.append(progress.task_id)

        waiting = {}
        for ticket, correlation in enumerate(["approval/r/s/1/a", "approval/r/s/1/b", "approval/r/s/1/c"], 1):
            waiting[ticket] = _Pending(
                future=loop.create_future(),
                correlation=correlation,
                key=pb.CallKey(),
                kind=pb.KIND_APPROVAL,
                timeout=2.0,
                context=contextvars.copy_context(),
                pager=page,
            )
            client._pending[ticket] = waiting[ticket]
            client._by_correlation[correlation] = ticket
        decided = pb.ReplyBody(decision=pb.Decision(approver="auto")).SerializeToString()
        progress = pb.Progress(pool="ops", task_id="t-1").SerializeToString()
        client._native = Native(  # type: ignore[assignment]
            [
                (_native.PROGRESS, 0, "approval/r/s/1/a", progress),
                (_native.PROGRESS, 0, "approval/r/s/1/a", progress),
                (_native.PROGRESS, 0, "approval/r/s/1/gone", progress),
                (_native.ANSWERED, 1, decided, None),
                (_native.UNANSWERED, 2, "the broker at amqp://broker could not be reached: refused", None),
                (_native.FAILED, 3, "the Airlock client was closed", None),
                (_native.ANSWERED, 99, decided, None),
            ]
        )
        client._settle()
        assert waiting[1].future.result().decision.approver == "auto"
        unanswered = waiting[2].future.exception()
        assert isinstance(unanswered, FleetUnanswered) and unanswered.reason is not None
        assert str(unanswered).startswith("the Airlock fleet did not answer within 2.0s (the broker at")
        failed = waiting[3].future.exception()
        assert type(failed) is FleetError and str(failed) == "the Airlock client was closed"
        await asyncio.sleep(0)
        assert paged == ["t-1"], "a call pages once"
        client._native = None

    asyncio.run(run())
