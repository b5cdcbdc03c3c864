"""The approver and reviewer against a real broker, outside an eval: fail-closed decisions
when the fleet is down, absent or silent (with the `Cancel` it is sent), a fleet that comes
after the runner or goes and comes back, a request the broker refuses, replies taken only with
the fleet's proof, refusals, named policies, many requests at once on one connection, the
clean shutdown, and the nodes of a cluster (one cut while calls are in flight, all of them
down)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path

import aio_pika
import pytest
from conftest import (
    HANG_GUARD,
    Fleet,
    Node,
    close_connections,
    connections_named,
    dead_url,
    fleet_secret,
    prove_reply,
    rabbitmqctl,
    unique_prefix,
)
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from inspect_ai.model import ChatMessageAssistant, ChatMessageTool
from inspect_ai.tool import ToolCall

from airlock import FleetClient, client_for, fleet_approver, fleet_reviewer, shutdown
from airlock._proto import airlock_pb2 as pb
from airlock.config import load_verify_key
from airlock.wire import correlation_id

POLICY = """
approvers:
  - name: auto
    tools: "ls("
  - name: pattern
    tools: "bash"
    regex: "rm -rf"
  - name: auto
    tools: "bash"
reviewers:
  - name: pattern
    tools: bash
    output: true
    regex: "password="
"""


def call(call_id: str, function: str = "ls", **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, function=function, arguments=dict(arguments))


def history(c: ToolCall) -> list[ChatMessageAssistant]:
    return [ChatMessageAssistant(content="calling", tool_calls=[c])]


@pytest.fixture
def policy(tmp_path: Path) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return str(path)


def test_a_broker_that_is_down_fails_closed_after_the_timeout(policy: str) -> None:
    async def run() -> None:
        down = {"url": "amqp://guest:guest@127.0.0.1:1/%2f", "policy": policy, "timeout": 0.5, "insecure": True}
        approve = fleet_approver(**down, prefix=unique_prefix())
        review = fleet_reviewer(**down, prefix=unique_prefix())
        c = call("c1")
        approval = await approve("m", c, None, history(c))
        assert approval.decision == "reject"
        assert approval.explanation is not None
        assert approval.explanation.startswith(
            "The Airlock fleet did not answer within 0.5s: the broker at amqp://127.0.0.1:1/%2f could not be reached"
        )
        assert "guest" not in approval.explanation
        assert approval.metadata is not None and approval.metadata["airlock"]["approver"] == "timeout"
        result = ChatMessageTool(content="ok", tool_call_id="c1", function="ls")
        reviewed = await review("m", c, result, "ok", None, history(c))
        assert reviewed.decision == "terminate" and "did not answer within 0.5s" in (reviewed.explanation or "")
        await shutdown()

    asyncio.run(run())


def test_an_insecure_runner_warns_at_every_start_and_takes_decisions_unproved(
    fleet: Fleet, policy: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Told `insecure`, the runner asks and takes the fleet's decision without checking its
    proof, and each client it starts (one per eval's event loop) warns that decisions are not
    proved."""

    async def run(call_id: str) -> str:
        approve = fleet_approver(url=fleet.url, prefix=fleet.prefix, policy=policy, timeout=60, insecure=True)
        c = call(call_id)
        approval = await approve("m", c, None, history(c))
        await shutdown()
        return approval.decision

    with caplog.at_level(logging.WARNING, logger="airlock.client"):
        assert asyncio.run(run("first")) == "approve"
        assert asyncio.run(run("second")) == "approve"
    warnings = [r.getMessage() for r in caplog.records if "decisions are not proved" in r.getMessage()]
    assert len(warnings) == 2, warnings
    assert all("runs insecure" in warning and "forged" in warning for warning in warnings)


def test_a_prefix_without_a_fleet_fails_closed_and_says_so(broker: str, policy: str) -> None:
    async def run() -> None:
        prefix = unique_prefix()
        approve = fleet_approver(
            url=broker, prefix=prefix, policy=policy, timeout=0.5, on_timeout="terminate", insecure=True
        )
        c = call("c1")
        approval = await approve("m", c, None, history(c))
        assert approval.decision == "terminate"
        assert f"no exchange {prefix}.route on the broker" in (approval.explanation or "")
        assert f"no Airlock fleet runs on prefix '{prefix}'" in (approval.explanation or "")
        await shutdown()

    asyncio.run(run())


