"""The `claude_permissions` step against Claude Code itself.

Every rule set of `corpus.json` is written as Claude Code settings files (user, project,
local) in a scratch HOME and project, and the corpus's tool calls are fed

- to the real Claude Code CLI bundled in the claude-agent-sdk wheel, in one session, by a
  stand-in for the Anthropic Messages API that answers each turn with the next call as a
  `tool_use`. What Claude Code decided is read from what happened: it called `can_use_tool`
  (ask), it answered with a permission denial without calling it (deny), or the tool ran
  (allow). Allowed calls are harmless: scratch directories, a proxy that reaches nothing,
  stand-in MCP tools;
- to the step, through `airlock policy eval` on a policy whose first step is
  `claude_permissions` over the same rules (the settings files themselves, or the rules
  inline) and whose second is `human`: the step's approve, reject or escalation (the chain
  waiting for `human`).

They must agree on every call: deny is reject, ask is escalate, allow is approve, except
where Claude Code allows without a rule by design (read-only commands, reads inside the
project...): there the corpus names the reason (`by_design`) and the step must escalate.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(REPO / "examples/agents"), str(REPO / "examples/agents/claude_agent_sdk_permissions")]

from claude_agent_sdk import (  # noqa: E402
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResultDeny,
    ResultMessage,
    create_sdk_mcp_server,
    tool,
)
from fake_anthropic import _sse  # noqa: E402
from local_http import Request, Response, serve  # noqa: E402

CORPUS = json.loads((HERE / "corpus.json").read_text())
ASKED = "AIRLOCK-DIFFERENTIAL-ASKED"
"""What the permission callback answers, so the call does not run and its result tells."""
SESSION_DEADLINE = 900.0
MCP_SERVERS = {"files": ["list", "read", "delete", "write"], "github": ["create_issue", "list_issues", "delete_repo"]}


def unavailable(reason: str) -> None:
    """Skips the test, or fails it when `CI` is set."""
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and {reason}")
    pytest.skip(reason)


def airlock_bin() -> Path:
    path = Path(os.environ.get("AIRLOCK_BIN") or REPO / "target/debug/airlock")
    if not path.is_file():
        unavailable(f"there is no airlock binary at {path}")
    return path


def fill(value: Any, places: dict[str, str]) -> Any:
    """`value` with `{project}`, `{outside}` and `{home}` replaced."""
    text = json.dumps(value)
    for name, path in places.items():
        text = text.replace("{" + name + "}", path)
    return json.loads(text)


def scratch(root: Path) -> dict[str, str]:
    """The scratch project, outside directory and home, with the files the corpus reads."""
    project, outside, home = root / "project", root / "outside", root / "home"
    files = {
        project: ["src/main.py", "src/lib/util.py", "src/generated/api.py", "docs/readme.md", "docs/guide/intro.md",
                  "README.md", "secrets/key.txt", ".env", "config/app.env", "config/app.yaml", "notes.txt", "data.txt",
                  ".git/config", "src/.env", "tests/test_main.py", "build.log", "list.txt"],
        outside: ["data.txt", "public/index.html", "public/sub/page.html"],
        home: [".ssh/id_rsa", ".ssh/config", "notes.txt", ".bashrc"],
    }
    for base, names in files.items():
        for name in names:
            (base / name).parent.mkdir(parents=True, exist_ok=True)
            (base / name).write_text(f"{name}\nTODO\n")
    for directory in [project / "build", project / "empty-dir", project / "src/sub/dir", project / ".vscode",
                      project / ".claude", home / ".claude"]:
        directory.mkdir(parents=True, exist_ok=True)
    (root / "outside.txt").write_text("beside the project\n")
    return {"project": str(project), "outside": str(outside), "home": str(home)}


def settings_files(ruleset: dict[str, Any], places: dict[str, str]) -> list[Path]:
    """Writes the rule set's settings files where Claude Code reads them."""
    project, home = Path(places["project"]), Path(places["home"])
    where = {
        "user": home / ".claude/settings.json",
        "project": project / ".claude/settings.json",
        "local": project / ".claude/settings.local.json",
    }
    # Claude Code ignores the allow rules of a project nobody trusted; the step is given files
    # its operator trusts.
    (home / ".claude/.claude.json").write_text(
        json.dumps({"projects": {str(project): {"hasTrustDialogAccepted": True}}})
    )
    written = []
    for source, permissions in ruleset["settings"].items():
        where[source].write_text(json.dumps({"permissions": fill(permissions, places)}, indent=1))
        written.append(where[source])
    return written


