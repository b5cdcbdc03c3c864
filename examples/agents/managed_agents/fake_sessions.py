"""A stand-in for the part of the Claude Managed Agents session API the example uses: create
a session, send it events, list its events. Its agent answers a `user.message` with one
`agent.custom_tool_use` of the `bash` custom tool (the message is the command) and pauses
(`session.status_idle`, `stop_reason.type: requires_action`, the blocking event's id in
`event_ids`) until a `user.custom_tool_result` names that event; then it reports the result
in an `agent.message` and goes idle at `end_turn`."""

from __future__ import annotations

import re
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

from local_http import Request, Response

BETA = "managed-agents-2026-04-01"


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _event(type_: str, **fields: Any) -> dict[str, Any]:
    return {"id": f"sevt_{uuid.uuid4().hex[:16]}", "type": type_, "processed_at": _now(), **fields}


class FakeSessions:
    """The sessions and their events, and the HTTP handler that serves them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.status: dict[str, str] = {}

    def __call__(self, request: Request) -> Response:
        if request.headers.get("anthropic-beta") != BETA or not request.headers.get("x-api-key"):
            return Response.json({"type": "error", "error": {"type": "invalid_request_error"}}, status=400)
        if request.method == "POST" and request.path == "/v1/sessions":
            session = f"sesn_{uuid.uuid4().hex[:16]}"
            with self.lock:
                self.events[session], self.status[session] = [], "idle"
            return Response.json({"id": session, "type": "session", "status": "idle"})
        match = re.fullmatch(r"/v1/sessions/(sesn_\w+)(/events)?", request.path.split("?")[0])
        if not match or match.group(1) not in self.events:
            return Response.json({"type": "error", "error": {"type": "not_found_error"}}, status=404)
        session = match.group(1)
        with self.lock:
            if not match.group(2):
                return Response.json({"id": session, "type": "session", "status": self.status[session]})
            if request.method == "GET":
                return Response.json({"data": list(self.events[session]), "next_page": None})
            for event in request.json()["events"]:
                refused = self._receive(session, event)
                if refused:
                    return Response.json(
                        {"type": "error", "error": {"type": "invalid_request_error", "message": refused}}, status=400
                    )
            return Response.json({"data": self.events[session][-1:]})

    def _receive(self, session: str, event: dict[str, Any]) -> str | None:
        events = self.events[session]
        if event["type"] == "user.message":
            events.append(_event("user.message", content=event["content"]))
            command = event["content"][0]["text"]
            use = _event("agent.custom_tool_use", name="bash", input={"cmd": command})
            events.append(use)
            events.append(
                _event("session.status_idle", stop_reason={"type": "requires_action", "event_ids": [use["id"]]})
            )
            self.status[session] = "idle"
            return None
        if event["type"] == "user.custom_tool_result":
            blocking = [e for e in events if e["type"] == "session.status_idle"][-1]["stop_reason"]
            if event["custom_tool_use_id"] not in blocking.get("event_ids", []):
                return f"no pending custom tool use {event['custom_tool_use_id']}"
            events.append(
                _event(
                    "user.custom_tool_result",
                    custom_tool_use_id=event["custom_tool_use_id"],
                    content=event["content"],
                    is_error=event.get("is_error", False),
                )
            )
            events.append(_event("session.status_running"))
            text = event["content"][0]["text"]
            events.append(_event("agent.message", content=[{"type": "text", "text": f"The tool answered: {text}"}]))
            events.append(_event("session.status_idle", stop_reason={"type": "end_turn"}))
            return None
        return f"unexpected event type {event['type']}"
