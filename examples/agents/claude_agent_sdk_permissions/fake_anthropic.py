"""A stand-in for the Anthropic Messages API (`POST /v1/messages`, streamed as server-sent
events when asked, as Claude Code asks): the user's first message becomes one `Bash` tool
use (the message is the command), or, for a message `mcp__SERVER__TOOL {JSON}`, a use of that
MCP tool with those arguments; once a tool answered, the model replies with the answer."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from local_http import Request, Response

SEEN: list[tuple[str, str]] = []
"""Every request's method and path, for the tests' record of what the CLI asked."""


def sealed_env(url: str, home: Path) -> dict[str, str]:
    """The environment of a Claude Code CLI that asks this stand-in at `url` for its model, with
    `home` for its home: nothing of the user's, and no traffic but the model's."""
    return {
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "not-a-key",
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if block.get("type") == "text")


def _reply(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of the model's answer to `body`."""
    last = body["messages"][-1]
    results = (
        [b for b in last["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
        if isinstance(last["content"], list)
        else []
    )
    if results:
        result = results[-1]
        text = _text_of(result["content"]) if not isinstance(result["content"], str) else result["content"]
        return [{"type": "text", "text": f"The tool answered: {text}"}]
    # The user's prompt is the last text block of the first user message (Claude Code may put
    # reminders before it).
    prompt = (
        _text_of([b for b in body["messages"][0]["content"] if b.get("type") == "text"][-1:])
        if isinstance(body["messages"][0]["content"], list)
        else body["messages"][0]["content"]
    )
    name, tool_input = "Bash", {"command": prompt.strip(), "description": "Run the user's command"}
    if prompt.startswith("mcp__"):
        name, _, arguments = prompt.strip().partition(" ")
        tool_input = json.loads(arguments or "{}")
    return [{"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:20]}", "name": name, "input": tool_input}]


def _sse(blocks: list[dict[str, Any]], model: str) -> bytes:
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_{uuid.uuid4().hex[:20]}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
        )
    ]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                )
            )
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}},
                    },
                )
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


def messages(request: Request) -> Response:
    SEEN.append((request.method, request.path))
    path = request.path.split("?")[0]
    if request.method == "POST" and path == "/v1/messages/count_tokens":
        return Response.json({"input_tokens": 10})
    if request.method != "POST" or path != "/v1/messages":
        return Response.json({"type": "error", "error": {"type": "not_found_error", "message": path}}, status=404)
    body = request.json()
    blocks = _reply(body)
    if body.get("stream"):
        return Response(200, _sse(blocks, body["model"]), {"content-type": "text/event-stream"})
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return Response.json(
        {
            "id": f"msg_{uuid.uuid4().hex[:20]}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    )
