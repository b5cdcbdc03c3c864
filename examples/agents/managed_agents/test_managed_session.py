"""The Managed Agents custom-tool round trip against a real fleet and a local stand-in for the
session API: the gateway's signed webhook drives the answer to the session; `ls` runs, `rm`
comes back as an error result; a webhook with a forged signature is refused."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from conftest import Fleet
from fake_sessions import FakeSessions
from local_http import serve
from managed_session import EXECUTED, Sessions, ToolBroker

DEADLINE = 30.0


@dataclass
class App:
    broker: ToolBroker
    sessions: Sessions
    hook_url: str


@pytest.fixture
def app(fleet: Fleet) -> Iterator[App]:
    stop = threading.Event()
    with serve(FakeSessions()) as api, serve(lambda request: broker.receive(request)) as hook:
        sessions = Sessions(api, api_key="not-a-key")
        broker = ToolBroker(sessions, fleet.gateway(), Webhook(fleet.webhook_secret), f"{hook}/airlock-hook")
        worker = threading.Thread(target=broker.run_worker, args=(stop,), daemon=True)
        worker.start()
        yield App(broker, sessions, f"{hook}/airlock-hook")
        stop.set()
        worker.join()


def converse(app: App, command: str) -> list[dict[str, Any]]:
    """Starts a session, sends `command`, lets the broker ask the gateway, and returns the
    session's events once its turn ended."""
    session = app.sessions.http.post("/v1/sessions", json={"agent": "agent_ops"}).json()["id"]
    app.sessions.send(session, {"type": "user.message", "content": [{"type": "text", "text": command}]})
    assert app.broker.on_idle(session) == 1
    assert app.broker.on_idle(session) == 0, "a call already asked about is not asked again"
    give_up = time.monotonic() + DEADLINE
    while time.monotonic() < give_up:
        events = app.sessions.events(session)
        if events[-1]["type"] == "session.status_idle" and events[-1]["stop_reason"]["type"] == "end_turn":
            return events
        time.sleep(0.05)
    raise AssertionError(f"the session did not end its turn: {app.sessions.events(session)}")


def result_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    [use] = [e for e in events if e["type"] == "agent.custom_tool_use"]
    [result] = [e for e in events if e["type"] == "user.custom_tool_result"]
    assert result["custom_tool_use_id"] == use["id"]
    return result


def test_an_approved_tool_use_runs_and_its_output_goes_back_to_the_session(app: App) -> None:
    EXECUTED.clear()
    events = converse(app, "ls -la")
    result = result_of(events)
    assert EXECUTED == ["ls -la"]
    assert result["is_error"] is False
    assert result["content"][0]["text"].startswith("$ ls -la")
    assert events[-2]["content"][0]["text"].startswith("The tool answered: $ ls -la")


def test_a_rejected_tool_use_goes_back_as_an_error_and_never_runs(app: App) -> None:
    EXECUTED.clear()
    result = result_of(converse(app, "rm -rf /"))
    assert EXECUTED == []
    assert result["is_error"] is True
    assert result["content"][0]["text"] == "Airlock refused this call (reject: Automatic decision.)"


def test_a_webhook_with_a_forged_signature_is_refused(app: App) -> None:
    forged = Webhook("whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODk=")
    body = '{"type": "decision.ready", "data": {"call_id": "x", "decision": {"decision": "approve"}}}'
    now = datetime.now(UTC)
    headers = {
        "webhook-id": "forged-1",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": forged.sign("forged-1", now, body),
        "content-type": "application/json",
    }
    response = httpx.post(app.hook_url, content=body, headers=headers)
    assert response.status_code == 400
    assert app.broker.work.empty()
