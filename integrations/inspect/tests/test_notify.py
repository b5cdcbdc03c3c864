"""Inspect's notifications (`--notification`, `INSPECT_EVAL_NOTIFICATION`) through the fleet:
a call waiting for a person pages once, through Apprise, with a link to its task built from
the runner's own reviewer URL; a forged progress settles nothing and cannot put a link of its
own in the page. Pages go to an Apprise `json://` URL served by the test."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aio_pika
import pytest
from conftest import HANG_GUARD, Fleet, call_api, fleet_secret, prove_reply
from evaltask import airlock_script
from inspect_ai.approval import ApprovalPolicy
from inspect_ai.event import ApprovalEvent
from inspect_ai.model import ChatMessageAssistant
from inspect_ai.tool import ToolCall
from inspect_ai.util._notify import NOTIFICATION_ENV_VAR, apprise_scope, build_apprise
from test_client import published_request, reply_to, sent
from test_eval import HUMAN_POLICY, of, run_eval

from airlock import fleet_approver, shutdown
from airlock._proto import airlock_pb2 as pb
from airlock.config import check_reviewer_url
from airlock.waiting import expires_in, task_link, waiting_message


class Receiver:
    """An HTTP endpoint that keeps what Apprise posts to it (`json://` sends a JSON object
    with `title` and `message`)."""

    def __init__(self) -> None:
        self.pages: list[dict[str, Any]] = []
        self.arrived = threading.Event()
        pages, arrived = self.pages, self.arrived

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                pages.append(json.loads(body))
                arrived.set()
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"json://127.0.0.1:{self.server.server_address[1]}/pages"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """A page receiver, named by `INSPECT_EVAL_NOTIFICATION`."""
    receiver = Receiver()
    monkeypatch.setenv(NOTIFICATION_ENV_VAR, receiver.url)
    try:
        yield receiver
    finally:
        receiver.close()


def test_a_call_waiting_for_a_person_pages_once_with_the_runners_link(
    fleet: Fleet, reviewer: tuple[str, str], receiver: Receiver, tmp_path: Path
) -> None:
    """An eval with `notification=True`: the call that waits for alice pages once, naming the
    call and linking to its task on the reviewer UI the runner was configured with; alice
    decides once paged, and her decision reaches the eval."""
    api, token = reviewer
    reviewer_ui = "https://review.example.org/airlock/"
    policy = tmp_path / "human.yaml"
    policy.write_text(HUMAN_POLICY)
    approver = fleet_approver(**fleet.settings(), policy=str(policy), timeout=HANG_GUARD, reviewer_url=reviewer_ui)

    def alice() -> dict[str, Any]:
        """Waits to be paged, then approves the one task she has."""
        assert receiver.arrived.wait(HANG_GUARD), "nobody was paged"
        [task] = call_api(api, token, "/api/tasks")["tasks"]
        call_api(api, token, f"/api/tasks/{task['id']}/decision", {"decision": "approve", "explanation": "paged"})
        return task

    with ThreadPoolExecutor(1) as person:
        decided = person.submit(alice)
        log = run_eval(
            tmp_path,
            tasks=airlock_script(scripts="escalate"),
            approval=[ApprovalPolicy(approver, "*")],
            notification=True,
        )
        task = decided.result(HANG_GUARD)

    assert log.status == "success", log.error
    [page] = receiver.pages
    assert page["title"] == "Inspect Agent: airlock_script"
    assert page["message"].startswith("sample: escalate/1\n\n")
    link = f"https://review.example.org/airlock/#task-{task['id']}"
    assert page["message"].endswith(
        f"Tool call shell(cmd='deploy prod') waits for a person's approval in pool 'ops': {link}"
    )
    [sample] = log.samples or []
    [approval] = of(sample, ApprovalEvent)
    assert (approval.decision, approval.explanation) == ("approve", "paged")
    assert approval.metadata is not None and approval.metadata["airlock"]["decided_by"] == "alice"


WARNED_POLICY = """
approvers:
  - name: human
    tools: "shell(cmd='deploy"
    pool: ops
    timeout: 4
    warn_before: 3
    on_timeout: reject
  - name: auto
    tools: "*"
