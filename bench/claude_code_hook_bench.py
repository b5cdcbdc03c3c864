"""What Claude Code's hooks cost a tool call: the same `Bash` call asked of one gateway as a
plain approval (`POST /v1/approvals`), as an HTTP hook (`POST /v1/hooks/claude-code`) and
through `airlock hook` (a process per call, as Claude Code runs a command hook), alternating
one of each, in one run. Every call is approved by the `claude_code` policy's `auto` step.

    python bench/claude_code_hook_bench.py AIRLOCK_BIN GATEWAY_URL TOKEN [CALLS]

needs a gateway at GATEWAY_URL whose TOKEN may use the policy `claude_code` (started with
`--rate 1000 --burst 1000`: the run asks faster than the default 50 a second), and a worker of
its prefix holding examples/agents/policies (`--policy-dir`).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable

import httpx

COMMAND = {"command": "ls -la", "description": "List files"}


def hook_input(session: str, call: str) -> dict[str, object]:
    """A `PreToolUse` hook's input as Claude Code sends it."""
    return {
        "session_id": session,
        "transcript_path": "/tmp/transcript.jsonl",
        "cwd": "/tmp",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": COMMAND,
        "tool_use_id": call,
    }


def main(binary: str, gateway: str, token: str, calls: int) -> None:
    run = f"hook-bench-{uuid.uuid4().hex[:8]}"
    headers = {"Authorization": f"Bearer {token}"}
    http = httpx.Client(base_url=gateway, headers=headers, timeout=30)

    def approval(call: str) -> None:
        body = {
            "call": {"id": call, "function": "Bash", "arguments": COMMAND},
            "policy": {"name": "claude_code"},
            "origin": {"run": run, "sample": "main", "epoch": 1},
        }
        answer = http.post("/v1/approvals", json=body, headers={"Prefer": "wait=10"})
        assert answer.json().get("decision") == "approve", answer.text

    def http_hook(call: str) -> None:
        answer = http.post("/v1/hooks/claude-code", params={"policy": "claude_code"}, json=hook_input(run, call))
        assert '"permissionDecision":"allow"' in answer.text, answer.text

    def command_hook(call: str) -> None:
        command = [binary, "hook", "--gateway", gateway, "--policy", "claude_code"]
        done = subprocess.run(
            command,
            input=json.dumps(hook_input(run, call)),
            capture_output=True,
            text=True,
            env={"AIRLOCK_GATEWAY_TOKEN": token},
        )
        assert done.returncode == 0, done.stderr
        assert '"permissionDecision":"allow"' in done.stdout, done.stdout

    ways: dict[str, Callable[[str], None]] = {
        "POST /v1/approvals": approval,
        "POST /v1/hooks/claude-code": http_hook,
        "airlock hook": command_hook,
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    for round in range(calls + 20):  # the first 20 warm up
        for number, (name, way) in enumerate(ways.items()):
            start = time.perf_counter()
            way(f"call-{round}-{number}")
            if round >= 20:
                times[name].append((time.perf_counter() - start) * 1000)
    print(f"{calls} calls each, alternating")
    for name, values in times.items():
        ordered = sorted(values)
        p90 = ordered[int(0.9 * len(ordered))]
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        print(f"{name:28} median {statistics.median(values):6.2f} ms  p90 {p90:6.2f} ms  p99 {p99:6.2f} ms")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].rstrip("/"), sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 300)
