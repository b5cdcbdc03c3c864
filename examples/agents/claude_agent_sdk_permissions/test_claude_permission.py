"""The Claude Agent SDK example against a real fleet: the callback itself with the SDK's
types, then the SDK end to end, running the Claude Code CLI its wheel bundles against a local
stand-in for the Anthropic Messages API (`ANTHROPIC_BASE_URL`), nothing leaving the machine.
An approved `ls` (writing its listing to a file, so Claude Code asks first) runs; an `rm` is
denied and the file it would remove stays."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from claude_agent_sdk import ClaudeAgentOptions, PermissionResultAllow, PermissionResultDeny, ToolPermissionContext

from claude_permission import airlock_permissions, run
from conftest import Fleet
from fake_anthropic import SEEN, messages, sealed_env
from local_http import serve

TURN_DEADLINE = 60.0


def test_the_callback_allows_what_the_fleet_approves_and_denies_the_rest(fleet: Fleet) -> None:
    can_use_tool = airlock_permissions(fleet.gateway(), conversation="direct")

    async def ask(command: str) -> object:
        context = ToolPermissionContext(tool_use_id=f"toolu_{uuid.uuid4().hex[:12]}")
        return await can_use_tool("Bash", {"command": command, "description": "test"}, context)

    assert isinstance(asyncio.run(ask("ls -la")), PermissionResultAllow)
    denied = asyncio.run(ask("rm -rf /"))
    assert isinstance(denied, PermissionResultDeny)
    assert denied.message == "Airlock refused this call (reject): Automatic decision."


@pytest.fixture
def options(tmp_path: Path) -> Iterator[ClaudeAgentOptions]:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (work / "notes.txt").write_text("keep me\n")
    SEEN.clear()
    with serve(messages) as url:
        env = sealed_env(url, home)
        yield ClaudeAgentOptions(env=env, cwd=str(work), model="claude-sonnet-4-5", setting_sources=[])


def turn(prompt: str, fleet: Fleet, options: ClaudeAgentOptions) -> str:
    text, result = asyncio.run(asyncio.wait_for(run(prompt, fleet.gateway(), options), TURN_DEADLINE))
    assert result is not None and not result.is_error, result
    assert {path.split("?")[0] for _, path in SEEN} == {"/v1/messages"}, SEEN
    return text


def test_claude_code_runs_an_approved_call(fleet: Fleet, options: ClaudeAgentOptions) -> None:
    text = turn("ls -la > listing.txt", fleet, options)
    listing = Path(str(options.cwd)) / "listing.txt"
    assert "notes.txt" in listing.read_text()
    assert text.startswith("The tool answered:")


def test_claude_code_does_not_run_a_denied_call(fleet: Fleet, options: ClaudeAgentOptions) -> None:
    text = turn("rm -f notes.txt", fleet, options)
    assert (Path(str(options.cwd)) / "notes.txt").read_text() == "keep me\n"
    assert text.startswith("The tool answered: Airlock refused this call (reject): Automatic decision.")