def test_a_fleet_may_come_after_the_runner_and_go_and_come_back(
    broker: str, airlock_bin: Path, keys: Path, tmp_path: Path, policy: str
) -> None:
    """No `<prefix>.route` yet: a request fails closed saying so, and the next one retries
    until a worker declares it, then the runner binds its reply queue and is answered. The
    fleet's topology deleted, a request finds no exchange (the broker closes the publishing
    channel) and fails closed; the fleet back, the same client is answered again."""
    (tmp_path / "policies").mkdir()
    fleet = Fleet(airlock_bin, broker, tmp_path / "policies", keys)

    async def ask(call_id: str, timeout: float) -> tuple[str, str]:
        approve = fleet_approver(**fleet.settings(), policy=policy, timeout=timeout)
        c = call(call_id, "bash", cmd="rm -rf /")
        approval = await approve("m", c, None, history(c))
        return approval.decision, approval.explanation or ""

    async def run() -> None:
        decision, explanation = await ask("none", 1)
        assert decision == "reject" and f"no exchange {fleet.prefix}.route on the broker" in explanation
        asking = asyncio.ensure_future(ask("early", 60))
        client = fleet.client()
        await asyncio.sleep(0.5)
        assert (client.stats().pending, client.stats().unsent) == (1, 1)
        await asyncio.to_thread(fleet.start_worker)
        assert await asyncio.wait_for(asking, 60) == ("reject", "Matched /rm -rf/ in the call.")

        fleet.stop_workers()
        await asyncio.to_thread(fleet.airlock, "topology", "delete")
        decision, explanation = await ask("gone", 1)
        assert decision == "reject" and f"no exchange {fleet.prefix}.route on the broker" in explanation

        await asyncio.to_thread(fleet.start_worker)
        assert await ask("back", 60) == ("reject", "Matched /rm -rf/ in the call.")
        assert fleet.client() is client
        await shutdown()

    try:
        asyncio.run(run())
    finally:
        fleet.close()


def test_a_silent_fleet_fails_closed_and_the_request_is_withdrawn(fleet: Fleet, policy: str) -> None:
    """A fleet whose workers are gone: the request waits in the queue until the deadline,
    then the runner decides (on_timeout) and publishes a Cancel for the call."""
    fleet.stop_workers()

    async def run() -> None:
        connection = await aio_pika.connect(fleet.url)
        channel = await connection.channel(on_return_raises=True)
        cancels = await channel.declare_queue(exclusive=True)
        await cancels.bind(f"{fleet.prefix}.cancels")
        approve = fleet_approver(**fleet.settings(), policy=policy, timeout=0.5, on_timeout="approve")
        c = call("silent-1")
        approval = await approve("m", c, None, history(c))
        assert approval.decision == "approve"
        assert (
            approval.explanation
            == "The Airlock fleet did not answer within 0.5s. It fails closed: 'approve' (on_timeout)."
        )
        message = await anext_message(cancels)
        cancel = pb.Cancel.FromString(message.body)
        assert (cancel.key.tool_call_id, cancel.kind) == ("silent-1", pb.KIND_APPROVAL)
        assert cancel.reason == "the runner stopped waiting: deadline passed"
        assert message.correlation_id is not None and message.correlation_id.endswith("/silent-1")
        assert fleet.client().stats().timed_out == 1

        # A sample that ends while its request waits withdraws it too.
        c = call("silent-2")
        asking = asyncio.ensure_future(
            fleet_approver(**fleet.settings(), policy=policy, timeout=60)("m", c, None, history(c))
        )
        client = fleet.client()
        await sent(client, 1)
        # A decision about an earlier request for the same call is not this one's answer, even
        # with the fleet's proof.
        request = await published_request(channel, fleet.prefix, "silent-2")
        stale = pb.ReplyBody(
            decision=pb.Decision(decision=pb.DECISION_KIND_APPROVE, requested_at_unix_ms=1)
        ).SerializeToString()
        proved = prove_reply(fleet_secret(fleet.keys / "fleet.key"), client_key(request), request, stale)
        await reply_to(channel, client, request, proved)
        while client.stats().ignored_replies == 0:
            await asyncio.sleep(0.01)
        assert not asking.done() and client.stats().rejected_replies == 0
        asking.cancel()
        cancel = pb.Cancel.FromString((await anext_message(cancels)).body)
        assert (cancel.key.tool_call_id, cancel.reason) == ("silent-2", "the sample ended before a decision")
        await shutdown()
        await connection.close()

    asyncio.run(run())


