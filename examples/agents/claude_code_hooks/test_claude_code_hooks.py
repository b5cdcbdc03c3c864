"""Claude Code, the CLI the `claude-agent-sdk` wheel bundles, gated by Airlock through its
hooks against a real fleet, with each of this folder's settings snippets: HTTP hooks posting
to the gateway's `/v1/hooks/claude-code`, and command hooks running `airlock hook`. The model
is a local stand-in for the Anthropic Messages API that turns the prompt into one `Bash`
call; a person is a reviewer deciding through the reviewer service's HTTP API.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from claude_agent_sdk import ClaudeAgentOptions, PermissionResultAllow, ResultMessage, ToolPermissionContext

from claude_hooks import run, settings
from conftest import URL, Fleet, Role
from local_http import Request, Response, serve

# The Messages API stand-in of the Agent SDK example (each folder's modules are its tests').
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "claude_agent_sdk_permissions"))
from fake_anthropic import SEEN, messages, sealed_env  # noqa: E402

TURN_DEADLINE = 90.0
"""The longest one turn may take (a person's decision included) before the test fails."""
POOL = "claude-code"
"""The reviewer pool `policies/claude_code.yaml` sends `touch` to."""

RECEIVED: list[dict[str, Any]] = []
"""The body of every Messages request: what the model was shown."""


def model(request: Request) -> Response:
    if request.method == "POST" and request.path.split("?")[0] == "/v1/messages":
        RECEIVED.append(request.json())
    return messages(request)


@dataclass(frozen=True)
class Reviewer:
    """A reviewer service serving the pool `claude-code`, and a token of a person in it."""

    url: str
    token: str

    async def decide(self, decision: str, explanation: str) -> dict[str, Any]:
        """Waits for the pool's first pending task, decides it, and returns the task."""
        headers = {"Authorization": f"Bearer {self.token}"}
        async with httpx.AsyncClient(base_url=self.url, headers=headers, timeout=10) as http:
            while True:
                tasks = (await http.get("/api/tasks")).raise_for_status().json()["tasks"]
                if tasks:
                    break
                await asyncio.sleep(0.1)
            task = tasks[0]
            body = {"decision": decision, "explanation": explanation}
            (await http.post(f"/api/tasks/{task['id']}/decision", json=body)).raise_for_status()
            return task


@pytest.fixture(scope="module")
def reviewer(fleet: Fleet) -> Iterator[Reviewer]:
    directory = fleet.directory / f"reviewer-{uuid.uuid4().hex[:8]}"
    directory.mkdir()
    tokens = directory / "reviewers.yaml"
    token = subprocess.run(
        [str(fleet.binary), "reviewer", "add-token", "--tokens", str(tokens), "--name", "alice", "--pools", POOL],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    role = Role(
        "reviewer",
        [
            str(fleet.binary),
            "reviewer",
            "--amqp",
            URL,
            "--prefix",
            fleet.prefix,
            "--tokens",
            str(tokens),
            "--pools",
            POOL,
            "--store",
            f"sqlite:{directory / 'reviewer.db'}",
            "--listen",
            "127.0.0.1:0",
            "--signing-key",
            str(fleet.directory / "keys" / "reviewer.key"),
            "--log-format",
            "json",
        ],
        directory / "reviewer.log",
    )
    try:
        ready = json.loads(role.wait_for("Reviewer service ready."))
        yield Reviewer(url=ready["fields"]["url"], token=token)
    finally:
        role.stop()


def claude_options(work: Path, home: Path, url: str, token: str, hooks: dict[str, Any] | None) -> ClaudeAgentOptions:
    env = {**sealed_env(url, home), "AIRLOCK_GATEWAY_TOKEN": token}
    return ClaudeAgentOptions(
        env=env,
        cwd=str(work),
        model="claude-sonnet-4-5",
        # No settings but the hooks': every call Claude Code makes reaches them.
        setting_sources=[],
        settings=None if hooks is None else json.dumps(hooks),
    )


@dataclass
class Session:
    """Claude Code in a scratch directory, its hooks (of the kind `kind`) on the fleet."""

    kind: str
    fleet: Fleet
    work: Path
    home: Path
    model_url: str

    def options(
        self, token: str | None = None, gateway: str | None = None, escalated: str = "deny"
    ) -> ClaudeAgentOptions:
        hooks = settings(self.kind, gateway or self.fleet.url, str(self.fleet.binary), escalated)
        return claude_options(self.work, self.home, self.model_url, token or self.fleet.token, hooks)

    def file(self, name: str) -> Path:
        return self.work / name


@pytest.fixture(params=["http", "command"])
def session(request: pytest.FixtureRequest, fleet: Fleet, tmp_path: Path) -> Iterator[Session]:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (work / "notes.txt").write_text("keep me\n")
    SEEN.clear()
    RECEIVED.clear()
    with serve(model) as url:
        yield Session(request.param, fleet, work, home, url)
    # Nothing but the model's API was asked.
    assert {path.split("?")[0] for _, path in SEEN} <= {"/v1/messages"}, SEEN


async def turn_async(prompt: str, options: ClaudeAgentOptions) -> tuple[str, ResultMessage]:
    text, result = await asyncio.wait_for(run(prompt, options), TURN_DEADLINE)
    assert result is not None, "the turn ended without a result"
    return text, result


def turn(prompt: str, options: ClaudeAgentOptions) -> tuple[str, ResultMessage]:
    return asyncio.run(turn_async(prompt, options))


def tool_result() -> str:
    """What the model was shown of its last call (the text of the last tool result)."""
    for message in reversed(RECEIVED[-1]["messages"]):
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result":
                content = block["content"]
                return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
    raise AssertionError("the model was shown no tool result")


def test_without_the_hooks_claude_code_does_not_run_the_command(fleet: Fleet, tmp_path: Path) -> None:
    """The control: the approved command of the next test is one Claude Code would not run on
    its own (it writes a file), so there the hook's `allow` is what runs it."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    with serve(model) as url:
        _, result = turn("ls -la > listing.txt", claude_options(work, home, url, fleet.token, None))
    assert not (work / "listing.txt").exists()
    assert [denial["tool_name"] for denial in result.permission_denials or []] == ["Bash"]


def test_a_hook_approved_command_runs(session: Session) -> None:
    _, result = turn("ls -la > listing.txt", session.options())
    assert "notes.txt" in session.file("listing.txt").read_text()
    assert not result.permission_denials


def test_a_denied_command_does_not_run_and_the_model_reads_the_policy_s_reason(session: Session) -> None:
    _, result = turn("rm -f notes.txt", session.options())
    assert session.file("notes.txt").read_text() == "keep me\n"
    assert "Removing files is not allowed in this project." in tool_result()
    assert [denial["tool_name"] for denial in result.permission_denials or []] == ["Bash"]


def test_a_command_no_step_approves_does_not_run(session: Session) -> None:
    turn("cp notes.txt copy.txt", session.options())
    assert not session.file("copy.txt").exists()
    assert "No approvers registered for tool Bash" in tool_result()


def test_a_call_every_step_escalated_is_denied(session: Session) -> None:
    turn("mkdir made-here", session.options())
    assert not session.file("made-here").exists()
    assert "No approval granted for tool Bash" in tool_result()


def test_with_escalated_ask_a_call_every_step_escalated_is_asked_at_claude_code(session: Session) -> None:
    """`ask` hands the call to Claude Code's own permission prompt: in the SDK, its
    `can_use_tool` callback, which here allows it."""
    asked: list[str] = []

    async def can_use_tool(
        tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultAllow:
        asked.append(tool_input["command"])
        return PermissionResultAllow()

    options = session.options(escalated="ask")
    options.can_use_tool = can_use_tool
    turn("mkdir made-here", options)
    assert asked == ["mkdir made-here"]
    assert session.file("made-here").is_dir()


def test_a_hook_the_gateway_refuses_blocks_the_command(session: Session) -> None:
    """A wrong token is refused (401): the hook fails, and fails closed."""
    turn("ls -la > listing.txt", session.options(token="not-a-token"))
    assert not session.file("listing.txt").exists()


def test_a_hook_whose_gateway_is_down_blocks_the_command(session: Session) -> None:
    with serve(lambda _: Response(503)) as down:
        pass  # bound and closed: nothing listens at `down` any more
    turn("ls -la > listing.txt", session.options(gateway=down))
    assert not session.file("listing.txt").exists()


def test_a_person_s_approval_in_the_reviewer_reaches_claude_code(session: Session, reviewer: Reviewer) -> None:
    async def both() -> dict[str, Any]:
        running = asyncio.ensure_future(turn_async("touch approved.txt", session.options()))
        task = await reviewer.decide("approve", "Fine by me.")
        await running
        return task

    task = asyncio.run(both())
    assert session.file("approved.txt").exists()
    assert task["call"]["function"] == "Bash"
    assert task["call"]["arguments"]["command"] == "touch approved.txt"
    assert "cwd: " + str(session.work) in task["shown"]["context"]["text"]


def test_a_person_s_rejection_in_the_reviewer_reaches_claude_code(session: Session, reviewer: Reviewer) -> None:
    async def both() -> None:
        running = asyncio.ensure_future(turn_async("touch rejected.txt", session.options()))
        await reviewer.decide("reject", "Not today.")
        await running

    asyncio.run(both())
    assert not session.file("rejected.txt").exists()


def test_a_review_that_terminates_ends_the_session_before_the_model_reads_the_result(session: Session) -> None:
    """`ls` is approved and runs; its output shows a secret, so the review terminates: the hook
    blocks the result and stops the session, and the model is never asked again."""
    session.file("SECRET=swordfish").write_text("")
    _, result = turn("ls", session.options())
    assert result.terminal_reason == "hook_stopped"
    assert len(RECEIVED) == 1, "the model was asked again after the result"