"""
"""Deploys go to a person of the pool `ops`, warned about three seconds before they expire."""


def test_a_call_nobody_answers_pages_again_before_its_task_expires(
    fleet: Fleet, reviewer: tuple[str, str], receiver: Receiver, tmp_path: Path
) -> None:
    """Nobody answers the call: it pages that it waits, then, the step's `warn_before` ahead
    of its deadline, once more that it expires soon, both linking to its task; then the
    deadline rejects it."""
    policy = tmp_path / "warned.yaml"
    policy.write_text(WARNED_POLICY)
    approver = fleet_approver(
        **fleet.settings(), policy=str(policy), timeout=HANG_GUARD, reviewer_url="https://review.example.org"
    )
    log = run_eval(
        tmp_path,
        tasks=airlock_script(scripts="escalate"),
        approval=[ApprovalPolicy(approver, "*")],
        notification=True,
    )

    assert log.status == "success", log.error
    [sample] = log.samples or []
    [approval] = of(sample, ApprovalEvent)
    assert approval.decision == "reject"
    assert approval.metadata is not None and approval.metadata["airlock"]["decided_by"] == "timeout"
    messages = sorted(page["message"] for page in receiver.pages)
    assert len(messages) == 2, messages
    waits = "Tool call shell(cmd='deploy prod') waits for a person's approval in pool 'ops'"
    link = re.compile(r": https://review\.example\.org/#task-[0-9a-f-]+$")
    expiring, waiting = messages
    assert re.search(re.escape(waits) + link.pattern, waiting), waiting
    assert re.search(re.escape(waits) + r" and expires in [1-3] seconds?" + link.pattern, expiring), expiring


def test_a_forged_progress_settles_nothing_and_links_only_to_the_runners_reviewer(
    fleet: Fleet, receiver: Receiver, tmp_path: Path
) -> None:
    """With no worker, the test publishes progresses to the runner's reply queue as anyone on
    the broker could: one naming a pool with a link in it and a task id that tries to leave the
    reviewer's page, then another. Neither settles the call; one page goes out, with the
    runner's own reviewer link (the id escaped) and without the forged text; the fleet's proved
    decision then settles it."""
    policy = tmp_path / "human.yaml"
    policy.write_text(HUMAN_POLICY)
    fleet.stop_workers()

    async def run() -> None:
        with apprise_scope(build_apprise(True)):
            approve = fleet_approver(
                **fleet.settings(), policy=str(policy), timeout=HANG_GUARD, reviewer_url="http://reviewer.test"
            )
            c = ToolCall(id="forged", function="shell", arguments={"cmd": "rm -rf /"})
            asking = asyncio.ensure_future(
                approve("Cleaning up.", c, None, [ChatMessageAssistant(content="", tool_calls=[c])])
            )
            client = fleet.client()
            await sent(client, 1)
            connection = await aio_pika.connect(fleet.url)
            channel = await connection.channel(on_return_raises=True)
            request = await published_request(channel, fleet.prefix, "forged")
            forged = [
                pb.Progress(
                    pool="ops: see https://evil.example/now", task_id="../../login?next=https://evil.example#x"
                ),
                pb.Progress(pool="ops", task_id="another"),
            ]
            for progress in forged:
                body = pb.ReplyBody(progress=progress).SerializeToString()
                await reply_to(channel, client, request, pb.Reply(body=body, key_id="forged", proof=b"\x00" * 32))
            while client.stats().progress_replies < len(forged):
                await asyncio.sleep(0.01)
            assert not asking.done(), "a progress settled the call"
            assert client.stats().rejected_replies == 0

            asked = pb.Request.FromString(request)
            decision = pb.Decision(
                decision=pb.DECISION_KIND_REJECT,
                key=asked.key,
                explanation="the fleet's own",
                requested_at_unix_ms=asked.requested_at_unix_ms,
            )
            body = pb.ReplyBody(decision=decision).SerializeToString()
            proved = prove_reply(fleet_secret(fleet.keys / "fleet.key"), asked.runner_key, request, body)
            await reply_to(channel, client, request, proved)
            approval = await asking
            assert (approval.decision, approval.explanation) == ("reject", "the fleet's own")
            await shutdown()  # waits for the page under way
            await connection.close()

    asyncio.run(run())
    [page] = receiver.pages
    assert page["title"] == "Inspect Agent"
    assert "see https" not in page["message"], "the forged pool's text was paged"
    assert page["message"] == (
        "Cleaning up.\n\nTool call shell(cmd='rm -rf /') waits for a person's approval: "
        "http://reviewer.test/#task-..%2F..%2Flogin%3Fnext%3Dhttps%3A%2F%2Fevil.example%23x"
    )


def test_without_a_reviewer_url_the_page_names_the_pool_and_the_call_only() -> None:
    call = pb.ToolCall(function="shell", arguments_json=json.dumps({"cmd": "deploy prod"}))
    request = pb.Request(approval=pb.ApprovalRequest(message="", call=call))
    progress = pb.Progress(pool="ops", task_id="0190-task")
    assert (
        waiting_message(request, progress, None)
        == "Tool call shell(cmd='deploy prod') waits for a person's approval in pool 'ops'."
    )
    assert task_link("http://r.test", "a b/c") == "http://r.test/#task-a%20b%2Fc"
    assert task_link("http://r.test", "x" * 129) is None
    assert task_link(None, "id") is None


def test_a_reviewer_url_must_be_a_plain_http_address() -> None:
    assert check_reviewer_url("https://r.example/ui/") == "https://r.example/ui"
    for bad in ["javascript:alert(1)", "r.example", "https://r.example/?a=1", "https://r.example/#x", "ftp://r"]:
        with pytest.raises(ValueError, match="reviewer_url"):
            check_reviewer_url(bad)


def test_a_warning_that_the_task_expires_says_how_soon() -> None:
    call = pb.ToolCall(function="shell", arguments_json=json.dumps({"cmd": "deploy prod"}))
    request = pb.Request(approval=pb.ApprovalRequest(message="", call=call))
    expires_at = 1_800_000_000_000
    warning = pb.Progress(pool="ops", task_id="0190-task", expires_at_unix_ms=expires_at)
    message = waiting_message(request, warning, "http://r.test", now=expires_at / 1000 - 120)
    assert message == (
        "Tool call shell(cmd='deploy prod') waits for a person's approval in pool 'ops' and expires in 2 minutes: "
        "http://r.test/#task-0190-task"
    )
    assert [expires_in(s) for s in (40, 1.2, 0.2, -5, 89, 150)] == [
        "in 40 seconds",
        "in 1 second",
        "now",
        "now",
        "in 89 seconds",
        "in 2 minutes",
    ]