# === Claude Code ===


class Script:
    """The stand-in model: turn n of the conversation answers with call n."""

    def __init__(self, calls: list[dict[str, Any]]) -> None:
        self.calls = calls
        self.results: dict[str, str] = {}

    def __call__(self, request: Request) -> Response:
        path = request.path.split("?")[0]
        if path == "/v1/messages/count_tokens":
            return Response.json({"input_tokens": 10})
        body = request.json()
        if not body.get("tools"):
            # A side request (a title, a summary): a short answer.
            return self._answer(body, [{"type": "text", "text": "ok"}])
        for message in body["messages"]:
            if message["role"] == "user" and isinstance(message["content"], list):
                for block in message["content"]:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        self.results[block["tool_use_id"]] = _text(block.get("content"))
        turn = sum(1 for message in body["messages"] if message["role"] == "assistant")
        if turn >= len(self.calls):
            return self._answer(body, [{"type": "text", "text": "done"}])
        call = self.calls[turn]
        return self._answer(body, [{"type": "tool_use", "id": f"toolu_{turn:05d}", "name": call["tool"], "input": call["input"]}])

    def _answer(self, body: dict[str, Any], blocks: list[dict[str, Any]]) -> Response:
        if body.get("stream"):
            return Response(200, _sse(blocks, body["model"]), {"content-type": "text/event-stream"})
        stop = "tool_use" if blocks[0]["type"] == "tool_use" else "end_turn"
        return Response.json({"id": "msg_corpus", "type": "message", "role": "assistant", "model": body["model"],
                              "content": blocks, "stop_reason": stop, "stop_sequence": None,
                              "usage": {"input_tokens": 10, "output_tokens": 5}})


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content or [] if isinstance(block, dict))


def mcp_servers() -> dict[str, Any]:
    """Stand-in MCP servers whose tools do nothing."""

    def stand_in(name: str) -> Any:
        @tool(name, f"A stand-in {name}.", {})
        async def run(args: dict[str, Any]) -> dict[str, Any]:
            return {"content": [{"type": "text", "text": f"{name} ran"}]}

        return run

    return {server: create_sdk_mcp_server(server, tools=[stand_in(name) for name in names])
            for server, names in MCP_SERVERS.items()}


async def claude_code(calls: list[dict[str, Any]], places: dict[str, str]) -> list[str]:
    """What Claude Code decides for each call: allow, ask, deny, or `invalid: …` when the tool
    refused the input before any permission check."""
    asked: set[str] = set()

    async def can_use_tool(name: str, tool_input: dict[str, Any], context: Any) -> PermissionResultDeny:
        asked.add(context.tool_use_id)
        return PermissionResultDeny(message=ASKED)

    script = Script(calls)
    home = places["home"]
    with serve(script) as url:
        env = {
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": "not-a-key",
            "HOME": home,
            "CLAUDE_CONFIG_DIR": f"{home}/.claude",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            # Allowed fetches and downloads reach nothing.
            "HTTPS_PROXY": "http://127.0.0.1:9",
            "HTTP_PROXY": "http://127.0.0.1:9",
            "NO_PROXY": "127.0.0.1,localhost",
            "PIP_NO_INDEX": "1",
        }
        options = ClaudeAgentOptions(
            env=env, cwd=places["project"], model="claude-sonnet-4-5", can_use_tool=can_use_tool,
            setting_sources=["user", "project", "local"], mcp_servers=mcp_servers(),
        )
        result = None
        async with ClaudeSDKClient(options) as client:
            await client.query("Run the corpus.")
            async for message in client.receive_response():
                if isinstance(message, ResultMessage):
                    result = message
        assert result is not None, "the session ended without a result"
    verdicts = []
    for turn, call in enumerate(calls):
        key = f"toolu_{turn:05d}"
        text = script.results.get(key)
        if key in asked:
            verdicts.append("ask")
        elif text is None:
            verdicts.append("invalid: no result")
        elif denied(text, call):
            verdicts.append("deny")
        elif "<tool_use_error>" in text:
            verdicts.append(f"invalid: {text[:160]}")
        else:
            verdicts.append("allow")
    return verdicts


