"""The MCP proxy example against a real fleet (`policies/mcp.yaml`): the official MCP SDK's
client calls the example server through `airlock mcp`, on stdio (the client starts the
proxy, which starts the server) and over streamable HTTP (the proxy listens, and starts a
server for each session). A tool the server declares read-only runs; a delete is refused
with the policy's words and never reaches the server; a result holding a private key ends
the session before the client sees it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from client import call
from conftest import Fleet

HERE = Path(__file__).resolve().parent
SERVER = [sys.executable, str(HERE / "server.py")]
CALL_DEADLINE = 60.0


def proxy(fleet: Fleet, *args: str) -> list[str]:
    """`airlock mcp` on the example's policy, with `args` (the server last)."""
    binary, *runner = fleet.runner_args
    return [binary, "mcp", *runner, "--policy-name", "mcp", *args]


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file the server records its calls in (the proxy and the server inherit it)."""
    path = tmp_path / "calls.jsonl"
    monkeypatch.setenv("MCP_EXAMPLE_CALLS", str(path))
    return path


@pytest.fixture(params=["stdio", "http"])
def target(request: pytest.FixtureRequest, fleet: Fleet, calls: Path) -> Iterator[tuple[str, list[str]]]:
    """How the client reaches the proxy: the command it starts, or the URL it listens on."""
    if request.param == "stdio":
        yield "stdio", proxy(fleet, "--", *SERVER)
        return
    listening = proxy(fleet, "--listen", "127.0.0.1:0", "--", *SERVER)
    process = subprocess.Popen(listening, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield "http", [process.stdout.readline().strip()]
    finally:
        process.terminate()
        process.wait(timeout=20)


def ask(target: tuple[str, list[str]], tool: str, arguments: dict[str, str]) -> object:
    transport, where = target
    return asyncio.run(asyncio.wait_for(call(transport, where, tool, arguments), CALL_DEADLINE))


def ran(calls: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


def test_a_read_only_tool_runs(target: tuple[str, list[str]], calls: Path) -> None:
    result = ask(target, "read_file", {"path": "notes.txt"})
    assert not result.is_error and result.content[0].text == "remember the milk"
    assert ran(calls) == [{"tool": "read_file", "arguments": {"path": "notes.txt"}}]


def test_a_rejected_call_gets_the_policys_words_and_never_runs(target: tuple[str, list[str]], calls: Path) -> None:
    result = ask(target, "delete_file", {"path": "notes.txt"})
    assert result.is_error
    assert result.content[0].text == "Deleting files is not allowed in this workspace."
    assert ran(calls) == []


def test_a_result_with_a_private_key_ends_the_session(target: tuple[str, list[str]], calls: Path) -> None:
    error = ask(target, "read_file", {"path": "id_ed25519"})
    assert "The result held a private key." in str(error) and "BEGIN" not in str(error)
    # It ran; its result was kept back.
    assert ran(calls) == [{"tool": "read_file", "arguments": {"path": "id_ed25519"}}]
