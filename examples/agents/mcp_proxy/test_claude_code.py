"""A real harness as the MCP client: the Claude Code CLI that the Claude Agent SDK's wheel
bundles, configured with the MCP server `files` that is `airlock mcp -- python server.py`,
against a local stand-in for the Anthropic Messages API that asks for one MCP tool use
(`mcp__files__<tool>`). Claude Code's own rules allow the server's tools; the fleet decides:
an approved read runs, a delete is refused, never runs, and the model reads why."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ClaudeSDKClient, ResultMessage, TextBlock

from conftest import Fleet
from local_http import serve

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "claude_agent_sdk_permissions"))
from fake_anthropic import SEEN, messages, sealed_env  # noqa: E402

TURN_DEADLINE = 90.0


@pytest.fixture
def calls(tmp_path: Path) -> Path:
    return tmp_path / "calls.jsonl"


@pytest.fixture
def options(tmp_path: Path, fleet: Fleet, calls: Path) -> Iterator[ClaudeAgentOptions]:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    binary, *runner = fleet.runner_args
    files = {
        "type": "stdio",
        "command": binary,
        "args": ["mcp", *runner, "--policy-name", "mcp", "--", sys.executable, str(HERE / "server.py")],
        "env": {"MCP_EXAMPLE_CALLS": str(calls)},
    }
    SEEN.clear()
    with serve(messages) as url:
        env = sealed_env(url, home)
        yield ClaudeAgentOptions(
            env=env,
            cwd=str(work),
            model="claude-sonnet-4-5",
            setting_sources=[],
            mcp_servers={"files": files},
            # Claude Code's own rules let the server's tools run: the proxy is the gate.
            allowed_tools=["mcp__files"],
        )


async def turn(prompt: str, options: ClaudeAgentOptions) -> str:
    """One turn; the last text the model wrote."""
    text, result = "", None
    async with ClaudeSDKClient(options) as client:
        await client.query(prompt)
        async for message in client.receive_response():
            if isinstance(message, AssistantMessage):
                text = "".join(block.text for block in message.content if isinstance(block, TextBlock)) or text
            elif isinstance(message, ResultMessage):
                result = message
    assert result is not None and not result.is_error, result
    return text


def ran(calls: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


def test_claude_code_runs_an_approved_mcp_call(options: ClaudeAgentOptions, calls: Path) -> None:
    prompt = "mcp__files__read_file " + json.dumps({"path": "notes.txt"})
    text = asyncio.run(asyncio.wait_for(turn(prompt, options), TURN_DEADLINE))
    assert ran(calls) == [{"tool": "read_file", "arguments": {"path": "notes.txt"}}]
    assert text.startswith("The tool answered:") and "remember the milk" in text


def test_claude_code_does_not_run_a_rejected_mcp_call(options: ClaudeAgentOptions, calls: Path) -> None:
    prompt = "mcp__files__delete_file " + json.dumps({"path": "notes.txt"})
    text = asyncio.run(asyncio.wait_for(turn(prompt, options), TURN_DEADLINE))
    assert ran(calls) == []
    assert text.startswith("The tool answered:") and "Deleting files is not allowed in this workspace." in text