def test_a_request_the_broker_refuses_fails_closed_and_says_so(fleet: Fleet, policy: str) -> None:
    """The requests queue full and refusing what does not fit (a policy on the broker): the
    broker answers the publish with a negative confirm. The request is not taken as sent; it
    is retried until its deadline, then fails closed saying the broker refused it."""
    name = f"{fleet.prefix}-full"
    refusing = '{"max-length": 0, "overflow": "reject-publish"}'
    rabbitmqctl("set_policy", "--apply-to", "queues", name, f"^{fleet.prefix}\\.requests$", refusing)

    fleet.stop_workers()

    async def run() -> None:
        approve = fleet_approver(**fleet.settings(), policy=policy, timeout=1)
        # A quorum queue takes one message past its limit; the next is refused.
        c = call("fills")
        await approve("m", c, None, history(c))
        c = call("refused")
        approval = await approve("m", c, None, history(c))
        assert approval.decision == "reject"
        assert "refused the request (a negative confirm)" in (approval.explanation or ""), approval.explanation
        stats = fleet.client().stats()
        assert (stats.timed_out, stats.resent) == (2, 0)
        await shutdown()

    try:
        asyncio.run(run())
    finally:
        rabbitmqctl("clear_policy", name)


def test_a_reply_counts_only_with_the_fleets_proof_for_this_runner(fleet: Fleet, policy: str) -> None:
    """A runner with the fleet's public key takes the signed worker's decision. A reply forged
    on its queue, unsigned or proved for another runner, is dropped and counted; the request
    waits on and fails closed at its deadline."""

    async def run() -> None:
        approve = fleet_approver(**fleet.settings(), policy=policy, timeout=30)
        c = call("c1", "bash", cmd="rm -rf /")
        approval = await approve("m", c, None, history(c))
        assert (approval.decision, approval.explanation) == ("reject", "Matched /rm -rf/ in the call.")
        assert approval.metadata is not None and approval.metadata["airlock"]["decided_by"] == "py-worker-0"
        client = fleet.client()
        assert (client.stats().rejected_replies, client.stats().ignored_replies) == (0, 0)

        fleet.stop_workers()
        connection = await aio_pika.connect(fleet.url)
        channel = await connection.channel(on_return_raises=True)
        approve = fleet_approver(**fleet.settings(), policy=policy, timeout=3, on_timeout="reject")
        c = call("forged", "ls")
        asking = asyncio.ensure_future(approve("m", c, None, history(c)))
        await sent(client, 1)
        request = await published_request(channel, fleet.prefix, "forged")
        asked = pb.Request.FromString(request)
        assert len(asked.runner_key) == 32
        forged = pb.ReplyBody(
            decision=pb.Decision(
                decision=pb.DECISION_KIND_APPROVE, key=asked.key, requested_at_unix_ms=asked.requested_at_unix_ms
            )
        ).SerializeToString()
        another_runner = X25519PrivateKey.generate().public_key().public_bytes_raw()
        await reply_to(channel, client, request, pb.Reply(body=forged))
        secret = fleet_secret(fleet.keys / "fleet.key")
        await reply_to(channel, client, request, prove_reply(secret, another_runner, request, forged))
        while client.stats().rejected_replies < 2:
            await asyncio.sleep(0.01)
        assert not asking.done()
        approval = await asking
        assert (approval.decision, approval.explanation) == (
            "reject",
            "The Airlock fleet did not answer within 3.0s. It fails closed: 'reject' (on_timeout).",
        )
        stats = client.stats()
        assert (stats.rejected_replies, stats.ignored_replies, stats.timed_out) == (2, 0, 1)
        await shutdown()
        await connection.close()

    asyncio.run(run())