def denied(text: str, call: dict[str, Any]) -> bool:
    """Whether a tool result is Claude Code's refusal by a rule. A tool a rule denies outright
    is not offered to the model at all, so calling it finds no such tool."""
    return any(
        sign in text
        for sign in [
            f"Permission to use {call['tool']}",
            "denied by your permission settings",
            "denied access to domain:",
            "covered by a Read deny rule",
            "blocked by a deny rule",
            f"No such tool available: {call['tool']}",
        ]
    )


# === the step ===


def step_verdicts(ruleset: dict[str, Any], calls: list[dict[str, Any]], places: dict[str, str],
                  settings: list[Path], root: Path) -> list[tuple[str, str]]:
    """What the step decides for each call, with its explanation."""
    step: dict[str, Any] = {"name": "claude_permissions", "tools": "*", "project": places["project"],
                            "home": places["home"]}
    if ruleset["name"] == "inline":
        step.update(fill(ruleset["settings"]["project"], places))
    else:
        step["settings"] = [str(path) for path in settings]
    policy = root / "policy.json"
    policy.write_text(json.dumps({"approvers": [step, {"name": "human", "tools": "*"}]}, indent=1))
    lines = root / "calls.jsonl"
    lines.write_text("".join(
        json.dumps({"id": f"toolu_{turn:05d}", "function": call["tool"], "arguments": call["input"]}) + "\n"
        for turn, call in enumerate(calls)
    ))
    out = subprocess.run([str(airlock_bin()), "policy", "eval", "--policy", str(policy), "--kind", "approval",
                          "--calls", str(lines)],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    verdicts = []
    for line in out.stdout.splitlines():
        view = json.loads(line)
        explanation = (view.get("trail") or [{}])[0].get("explanation") or ""
        if "pending" in view:
            verdicts.append(("escalate", explanation))
        else:
            verdicts.append((view["decision"], explanation))
    return verdicts


EXPECTED = {"allow": "approve", "ask": "escalate", "deny": "reject"}


@pytest.mark.parametrize("ruleset", CORPUS["rulesets"], ids=[r["name"] for r in CORPUS["rulesets"]])
def test_the_step_decides_every_call_as_claude_code_does(ruleset: dict[str, Any], tmp_path: Path) -> None:
    binary = airlock_bin()
    assert binary
    places = scratch(tmp_path)
    settings = settings_files(ruleset, places)
    calls = [fill({"tool": c["tool"], "input": c["input"]}, places) for c in CORPUS["calls"]]
    cli = asyncio.run(asyncio.wait_for(claude_code(calls, places), SESSION_DEADLINE))
    step = step_verdicts(ruleset, calls, places, settings, tmp_path)
    assert len(step) == len(cli) == len(calls)
    agreed, by_design, disagreements = 0, 0, []
    for entry, call, said, (decided, why) in zip(CORPUS["calls"], calls, cli, step):
        design = (entry.get("by_design") or {}).get(ruleset["name"])
        assert design is None or design in CORPUS["categories"], design
        if design is not None:
            ok = said == "allow" and decided == "escalate"
            by_design += ok
        else:
            ok = EXPECTED.get(said) == decided
            agreed += ok
        if not ok:
            disagreements.append(f"{call['tool']} {json.dumps(call['input'])[:140]}: Claude Code {said}, step {decided}"
                                 f"{' (by design: ' + design + ')' if design else ''}: {why}")
    counts = Counter(cli)
    print(f"\n{ruleset['name']}: {len(calls)} calls; Claude Code {dict(counts)}; "
          f"{agreed} agree, {by_design} by design (Claude Code allows, the step escalates), "
          f"{len(disagreements)} disagree")
    assert not disagreements, "\n".join(disagreements)
