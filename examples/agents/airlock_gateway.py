"""A small client of the Airlock gateway's HTTP API (docs/gateway.md), shared by the agent
examples: ask for a tool call's approval and get the fleet's decision, by a waiting request
and, when the wait runs out, by long polls of the decision's URL.

Configured from the environment by `Gateway.from_env()`:

- `AIRLOCK_GATEWAY_URL`: the gateway, e.g. `http://127.0.0.1:8090`;
- `AIRLOCK_GATEWAY_TOKEN`: the caller's bearer token (`airlock gateway add-token`);
- `AIRLOCK_GATEWAY_POLICY`: the named policy to ask (default `agents`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

WAIT = 30
"""Seconds one request (or one poll) holds the response open (`Prefer: wait=N`)."""


@dataclass(frozen=True)
class Decision:
    """The fleet's decision on one call, as `GET /v1/decisions/{id}` answers it."""

    decision: str
    """`approve`, `reject`, `modify`, `terminate` or `escalate` (approvals); reviews:
    `continue` or `terminate`."""
    explanation: str
    approver: str
    raw: dict[str, Any] = field(repr=False)

    @property
    def approved(self) -> bool:
        return self.decision == "approve"

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Decision:
        return cls(body["decision"], body.get("explanation") or "", body.get("approver") or "", body)


class GatewayError(RuntimeError):
    """The gateway refused the request (its `error.code` and message)."""

    def __init__(self, status: int, body: Any) -> None:
        error = body.get("error", {}) if isinstance(body, dict) else {}
        self.status = status
        self.code = error.get("code", "")
        super().__init__(f"{status} {self.code}: {error.get('message', body)}")


@dataclass
class Gateway:
    """Where the gateway is, who is asking, and with which policy."""

    url: str
    token: str
    policy: str = "agents"
    run: str = "agent-examples"
    """The `origin.run` of the requests: together with the sample, the epoch and the call id,
    it names a request, so a retry never asks twice."""

    @classmethod
    def from_env(cls, **overrides: Any) -> Gateway:
        return cls(
            url=os.environ["AIRLOCK_GATEWAY_URL"].rstrip("/"),
            token=os.environ["AIRLOCK_GATEWAY_TOKEN"],
            policy=os.environ.get("AIRLOCK_GATEWAY_POLICY", "agents"),
            **overrides,
        )

    def body(
        self,
        call_id: str,
        function: str,
        arguments: dict[str, Any],
        *,
        sample: str | int,
        messages: list[dict[str, Any]] | None = None,
        callback_url: str | None = None,
    ) -> dict[str, Any]:
        """The body of `POST /v1/approvals` for one tool call."""
        body: dict[str, Any] = {
            "call": {"id": call_id, "function": function, "arguments": arguments},
            "policy": {"name": self.policy},
            "origin": {"run": self.run, "sample": sample, "epoch": 1},
        }
        if messages:
            body["messages"] = messages
        if callback_url:
            body["callback_url"] = callback_url
        return body

    def _headers(self, wait: int | None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token}"}
        if wait:
            headers["Prefer"] = f"wait={wait}"
        return headers

    async def approve(
        self,
        call_id: str,
        function: str,
        arguments: dict[str, Any],
        *,
        sample: str | int,
        messages: list[dict[str, Any]] | None = None,
        deadline: float = 300.0,
    ) -> Decision:
        """Asks for the approval of one call and waits for the decision (async)."""
        body = self.body(call_id, function, arguments, sample=sample, messages=messages)
        give_up = time.monotonic() + deadline
        async with httpx.AsyncClient(base_url=self.url, timeout=WAIT + 10) as http:
            response = await http.post("/v1/approvals", json=body, headers=self._headers(WAIT))
            while response.status_code == 202 and time.monotonic() < give_up:
                response = await http.get(response.headers["location"], headers=self._headers(WAIT))
            return _decision(response)

    def approve_sync(
        self,
        call_id: str,
        function: str,
        arguments: dict[str, Any],
        *,
        sample: str | int,
        messages: list[dict[str, Any]] | None = None,
        deadline: float = 300.0,
    ) -> Decision:
        """`approve`, for synchronous code."""
        body = self.body(call_id, function, arguments, sample=sample, messages=messages)
        give_up = time.monotonic() + deadline
        with httpx.Client(base_url=self.url, timeout=WAIT + 10) as http:
            response = http.post("/v1/approvals", json=body, headers=self._headers(WAIT))
            while response.status_code == 202 and time.monotonic() < give_up:
                response = http.get(response.headers["location"], headers=self._headers(WAIT))
            return _decision(response)

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        """Posts an approval request without waiting (for a `callback_url`): the `202` answer,
        `{"id", "status": "pending", "location"}`, or the decision if it was already made."""
        with httpx.Client(base_url=self.url, timeout=30) as http:
            response = http.post("/v1/approvals", json=body, headers=self._headers(None))
        if response.status_code not in (200, 202):
            raise GatewayError(response.status_code, _json(response))
        return response.json()


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


def _decision(response: httpx.Response) -> Decision:
    if response.status_code != 200:
        raise GatewayError(response.status_code, _json(response))
    return Decision.from_json(response.json())