def test_requests_carry_the_runners_trace_context(fleet: Fleet, policy: str) -> None:
    """A request asked under an OpenTelemetry span carries its W3C trace context, so the
    fleet's spans join the runner's trace; one asked outside any span carries none."""
    trace = pytest.importorskip("opentelemetry.trace")
    context = pytest.importorskip("opentelemetry.context")

    async def run() -> None:
        fleet.stop_workers()
        connection = await aio_pika.connect(fleet.url)
        channel = await connection.channel()
        approve = fleet_approver(**fleet.settings(), policy=policy, timeout=3, on_timeout="reject")
        span = trace.NonRecordingSpan(
            trace.SpanContext(
                trace_id=0x0AF7651916CD43DD8448EB211C80319C,
                span_id=0xB7AD6B7169203331,
                is_remote=False,
                trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
            )
        )
        token = context.attach(trace.set_span_in_context(span))
        try:
            traced = call("traced", "ls")
            asking = [asyncio.ensure_future(approve("m", traced, None, history(traced)))]
        finally:
            context.detach(token)
        untraced = call("untraced", "ls")
        asking.append(asyncio.ensure_future(approve("m", untraced, None, history(untraced))))
        queue = await channel.declare_queue(f"{fleet.prefix}.requests", passive=True)
        headers: dict[str, dict[str, object]] = {}
        while len(headers) < 2:
            message = await anext_message(queue)
            headers[pb.Request.FromString(message.body).key.tool_call_id] = dict(message.headers or {})

        def text(value: object) -> object:
            return value.decode() if isinstance(value, bytes) else value

        assert text(headers["traced"].get("traceparent")) == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        assert "traceparent" not in headers["untraced"], headers["untraced"]
        for approval in await asyncio.gather(*asking):
            assert approval.decision == "reject"
        await shutdown()
        await connection.close()

    asyncio.run(run())


async def published_request(channel: aio_pika.abc.AbstractChannel, prefix: str, tool_call_id: str) -> bytes:
    """The request about `tool_call_id` exactly as the runner published it, taken from the
    requests queue (no worker reads it)."""
    queue = await channel.declare_queue(f"{prefix}.requests", passive=True)
    for _ in range(600):
        message = await queue.get(no_ack=True, fail=False)
        if message is None:
            await asyncio.sleep(0.05)
        elif pb.Request.FromString(message.body).key.tool_call_id == tool_call_id:
            return message.body
    raise AssertionError(f"no request about {tool_call_id} on {queue.name}")


def client_key(request: bytes) -> bytes:
    """The runner's public key a request carries."""
    return pb.Request.FromString(request).runner_key


async def reply_to(channel: aio_pika.abc.AbstractChannel, client: FleetClient, request: bytes, reply: pb.Reply) -> None:
    """Publishes `reply` as the reply to `request` the way workers reply: to `<prefix>.route`
    under `reply.<runner id>`, mandatory (on a channel whose returns raise), so it is known to
    reach `client`'s reply queue."""
    asked = pb.Request.FromString(request)
    message = aio_pika.Message(reply.SerializeToString(), correlation_id=correlation_id(pb.KIND_APPROVAL, asked.key))
    route = await channel.get_exchange(f"{client.prefix}.route")
    await route.publish(message, routing_key=client.reply_key, mandatory=True)


async def sent(client: FleetClient, count: int) -> None:
    """Waits until `count` requests wait for their decision, all accepted by the broker."""
    for _ in range(1200):
        stats = client.stats()
        if stats.pending == count and stats.unsent == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{count} requests were never all sent: {client.stats()}")


async def anext_message(queue: aio_pika.abc.AbstractQueue) -> aio_pika.abc.AbstractIncomingMessage:
    for _ in range(600):
        message = await queue.get(no_ack=True, fail=False)
        if message is not None:
            return message
        await asyncio.sleep(0.05)
    raise AssertionError(f"nothing arrived on {queue.name}")


