"""Approvers and reviewers the tests register with Inspect, and `serve_inspect_step`, which
answers an Airlock external step by running the Inspect approver or reviewer of the same name
with the step's parameters: the same code decides in process and through the fleet."""

from __future__ import annotations

import json
from typing import Any

from inspect_ai._util.format import format_function_call
from inspect_ai._util.registry import create_registry_object
from inspect_ai.approval import Approval, Approver, approver
from inspect_ai.model import ChatMessage, ChatMessageTool
from inspect_ai.review import Review, Reviewer, reviewer
from inspect_ai.tool import ToolCall, ToolCallView

from airlock._proto import airlock_pb2 as pb
from airlock.decisions import DECISION_NAMES
from airlock.wire import call_from_wire, call_to_wire

DECISION_KINDS = {name: kind for kind, name in DECISION_NAMES.items()}


@approver(name="deny_words")
def deny_words(words: list[str], explanation: str = "forbidden word") -> Approver:
    """Rejects a call whose rendering contains one of `words`; escalates otherwise."""

    async def approve(message: str, call: ToolCall, view: ToolCallView, history: list[ChatMessage]) -> Approval:
        rendered = format_function_call(call.function, call.arguments, width=10_000)
        hits = [word for word in words if word in rendered]
        if hits:
            return Approval(decision="reject", explanation=f"{explanation}: {hits[0]}", metadata={"hits": hits})
        return Approval(decision="escalate", explanation="no forbidden word")

    return approve


@approver(name="append_flag")
def append_flag(flag: str) -> Approver:
    """Modifies `cmd` by appending `flag` (argument order kept)."""

    async def approve(message: str, call: ToolCall, view: ToolCallView, history: list[ChatMessage]) -> Approval:
        arguments = {**call.arguments, "cmd": f"{call.arguments.get('cmd', '')} {flag}"}
        modified = ToolCall(id=call.id, function=call.function, arguments=arguments)
        return Approval(decision="modify", modified=modified, explanation=f"appended {flag}")

    return approve


@approver(name="swap_function")
def swap_function(to: str) -> Approver:
    """Modifies the call into a call to another function (Inspect fails the sample)."""

    async def approve(message: str, call: ToolCall, view: ToolCallView, history: list[ChatMessage]) -> Approval:
        return Approval(decision="modify", modified=ToolCall(id=call.id, function=to, arguments=call.arguments))

    return approve


@reviewer(name="output_watch")
def output_watch(needle: str, on_match: str = "terminate") -> Reviewer:
    """Answers `on_match` when the raw output contains `needle`; escalates otherwise."""

    async def review(
        message: str,
        call: ToolCall,
        result: ChatMessageTool,
        output: Any,
        view: ToolCallView,
        history: list[ChatMessage],
    ) -> Review:
        if needle in str(output):
            return Review(decision=on_match, explanation=f"found {needle}", metadata={"needle": needle})  # type: ignore[arg-type]
        return Review(decision="escalate", explanation=f"no {needle}")

    return review


async def serve_inspect_step(task: pb.StepTask) -> pb.StepAnswer:
    """Answers an Airlock step task with the Inspect approver or reviewer named like the step."""
    request = task.request
    params = json.loads(task.params_json or "{}")
    params = {k: v for k, v in params.items() if k not in ("timeout", "on_timeout")}
    if request.HasField("approval"):
        body = request.approval
        call = call_from_wire(body.call, ToolCall(id=body.call.id, function=body.call.function, arguments={}))
        step = create_registry_object("approver", task.name, params)
        answer: Approval | Review = await step(body.message, call, ToolCallView(), [])  # type: ignore[operator]
    else:
        body = request.review
        call = call_from_wire(body.call, ToolCall(id=body.call.id, function=body.call.function, arguments={}))
        result = ChatMessageTool(content=body.result.text, tool_call_id=call.id, function=call.function)
        step = create_registry_object("reviewer", task.name, params)
        answer = await step(body.message, call, result, body.output, ToolCallView(), [])  # type: ignore[operator]
    wire = pb.StepAnswer(decision=DECISION_KINDS[answer.decision], decided_by=f"py-step/{task.name}")  # type: ignore[arg-type]
    if answer.explanation is not None:
        wire.explanation = answer.explanation
    if answer.metadata:
        wire.metadata_json = json.dumps(answer.metadata)
    if isinstance(answer, Approval) and answer.modified is not None:
        wire.modified.CopyFrom(call_to_wire(answer.modified))
    return wire
