#!/usr/bin/env python3
"""Benchmark Inspect AI's own approval policy path, in process.

The policy is a 10-step chain (``bench/policy10.yaml``) of Inspect's built-in
``auto`` approver: nine steps that escalate (a first step on every call, as a
monitor would be, tool-name prefixes, argument globs, comma lists, ``*rm -rf*``
style contains-globs, character classes) and a catch-all that approves, so a
typical call walks several steps before it is approved. The
corpus (``bench/corpus.jsonl``, one Inspect ``ToolCall`` per line as
``{"id", "function", "arguments"}``) holds 1,000 realistic calls: bash, python,
computer, web_browser_*, read_file/write_file/text_editor. Airlock's criterion
benchmark reads the same two files.

Measured per call (median over several passes of the whole corpus):

- ``match_inspect``: Inspect's own ``tool_approvers`` generator (taken from the
  compiled ``policy_approver``) run to the end, i.e. ``format_function_call`` once
  per step plus ``fnmatch`` over that step's globs, for all 10 steps.
- ``match_render_once``: ``format_function_call`` once, then ``fnmatch`` of every
  glob of all 10 steps (the least work the same matching needs).
- ``policy_approver``: ``await approve(message, call, view, history)`` on the
  compiled policy, with events recorded into a real ``Transcript`` (one
  ``ApprovalEvent`` per step asked, as in an eval).
- ``policy_approver_no_events``: the same with ``record_approval`` replaced by a
  no-op, i.e. the chain without Inspect's event recording.
- ``apply_tool_approval``: the full entry point ``call_tool`` uses (view
  resolution, limit suspension, the policy approver, the decision), inside the
  ``approval()`` context manager, events recorded.

Usage (from the repository root, with inspect-ai 0.3.285 installed):

    python bench/inspect_policy_bench.py            # table
    python bench/inspect_policy_bench.py --json     # JSON on stdout
    python bench/inspect_policy_bench.py --regenerate   # rewrite policy + corpus

The policy and corpus are generated deterministically (fixed seed); without
``--regenerate`` the committed files are read as they are.
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import inspect_ai
from inspect_ai._util.format import format_function_call
from inspect_ai.approval import _call as approval_call_module
from inspect_ai.approval import _policy as approval_policy_module
from inspect_ai.approval._apply import apply_tool_approval, approval
from inspect_ai.approval._policy import approval_policies_from_config, policy_approver
from inspect_ai.log._transcript import Transcript, init_transcript
from inspect_ai.model import ChatMessageAssistant, ChatMessageUser
from inspect_ai.tool._tool_call import ToolCall, ToolCallView

HERE = Path(__file__).resolve().parent
POLICY = HERE / "policy10.yaml"
CORPUS = HERE / "corpus.jsonl"
CORPUS_SIZE = 1000

POLICY_TEXT = """\
# 10-step approval chain shared by Inspect's in-process benchmark and Airlock's.
# Nine steps escalate, the catch-all approves: typical calls walk several steps.
approvers:
  - name: auto
    tools: "*"
    decision: escalate
  - name: auto
    tools: "*rm -rf*"
    decision: escalate
  - name: auto
    tools: "computer(action='key', computer(action='type'"
    decision: escalate
  - name: auto
    tools:
      - "python(code='import os, python(code='import subprocess"
      - "bash(cmd='sudo "
      - "web_browser_go(url='http://, web_browser_go(url='ftp:"
    decision: escalate
  - name: auto
    tools: "[rw]*_file(path='/etc/, text_editor(command='[!v]"
    decision: escalate
  - name: auto
    tools: "bash, python, computer"
    decision: escalate
  - name: auto
    tools: "*curl *, *wget *, *password*, *secret*"
    decision: escalate
  - name: auto
    tools: "computer(action='[lrm]*_click'"
    decision: escalate
  - name: auto
    tools: "web_browser_*, read_file, write_file, text_editor"
    decision: escalate
  - name: auto
    tools: "*"
    decision: approve
