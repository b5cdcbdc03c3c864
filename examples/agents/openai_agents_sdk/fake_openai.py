"""A stand-in for the OpenAI Chat Completions API (`POST /v1/chat/completions`, not
streamed), in its wire format: the user's last message becomes one `bash` tool call; once a
tool answered, the model replies with the tool's answer."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from local_http import Request, Response


def chat_completions(request: Request) -> Response:
    if request.method != "POST" or not request.path.endswith("/chat/completions"):
        return Response.json({"error": {"message": f"no route {request.path}"}}, status=404)
    body = request.json()
    last = body["messages"][-1]
    if last["role"] == "tool":
        message: dict[str, Any] = {"role": "assistant", "content": f"The tool answered: {last['content']}"}
        finish = "stop"
    else:
        command = last["content"] if isinstance(last["content"], str) else last["content"][0]["text"]
        call = {
            "id": f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"cmd": command})},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    return Response.json(
        {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
    )
