"""From Inspect's types to the wire contract: calls, views, conversation history (bounded in
size), how the model was asked (its generation), tool output, and the correlation id that ties
a request to its reply."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from inspect_ai._util.content import ContentText
from inspect_ai.event import ModelEvent
from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageTool
from inspect_ai.tool import ToolCall, ToolCallContent, ToolCallView, ToolInfo

from ._proto import airlock_pb2 as pb

KIND_NAMES: dict[int, str] = {pb.KIND_APPROVAL: "approval", pb.KIND_REVIEW: "review"}
"""The first segment of a correlation id, per kind."""


def correlation_id(kind: int, key: pb.CallKey) -> str:
    """`kind/run/sample/epoch/call`, then `/tenant` when the key names one, with `%` and `/`
    percent-encoded in each part: the AMQP correlation id of a request and of its reply (as the
    Rust client computes it)."""
    parts = (KIND_NAMES.get(kind, "approval"), _encode(key.run_id), _encode(key.sample_id), str(key.epoch))
    tenant = (_encode(key.tenant),) if key.tenant else ()
    return "/".join((*parts, _encode(key.tool_call_id), *tenant))


def _encode(part: str) -> str:
    return part.replace("%", "%25").replace("/", "%2F")


def arguments_json(arguments: dict[str, Any]) -> str:
    """A call's arguments as a JSON object, in the order the model gave them."""
    return json.dumps(arguments, ensure_ascii=False, default=str)


def call_to_wire(call: ToolCall) -> pb.ToolCall:
    """An Inspect `ToolCall` on the wire."""
    wire = pb.ToolCall(
        id=call.id, function=call.function, arguments_json=arguments_json(call.arguments), type=call.type
    )
    if call.parse_error is not None:
        wire.parse_error = call.parse_error
    if call.view is not None:
        wire.view.CopyFrom(content_to_wire(call.view))
    return wire


def call_from_wire(wire: pb.ToolCall, original: ToolCall) -> ToolCall:
    """The call a `modify` decision carries, as an Inspect `ToolCall` (arguments in their
    order; the id and type of `original` when the wire leaves them empty)."""
    arguments = json.loads(wire.arguments_json) if wire.arguments_json.strip() else {}
    if not isinstance(arguments, dict):
        raise ValueError(f"the modified call's arguments are not a JSON object: {wire.arguments_json}")
    return ToolCall(
        id=wire.id or original.id,
        function=wire.function or original.function,
        arguments=arguments,
        parse_error=wire.parse_error if wire.HasField("parse_error") else None,
        view=content_from_wire(wire.view) if wire.HasField("view") else None,
        type="custom" if wire.type == "custom" else "function",
    )


def content_to_wire(content: ToolCallContent) -> pb.ToolCallContent:
    """A `ToolCallContent` on the wire."""
    wire = pb.ToolCallContent(format=content.format, content=content.content)
    if content.title is not None:
        wire.title = content.title
    return wire


def content_from_wire(wire: pb.ToolCallContent) -> ToolCallContent:
    """A wire `ToolCallContent` as Inspect's."""
    return ToolCallContent(
        title=wire.title if wire.HasField("title") else None,
        format="markdown" if wire.format == "markdown" else "text",
        content=wire.content,
    )


def view_to_wire(view: ToolCallView | None) -> pb.ToolCallView:
    """A `ToolCallView` on the wire (empty when there is none)."""
    wire = pb.ToolCallView()
    if view is not None and view.context is not None:
        wire.context.CopyFrom(content_to_wire(view.context))
    if view is not None and view.call is not None:
        wire.call.CopyFrom(content_to_wire(view.call))
    return wire


def message_to_wire(message: ChatMessage) -> pb.ChatMessage:
    """One conversation message on the wire. Content the fields do not carry (images,
    reasoning, …) travels as the message's whole Inspect JSON in `raw_json`."""
    wire = pb.ChatMessage(role=message.role, text=message.text)
    if message.id is not None:
        wire.id = message.id
    if isinstance(message, ChatMessageAssistant):
        wire.tool_calls.extend(call_to_wire(call) for call in message.tool_calls or [])
    if isinstance(message, ChatMessageTool):
        if message.tool_call_id is not None:
            wire.tool_call_id = message.tool_call_id
        if message.function is not None:
            wire.function = message.function
        if message.error is not None:
            wire.error.CopyFrom(pb.ToolCallError(type=message.error.type, message=message.error.message))
    if not isinstance(message.content, str) and any(not isinstance(c, ContentText) for c in message.content):
        wire.raw_json = message.model_dump_json(exclude_none=True)
    return wire


def history_to_wire(history: Sequence[ChatMessage], limit_bytes: int | None) -> tuple[list[pb.ChatMessage], int]:
    """The most recent messages of `history` that fit in `limit_bytes` (encoded; `None`: all
    of them), and how many were left out from its start. The last message (the assistant
    message carrying the call) is always kept."""
    kept: list[pb.ChatMessage] = []
    size = 0
    for message in reversed(history):
        wire = message_to_wire(message)
        size += wire.ByteSize()
        if kept and limit_bytes is not None and size > limit_bytes:
            break
        kept.append(wire)
    kept.reverse()
    return kept, len(history) - len(kept)


def generation_to_wire(event: ModelEvent) -> pb.Generation:
    """How the model of `event` was asked: its name as Inspect gives it (`provider/model`),
    the fields of its generate config that are set, and the tools it was offered, in order."""
    config = event.config.model_dump(mode="json", exclude_none=True)
    return pb.Generation(
        model=event.model,
        config_json=json.dumps(config, ensure_ascii=False) if config else "",
        tools=[tool_to_wire(tool) for tool in event.tools],
    )


def tool_to_wire(tool: ToolInfo) -> pb.ToolDefinition:
    """A tool as the model was offered it, its parameters as JSON Schema."""
    parameters = tool.parameters.model_dump(mode="json", exclude_none=True)
    return pb.ToolDefinition(
        name=tool.name, description=tool.description, parameters_json=json.dumps(parameters, ensure_ascii=False)
    )


def output_text(output: Any) -> str:
    """A tool's raw result (`ToolResult`) as text: strings as they are, scalars through
    `str`, text content as its text, other content as its Inspect JSON, lists joined by
    newlines."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(output_text(item) for item in output)
    if isinstance(output, ContentText):
        return output.text
    if hasattr(output, "model_dump_json"):
        return str(output.model_dump_json(exclude_none=True))
    return str(output)
