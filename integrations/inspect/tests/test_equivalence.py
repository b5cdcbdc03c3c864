"""The same Inspect policy file decided in process (Inspect's own policy approver and
reviewer) and through Airlock (workers, plus external steps that run the very same Inspect
approvers and reviewers), on a corpus of calls: the same decisions, explanations, modified
calls and sample failures."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import steps
from conftest import Fleet
from inspect_ai.approval import ApprovalPolicy, read_approval_policies
from inspect_ai.approval._apply import apply_tool_approval, approval, modified_function_error
from inspect_ai.model import ChatMessageAssistant, ChatMessageTool
from inspect_ai.review import ReviewPolicy, read_review_policies, review
from inspect_ai.review._apply import apply_tool_review
from inspect_ai.tool import ToolCall

from airlock import fleet_approver, fleet_reviewer, shutdown

POLICY = """
approvers:
  - name: auto
    tools: "ls("
  - name: deny_words
    tools: "bash, python"
    words: ["rm -rf", "curl"]
  - name: append_flag
    tools: "bash(cmd='kubectl"
    flag: "--dry-run=server"
  - name: auto
    tools: "bash(cmd='git status"
  - name: auto
    tools: deploy
    decision: escalate
  - name: auto
    tools: "nuke, shutdown"
    decision: terminate
  - name: auto
    tools: weird
    decision: modify
  - name: swap_function
    tools: rename
    to: delete
  - name: auto
    tools: ["f(items=[[]1", "computer(action='key'"]
reviewers:
  - name: output_watch
    tools: bash
    needle: "password="
  - name: output_watch
    tools: "bash, python"
    needle: TOKEN
    on_match: continue
"""

APPROVALS: list[tuple[str, dict[str, Any]]] = [
    ("ls", {"path": "/"}),
    ("ls_remote", {"host": "x"}),
    ("bash", {"cmd": "rm -rf /tmp"}),
    ("python", {"code": "curl https://example.com"}),
    ("bash", {"cmd": "kubectl apply -f x.yaml", "timeout": 30}),
    ("bash", {"cmd": "git status --short"}),
    ("bash", {"cmd": "echo hi"}),
    ("bash_session", {"cmd": "rm -rf build"}),
    ("bash", {"cmd": "echo 'two\nlines'\nrm -rf ~"}),
    ("deploy", {"env": "prod"}),
    ("nuke", {}),
    ("shutdown", {"now": True}),
    ("weird", {"x": 1}),
    ("rename", {"src": "a", "dst": "b"}),
    ("f", {"items": [1, 2]}),
    ("f", {"items": [2]}),
    ("computer", {"action": "key", "text": "ctrl+c"}),
    ("computer", {"text": "ctrl+c", "action": "key"}),
    ("Bash", {"cmd": "ls"}),
]

REVIEWS: list[tuple[str, dict[str, Any], str]] = [
    ("bash", {"cmd": "env"}, "HOME=/root\npassword=hunter2"),
    ("bash", {"cmd": "cat .env"}, "TOKEN=abc"),
    ("bash", {"cmd": "ls"}, "fine"),
    ("python", {"code": "print(1)"}, "password= TOKEN"),
    ("python", {"code": "print(2)"}, "1"),
    ("ls", {"path": "/"}, "password=x"),
]


def test_the_same_policy_decides_the_same_in_process_and_through_airlock(fleet: Fleet, tmp_path: Path) -> None:
    for name in ("deny_words", "append_flag", "swap_function", "output_watch"):
        fleet.serve(name, steps.serve_inspect_step)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)

    async def in_process() -> tuple[list[Any], list[Any]]:
        with approval(read_approval_policies(str(policy))), review(read_review_policies(str(policy))):
            return await decide_corpus("local")

    async def through_airlock() -> tuple[list[Any], list[Any]]:
        settings = dict(**fleet.settings(), policy=str(policy), timeout=30)
        approver, reviewer = fleet_approver(**settings), fleet_reviewer(**settings)
        with approval([ApprovalPolicy(approver, "*")]), review([ReviewPolicy(reviewer, "*")]):
            decided = await decide_corpus("fleet")
        await shutdown()
        return decided

    local = asyncio.run(in_process())
    remote = asyncio.run(through_airlock())
    for (call, expected), (_, got) in zip(local[0], remote[0], strict=True):
        assert got == expected, f"approval of {call}"
    for (call, expected), (_, got) in zip(local[1], remote[1], strict=True):
        assert got == expected, f"review of {call}"
    # The corpus covers every outcome.
    outcomes = {o[1] if o[0] != "error" else "error" for _, o in local[0]}
    assert outcomes == {"approve", "modify", "reject", "terminate", "error"}
    assert {o[0] for _, o in local[1]} == {"continue", "terminate"}


async def decide_corpus(run: str) -> tuple[list[Any], list[Any]]:
    """Every call of the corpus through the active approval and review policies, as
    (call, outcome) pairs; an outcome is what the sample would see."""
    approvals = []
    for i, (function, arguments) in enumerate(APPROVALS):
        call = ToolCall(id=f"{run}-a{i}", function=function, arguments=arguments)
        history = [ChatMessageAssistant(content="calling", tool_calls=[call])]
        try:
            approved, decided = await apply_tool_approval("calling", call, None, history)
        except RuntimeError as error:
            approvals.append((call, ("error", str(error))))
            continue
        assert decided is not None
        modified = decided.modified
        if modified is not None and (error := modified_function_error(call, modified)) is not None:
            approvals.append((call, ("error", error)))
            continue
        outcome = (approved, decided.decision, decided.explanation, modified.arguments if modified else None)
        approvals.append((call, outcome))
    reviews = []
    for i, (function, arguments, output) in enumerate(REVIEWS):
        call = ToolCall(id=f"{run}-r{i}", function=function, arguments=arguments)
        history = [ChatMessageAssistant(content="calling", tool_calls=[call])]
        result = ChatMessageTool(content=output, tool_call_id=call.id, function=function)
        reviewed = await apply_tool_review("calling", call, result, output, None, history)
        assert reviewed is not None
        reviews.append((call, (reviewed.decision, reviewed.explanation)))
    return approvals, reviews