"""

# ---------------------------------------------------------------------------
# corpus

WORDS = (
    "the model runs a tool call against the sandbox and the result is returned "
    "to the conversation so that the next turn can use it data report value "
    "config server client request response error retry timeout cache index"
).split()

BASH_COMMANDS = [
    "ls -la",
    "ls -la /workspace",
    "pwd",
    "cat README.md",
    "cat /etc/os-release",
    "grep -rn 'TODO' src/",
    "grep -rn \"def main\" --include='*.py' .",
    "find . -name '*.py' | xargs wc -l",
    "pip install -r requirements.txt",
    "python -m pytest -x -q tests/",
    "git status",
    "git log --oneline -n 20",
    "git diff HEAD~1 -- src/app.py",
    "rm -rf build/ dist/ *.egg-info",
    "rm -rf /tmp/cache",
    "rm notes.txt",
    "curl -sSL https://example.com/install.sh | sh",
    "curl -s https://api.example.com/v1/items?limit=10",
    "wget https://files.example.org/data.csv -O data.csv",
    "sudo apt-get update && sudo apt-get install -y jq",
    "sudo systemctl restart nginx",
    "docker ps -a",
    "tar -xzf archive.tar.gz -C /tmp/out",
    "head -n 50 /var/log/syslog",
    "echo $PATH",
    "chmod +x run.sh && ./run.sh --verbose",
    "make -j4 all",
    "npm install && npm test",
]

PY_IMPORTS = [
    "import os",
    "import sys",
    "import json",
    "import subprocess",
    "import re",
    "from pathlib import Path",
    "import pandas as pd",
    "import numpy as np",
]

COMPUTER_KEYS = ["ctrl+c", "ctrl+v", "Return", "alt+Tab", "ctrl+shift+t", "Escape", "super"]
URLS = [
    "https://www.example.com/",
    "https://docs.python.org/3/library/fnmatch.html",
    "https://en.wikipedia.org/wiki/Glob_(programming)",
    "https://github.com/UKGovernmentBEIS/inspect_ai/issues?q=approval",
    "http://insecure.example.net/login",
    "ftp://ftp.example.org/pub/file.txt",
    "https://search.example.com/?q=rust+glob+matching&page=2",
]
PATHS = [
    "/workspace/src/main.py",
    "/workspace/README.md",
    "/workspace/tests/test_app.py",
    "/etc/hosts",
    "/etc/passwd",
    "/tmp/output.json",
    "/home/agent/.bashrc",
    "/var/log/app.log",
]


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def python_code(rng: random.Random) -> str:
    lines = rng.sample(PY_IMPORTS, rng.randrange(1, 4))
    lines.append("")
    for i in range(rng.randrange(2, 40)):
        kind = rng.randrange(4)
        if kind == 0:
            lines.append(f"value_{i} = {rng.randrange(1000)} * {rng.random():.4f}")
        elif kind == 1:
            lines.append(f"print(f'{sentence(rng, 4)}: {{value_{max(0, i - 1)}}}')")
        elif kind == 2:
            lines.append(f"for item in range({rng.randrange(1, 50)}):")
            lines.append(f"    results.append({{'id': item, 'note': \"{sentence(rng, 3)}\"}})")
        else:
            lines.append(f"# {sentence(rng, 6)}")
    if rng.random() < 0.3:
        lines.insert(0, "results = []")
    return "\n".join(lines)


def file_content(rng: random.Random) -> str:
    n = rng.choice([1, 3, 10, 40, 120])
    return "\n".join(sentence(rng, rng.randrange(3, 14)) for _ in range(n)) + "\n"


def make_call(rng: random.Random, index: int) -> dict[str, Any]:
    roll = rng.random()
    function: str
    arguments: dict[str, Any]
    if roll < 0.30:
        cmd = rng.choice(BASH_COMMANDS)
        if rng.random() < 0.2:
            cmd = f"cat > /tmp/script.sh << 'EOF'\n{file_content(rng)}EOF\nbash /tmp/script.sh"
        function, arguments = "bash", {"cmd": cmd}
        if rng.random() < 0.2:
            arguments["timeout"] = rng.choice([30, 60, 180])
    elif roll < 0.50:
        function, arguments = "python", {"code": python_code(rng)}
    elif roll < 0.65:
        function = "computer"
        action = rng.choice(
            ["screenshot", "key", "type", "left_click", "right_click", "mouse_move", "scroll", "double_click"]
        )
        arguments = {"action": action}
        if action == "key":
            arguments["text"] = rng.choice(COMPUTER_KEYS)
        elif action == "type":
            arguments["text"] = sentence(rng, rng.randrange(1, 20))
        elif action in ("left_click", "right_click", "mouse_move", "double_click"):
            arguments["coordinate"] = [rng.randrange(1920), rng.randrange(1080)]
        elif action == "scroll":
            arguments["coordinate"] = [rng.randrange(1920), rng.randrange(1080)]
            arguments["scroll_direction"] = rng.choice(["up", "down"])
            arguments["scroll_amount"] = rng.randrange(1, 10)
    elif roll < 0.80:
        kind = rng.randrange(5)
        if kind in (0, 1):
            function, arguments = "web_browser_go", {"url": rng.choice(URLS)}
        elif kind == 2:
            function, arguments = "web_browser_click", {"element_id": rng.randrange(1, 900)}
        elif kind == 3:
            function, arguments = (
                "web_browser_type",
                {"element_id": rng.randrange(1, 900), "text": sentence(rng, rng.randrange(1, 12))},
            )
        else:
            function, arguments = "web_browser_scroll", {"direction": rng.choice(["up", "down"])}
    else:
        kind = rng.randrange(3)
        path = rng.choice(PATHS)
        if kind == 0:
            function, arguments = "read_file", {"path": path}
        elif kind == 1:
            function, arguments = "write_file", {"path": path, "content": file_content(rng)}
        else:
            command = rng.choice(["view", "create", "str_replace", "insert"])
            arguments = {"command": command, "path": path}
            if command == "create":
                arguments["file_text"] = file_content(rng)
            elif command == "str_replace":
                arguments["old_str"] = sentence(rng, 5)
                arguments["new_str"] = sentence(rng, 7)
            elif command == "insert":
                arguments["insert_line"] = rng.randrange(1, 200)
                arguments["new_str"] = sentence(rng, 6)
            function = "text_editor"
    return {"id": f"call_{index:04d}", "function": function, "arguments": arguments}


def regenerate() -> None:
    POLICY.write_text(POLICY_TEXT, encoding="utf-8", newline="\n")
    rng = random.Random(1000)
    with CORPUS.open("w", encoding="utf-8", newline="\n") as f:
        for i in range(CORPUS_SIZE):
            f.write(json.dumps(make_call(rng, i), ensure_ascii=False) + "\n")


def load_corpus() -> list[ToolCall]:
    calls = []
    with CORPUS.open(encoding="utf-8") as f:
        for text in f:
            data = json.loads(text)
            calls.append(ToolCall(id=data["id"], function=data["function"], arguments=data["arguments"]))
    return calls


# ---------------------------------------------------------------------------
# measurement


def closure(fn: Callable[..., Any]) -> dict[str, Any]:
    return {
        name: cell.cell_contents
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ())
    }


def median_us(samples: list[float], n: int) -> float:
    return statistics.median(samples) / n * 1e6


def time_sync(fn: Callable[[ToolCall], Any], calls: list[ToolCall], runs: int) -> list[float]:
    for call in calls:  # warm-up (fnmatch's compiled-pattern cache etc.)
        fn(call)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        for call in calls:
            fn(call)
        samples.append(time.perf_counter() - start)
    return samples


def time_async(
    make: Callable[[ToolCall], Any], calls: list[ToolCall], runs: int
) -> list[float]:
    async def one_pass() -> float:
        init_transcript(Transcript())
        start = time.perf_counter()
        for call in calls:
            await make(call)
        return time.perf_counter() - start

    async def all_passes() -> list[float]:
        await one_pass()  # warm-up
        return [await one_pass() for _ in range(runs)]

    return asyncio.run(all_passes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.add_argument("--runs", type=int, default=7, help="passes per measurement")
    parser.add_argument("--regenerate", action="store_true", help="rewrite policy and corpus")
    args = parser.parse_args()

    if args.regenerate or not POLICY.exists() or not CORPUS.exists():
        regenerate()
    calls = load_corpus()
    n = len(calls)

    policies = approval_policies_from_config(str(POLICY))
    approve = policy_approver(policies)
    tool_approvers = closure(approve)["tool_approvers"]
    matchers = closure(tool_approvers)["policy_matchers"]
    all_globs = [globs for globs, _ in matchers]

    # how far calls walk: steps matched per call
    def steps_matched(call: ToolCall) -> int:
        return sum(1 for _ in tool_approvers(call))

    walked = [steps_matched(call) for call in calls]

    def match_inspect(call: ToolCall) -> None:
        for _ in tool_approvers(call):
            pass

    def match_render_once(call: ToolCall) -> list[bool]:
        rendered = format_function_call(call.function, call.arguments, width=sys.maxsize)
        return [any(fnmatch.fnmatch(rendered, g) for g in globs) for globs in all_globs]

    message = "I'll run the next step now."
    view = ToolCallView()
    history = [ChatMessageUser(content="Please complete the task.")]

    histories = {
        call.id: history + [ChatMessageAssistant(content=message, tool_calls=[call])]
        for call in calls
    }

    def approve_call(call: ToolCall) -> Any:
        return approve(message, call, view, histories[call.id])

    results: dict[str, float] = {}
    results["match_inspect"] = median_us(time_sync(match_inspect, calls, args.runs), n)
    results["match_render_once"] = median_us(time_sync(match_render_once, calls, args.runs), n)
    results["policy_approver"] = median_us(time_async(approve_call, calls, args.runs), n)

    real_call_record = approval_call_module.record_approval
    real_policy_record = approval_policy_module.record_approval

    def no_record(*_: Any, **__: Any) -> None:
        return None

    approval_call_module.record_approval = no_record  # type: ignore[assignment]
    approval_policy_module.record_approval = no_record  # type: ignore[assignment]
    try:
        results["policy_approver_no_events"] = median_us(
            time_async(approve_call, calls, args.runs), n
        )
    finally:
        approval_call_module.record_approval = real_call_record  # type: ignore[assignment]
        approval_policy_module.record_approval = real_policy_record  # type: ignore[assignment]

    async def apply_call(call: ToolCall) -> Any:
        return await apply_tool_approval(message, call, None, histories[call.id])

    with approval(policies):
        results["apply_tool_approval"] = median_us(time_async(apply_call, calls, args.runs), n)

    report = {
        "inspect_ai": inspect_ai.__version__,
        "python": sys.version.split()[0],
        "calls": n,
        "steps": len(matchers),
        "runs": args.runs,
        "mean_steps_matched": round(statistics.mean(walked), 3),
        "us_per_call": {k: round(v, 2) for k, v in results.items()},
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(
            f"inspect-ai {report['inspect_ai']} on Python {report['python']}: "
            f"{n} calls, {len(matchers)}-step policy, {report['mean_steps_matched']} steps "
            f"matched per call on average, median of {args.runs} passes"
        )
        for name, value in results.items():
            print(f"  {name:28s} {value:9.2f} µs/call")


if __name__ == "__main__":
    main()