def test_refusals_fail_closed_with_the_fleets_reason(fleet: Fleet, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("approvers:\n  - name: auto\n    tools: x\n    decision: maybe\n")

    async def run() -> None:
        approve = fleet_approver(**fleet.settings(), policy=str(bad), timeout=30)
        c = call("c1", "x")
        approval = await approve("m", c, None, history(c))
        assert approval.decision == "reject"
        assert approval.explanation is not None
        assert approval.explanation.startswith(
            "No decision from the Airlock fleet: the Airlock fleet refused the request (invalid_policy): "
        )
        assert "<inline>:4:15" in approval.explanation and approval.explanation.endswith("It fails closed: 'reject'.")
        assert approval.metadata is not None and approval.metadata["airlock"]["code"] == "invalid_policy"
        review = fleet_reviewer(**fleet.settings(), policy="nowhere", timeout=30)
        reviewed = await review("m", c, ChatMessageTool(content="", tool_call_id="c1"), "", None, history(c))
        assert reviewed.decision == "terminate" and "(unknown_policy): this worker holds no policy named 'nowhere'" in (
            reviewed.explanation or ""
        )
        await shutdown()

    asyncio.run(run())


def test_named_policies_are_the_workers(fleet: Fleet) -> None:
    (fleet.policy_dir / "strict.yaml").write_text(POLICY)

    async def run() -> None:
        approve = fleet_approver(**fleet.settings(), policy="strict", timeout=30)
        c = call("c1", "bash", cmd="rm -rf /")
        approval = await approve("m", c, None, history(c))
        assert (approval.decision, approval.explanation) == ("reject", "Matched /rm -rf/ in the call.")
        assert approval.metadata is not None and approval.metadata["airlock"]["decided_by"] == "py-worker-0"
        await shutdown()

    asyncio.run(run())


def test_thousands_of_concurrent_calls_share_one_connection(fleet: Fleet, policy: str) -> None:
    fleet.start_worker()

    async def run() -> None:
        approve = fleet_approver(**fleet.settings(), policy=policy, timeout=60)
        review = fleet_reviewer(**fleet.settings(), policy=policy, timeout=60)
        calls = [call(f"c{i}", "ls" if i % 2 else "bash", cmd=f"rm -rf /{i}") for i in range(2000)]
        approvals = await asyncio.gather(*(approve("m", c, None, history(c)) for c in calls))
        assert [a.decision for a in approvals] == ["approve" if i % 2 else "reject" for i in range(2000)]
        outputs = [f"password={i}" if i % 3 == 0 else "fine" for i in range(500)]
        results = [ChatMessageTool(content=o, tool_call_id=c.id) for o, c in zip(outputs, calls, strict=False)]
        reviews = await asyncio.gather(
            *(review("m", c, r, o, None, history(c)) for c, r, o in zip(calls, results, outputs, strict=False))
        )
        expected = ["terminate" if i % 3 == 0 and i % 2 == 0 else "continue" for i in range(500)]
        assert [r.decision for r in reviews] == expected
        client = fleet.client()
        assert client.stats().pending == 0
        reply_queue = client.reply_queue
        await shutdown()
        assert client.closed
        connection = await aio_pika.connect(fleet.url)
        channel = await connection.channel()
        with pytest.raises(aio_pika.exceptions.ChannelNotFoundEntity):
            await channel.declare_queue(reply_queue, passive=True)
        await connection.close()

    asyncio.run(run())


def test_requests_survive_a_lost_connection(fleet: Fleet, policy: str) -> None:
    """The connection is cut while requests wait in the queue (no worker): the client
    reconnects, its reply queue is still there, it sends the requests again, and every one
    is decided once (the duplicates' replies are ignored)."""
    fleet.stop_workers()

    async def run() -> None:
        approve = fleet_approver(**fleet.settings(), policy=policy, timeout=60)
        calls = [call(f"c{i}", "ls" if i % 2 else "bash", cmd=f"rm -rf /{i}") for i in range(300)]
        asking = asyncio.gather(*(approve("m", c, None, history(c)) for c in calls))
        client = fleet.client()
        await sent(client, len(calls))
        assert await asyncio.to_thread(close_connections, f"{fleet.prefix} runner (") == 1
        await asyncio.to_thread(fleet.start_worker)
        approvals = await asyncio.wait_for(asking, 60)
        assert [a.decision for a in approvals] == ["approve" if i % 2 else "reject" for i in range(300)]
        assert client.stats().pending == 0
        # One cut, one round: every call was pending when the client came back, and the round
        # is counted once all of it is published, which may be after the first answers.
        await until(lambda: client.stats().resent == len(calls), "every request sent again once")
        await shutdown()

    asyncio.run(run())


# === the nodes of a cluster ===


async def until(condition: Callable[[], bool], what: str) -> None:
    """Waits until `condition()` holds (a hang guard, not a measure)."""
    deadline = asyncio.get_running_loop().time() + HANG_GUARD
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"never: {what}"
        await asyncio.sleep(0.02)


def test_calls_in_flight_move_to_the_next_node_when_theirs_is_cut(fleet: Fleet, policy: str) -> None:
    """Three nodes in front of the broker: the runner connects to one (named as its role and
    host in the broker's view); its node cut while 300 calls wait in the requests queue, it
    moves on to the next node of the list, consumes its replies there and sends the pending
    requests again; cut again, to the one after. Every call is decided once, by the fleet,
    and every duplicate decision is ignored."""
    fleet.stop_workers()

    async def run() -> None:
        nodes = [await Node().start() for _ in range(3)]
        url = ",".join(node.url for node in nodes)
        approve = fleet_approver(url=url, prefix=fleet.prefix, verify_key=fleet.verify_key, policy=policy, timeout=60)
        calls = [call(f"c{i}", "ls" if i % 2 else "bash", cmd=f"rm -rf /{i}") for i in range(300)]
        asking = asyncio.gather(*(approve("m", c, None, history(c)) for c in calls))
        client = client_for(url, fleet.prefix, verify_key=load_verify_key(fleet.verify_key))
        await sent(client, len(calls))
        assert [node.connections for node in nodes].count(1) == 1, "one connection, on one node"
        serving = next(i for i, node in enumerate(nodes) if node.connections == 1)
        name = f"{fleet.prefix} runner ({socket.gethostname()}:{os.getpid()})"
        assert await asyncio.to_thread(connections_named, name) == 1

        for cut in (1, 2):
            await nodes[serving].stop()
            serving = (serving + 1) % 3
            node, resent = nodes[serving], cut * len(calls)
            await until(lambda node=node: node.connections == 1, f"the runner on node {serving}")
            await until(lambda resent=resent: client.stats().resent == resent, f"every request sent again ({cut})")
            assert not asking.done()
            assert [node.connections for node in nodes].count(1) == 1

        await asyncio.to_thread(fleet.start_worker)
        approvals = await asyncio.wait_for(asking, HANG_GUARD)
        assert [a.decision for a in approvals] == ["approve" if i % 2 else "reject" for i in range(300)]
        assert all(a.metadata and a.metadata["airlock"]["decided_by"] == "py-worker-0" for a in approvals)
        # The worker decided each of the 900 requests; 300 decisions were taken, one per call.
        await until(lambda: client.stats().ignored_replies == 2 * len(calls), "every duplicate ignored")
        stats = client.stats()
        assert (stats.pending, stats.timed_out, stats.rejected_replies) == (0, 0, 0)
        await shutdown()

    asyncio.run(run())


def test_with_every_node_down_calls_fail_closed_and_say_so(fleet: Fleet, policy: str) -> None:
    """No node answers: a call fails closed naming each node and its error. Connected
    through two nodes, both cut: a call in flight fails closed at its deadline, saying the
    connection is lost and why the last attempt failed; a node back, the runner finds it
    and the next call is decided."""

    async def run() -> None:
        down = ",".join([await dead_url(), await dead_url()])
        approve = fleet_approver(url=down, prefix=fleet.prefix, verify_key=fleet.verify_key, policy=policy, timeout=1)
        c = call("nowhere")
        approval = await approve("m", c, None, history(c))
        assert approval.decision == "reject"
        explanation = approval.explanation or ""
        assert "could not be reached: none of its 2 nodes answered (127.0.0.1:" in explanation, explanation
        assert explanation.count("127.0.0.1:") == 4 and ":guest@" not in explanation  # two URLs, two errors

        nodes = [await Node().start() for _ in range(2)]
        url = ",".join(node.url for node in nodes)
        settings = {"url": url, "prefix": fleet.prefix, "verify_key": fleet.verify_key, "policy": policy}
        c = call("up", "bash", cmd="rm -rf /")
        approval = await fleet_approver(**settings, timeout=30)("m", c, None, history(c))
        assert (approval.decision, approval.explanation) == ("reject", "Matched /rm -rf/ in the call.")

        for node in nodes:
            await node.stop()
        c = call("cut")
        approval = await fleet_approver(**settings, timeout=1)("m", c, None, history(c))
        assert approval.decision == "reject"
        explanation = approval.explanation or ""
        assert f"the connection to the broker at {url.replace('guest:guest@', '')} was lost; reconnecting" in (
            explanation
        ), explanation

        await nodes[1].start()
        c = call("back", "bash", cmd="rm -rf /")
        approval = await fleet_approver(**settings, timeout=30)("m", c, None, history(c))
        assert (approval.decision, approval.explanation) == ("reject", "Matched /rm -rf/ in the call.")
        assert (nodes[0].connections, nodes[1].connections) == (0, 1)
        await shutdown()

    asyncio.run(run())


def test_a_node_cut_while_the_fleet_decides_loses_no_call(fleet: Fleet, policy: str) -> None:
    """Two nodes; the node in use is cut while the worker is deciding 1,000 calls (requests
    being published and replies on their way are lost with it): the runner moves to the other
    node and every call gets the fleet's decision, none by timeout."""

    async def run() -> None:
        nodes = [await Node().start() for _ in range(2)]
        url = ",".join(node.url for node in nodes)
        approve = fleet_approver(url=url, prefix=fleet.prefix, verify_key=fleet.verify_key, policy=policy, timeout=60)
        calls = [call(f"c{i}", "ls" if i % 2 else "bash", cmd=f"rm -rf /{i}") for i in range(1000)]
        asking = [asyncio.ensure_future(approve("m", c, None, history(c))) for c in calls]
        client = client_for(url, fleet.prefix, verify_key=load_verify_key(fleet.verify_key))
        await until(lambda: any(task.done() for task in asking), "the first decision")
        serving = next(i for i, node in enumerate(nodes) if node.connections == 1)
        await nodes[serving].stop()
        assert not all(task.done() for task in asking)

        approvals = await asyncio.wait_for(asyncio.gather(*asking), HANG_GUARD)
        assert [a.decision for a in approvals] == ["approve" if i % 2 else "reject" for i in range(1000)]
        stats = client.stats()
        assert (stats.pending, stats.timed_out, stats.rejected_replies) == (0, 0, 0)
        assert (nodes[serving].connections, nodes[1 - serving].connections) == (0, 1)
        await shutdown()

    asyncio.run(run())


def test_a_frozen_link_holds_no_call_to_its_deadline(fleet: Fleet, policy: str) -> None:
    """The runner's link goes silent while the worker decides 1,000 calls (no byte moves and
    no socket closes, as after a cable pull): the runner sees it dead by the broker's heartbeat
    within seconds, reconnects through a fresh path and sends again what waits. Every call gets
    the fleet's decision and none waits for its 30 s deadline."""

    async def run() -> None:
        node = await Node().start()
        url = node.url + ("&" if "?" in node.url else "?") + "heartbeat=2"
        approve = fleet_approver(url=url, prefix=fleet.prefix, verify_key=fleet.verify_key, policy=policy, timeout=30)
        calls = [call(f"c{i}", "ls" if i % 2 else "bash", cmd=f"rm -rf /{i}") for i in range(1000)]
        asking = [asyncio.ensure_future(approve("m", c, None, history(c))) for c in calls]
        client = client_for(url, fleet.prefix, verify_key=load_verify_key(fleet.verify_key))
        await until(lambda: sum(task.done() for task in asking) >= 100, "the first decisions")
        node.freeze()
        assert not all(task.done() for task in asking)

        approvals = await asyncio.wait_for(asyncio.gather(*asking), HANG_GUARD)
        assert [a.decision for a in approvals] == ["approve" if i % 2 else "reject" for i in range(1000)]
        stats = client.stats()
        assert (stats.pending, stats.timed_out, stats.rejected_replies) == (0, 0, 0)
        assert stats.resent > 0, "the runner reconnected and sent again what waited"
        await node.stop()
        await shutdown()

    asyncio.run(run())
