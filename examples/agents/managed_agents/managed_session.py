"""The custom-tool round trip of a Claude Managed Agents session, approved by the Airlock
fleet through a signed webhook.

A session that calls a custom tool pauses: it emits `agent.custom_tool_use` and goes idle
with `stop_reason.type: requires_action` until the application posts a
`user.custom_tool_result` for that event. Here the application does not run the tool at
once: it asks the gateway (`POST /v1/approvals` with a `callback_url`, no wait) and returns.
The gateway's `decision.ready` webhook, verified with the `standardwebhooks` package and
deduplicated by its `webhook-id`, then drives it: an approved call runs and its output is
posted back; a rejected one is posted back as an error result saying why, and never runs.

    AIRLOCK_GATEWAY_URL=... AIRLOCK_GATEWAY_TOKEN=... AIRLOCK_WEBHOOK_SECRET=whsec_... \\
    ANTHROPIC_API_KEY=... PUBLIC_HOOK_URL=https://your-host/airlock-hook \\
        PYTHONPATH=examples/agents python examples/agents/managed_agents/managed_session.py SESSION_ID

(the gateway must reach `PUBLIC_HOOK_URL`; the receiver listens on 127.0.0.1:8765 here).
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import httpx
from standardwebhooks import Webhook, WebhookVerificationError

from airlock_gateway import Decision, Gateway
from local_http import Request, Response

EXECUTED: list[str] = []
"""Commands the tool ran, in order (the tests read it)."""


def bash(cmd: str) -> str:
    """The custom tool. A stand-in for running the command: the example never touches the
    machine."""
    EXECUTED.append(cmd)
    return f"$ {cmd}\nREADME.md  src  tests"


class Sessions:
    """The session event API (`/v1/sessions/{id}/events`)."""

    def __init__(self, base_url: str, api_key: str) -> None:
        self.http = httpx.Client(
            base_url=base_url,
            timeout=30,
            headers={
                "x-api-key": api_key,
                "anthropic-version": "2023-06-01",
                "anthropic-beta": "managed-agents-2026-04-01",
            },
        )

    def events(self, session: str) -> list[dict[str, Any]]:
        response = self.http.get(f"/v1/sessions/{session}/events")
        response.raise_for_status()
        return response.json()["data"]

    def send(self, session: str, *events: dict[str, Any]) -> None:
        response = self.http.post(f"/v1/sessions/{session}/events", json={"events": list(events)})
        response.raise_for_status()


@dataclass
class Pending:
    session: str
    event: dict[str, Any]


@dataclass
class ToolBroker:
    """Asks the gateway about each custom tool use a session waits on, then answers the
    session when the decision's webhook arrives."""

    sessions: Sessions
    gateway: Gateway
    webhook: Webhook
    callback_url: str
    pending: dict[str, Pending] = field(default_factory=dict)
    """Custom tool uses asked about and not answered yet, by event id (the call's id)."""
    asked: set[str] = field(default_factory=set)
    """Every custom tool use asked about: the session may still show one as blocking after
    its webhook was handled, until the result reaches it."""
    seen: set[str] = field(default_factory=set)
    """`webhook-id`s handled: a retried webhook is acknowledged and not acted on again."""
    work: queue.Queue[dict[str, Any]] = field(default_factory=queue.Queue)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_idle(self, session: str) -> int:
        """If the session waits on custom tool uses, asks the gateway about each (once);
        returns how many were asked."""
        events = self.sessions.events(session)
        idle = [e for e in events if e["type"] == "session.status_idle"]
        if not idle or idle[-1]["stop_reason"]["type"] != "requires_action":
            return 0
        by_id = {e["id"]: e for e in events}
        asked = 0
        for event_id in idle[-1]["stop_reason"]["event_ids"]:
            event = by_id[event_id]
            if event["type"] != "agent.custom_tool_use":
                continue
            with self.lock:
                if event_id in self.asked:
                    continue
                self.asked.add(event_id)
                self.pending[event_id] = Pending(session, event)
            body = self.gateway.body(
                event_id, event["name"], event["input"], sample=session, callback_url=self.callback_url
            )
            self.gateway.submit(body)
            asked += 1
        return asked

    def receive(self, request: Request) -> Response:
        """The webhook receiver: verify, deduplicate, answer at once; act afterwards."""
        try:
            event = self.webhook.verify(request.body, request.headers)
        except WebhookVerificationError:
            return Response(400)
        with self.lock:
            if request.headers["webhook-id"] in self.seen:
                return Response(204)
            self.seen.add(request.headers["webhook-id"])
        self.work.put(event)
        return Response(204)

    def act(self, event: dict[str, Any]) -> None:
        """Answers the session the decision is about: the tool's output, or the refusal."""
        data = event["data"]
        with self.lock:
            pending = self.pending.pop(data["call_id"], None)
        if event["type"] != "decision.ready" or pending is None:
            return
        if data.get("decision"):
            decision = Decision.from_json(data["decision"])
            reason = f"{decision.decision}: {decision.explanation}"
        else:  # the fleet refused the request itself: fail closed
            decision, reason = None, f"{data['error']['code']}: {data['error']['message']}"
        if decision is not None and decision.approved:
            content, is_error = bash(**pending.event["input"]), False
        else:
            content, is_error = f"Airlock refused this call ({reason})", True
        self.sessions.send(
            pending.session,
            {
                "type": "user.custom_tool_result",
                "custom_tool_use_id": pending.event["id"],
                "content": [{"type": "text", "text": content}],
                "is_error": is_error,
            },
        )

    def run_worker(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                event = self.work.get(timeout=0.1)
            except queue.Empty:
                continue
            self.act(event)


if __name__ == "__main__":
    from local_http import serve

    broker = ToolBroker(
        Sessions(os.environ.get("ANTHROPIC_BASE_URL", "https://api.anthropic.com"), os.environ["ANTHROPIC_API_KEY"]),
        Gateway.from_env(),
        Webhook(os.environ["AIRLOCK_WEBHOOK_SECRET"]),
        os.environ["PUBLIC_HOOK_URL"],
    )
    stop = threading.Event()
    with serve(broker.receive, port=8765):
        threading.Thread(target=broker.run_worker, args=(stop,), daemon=True).start()
        print(f"asked about {broker.on_idle(sys.argv[1])} tool use(s); waiting for decisions (Ctrl-C to stop)")
        threading.Event().wait()
