"""The approver `airlock/fleet`: every call it is asked about is decided by the fleet."""

from __future__ import annotations

from inspect_ai.approval import Approval, Approver, approver
from inspect_ai.model import ChatMessage
from inspect_ai.tool import ToolCall, ToolCallView

from ._proto import airlock_pb2 as pb
from .config import FLEET, FleetSettings
from .decisions import Fallback, approval_from_decision
from .request import decide, new_request

APPROVAL_ON_TIMEOUT = ("reject", "approve", "terminate", "escalate")
"""What `on_timeout` may be for an approval (`escalate` hands the call to the next approver
of the Inspect policy that lists `airlock/fleet`)."""


@approver(name=FLEET)
def fleet_approver(
    url: str | None = None,
    prefix: str | None = None,
    policy: str | None = None,
    timeout: float | None = None,
    on_timeout: str = "reject",
    history_bytes: int | None = None,
    ca_file: str | None = None,
    verify_key: str | None = None,
    reviewer_url: str | None = None,
    insecure: bool | None = None,
    generation: bool | None = None,
) -> Approver:
    """Approver whose decisions come from an Airlock fleet.

    Args:
        url: The broker's AMQP URL (default: `AIRLOCK_AMQP_URL`). Prefer the environment
            variable: parameters are written to the eval log.
        prefix: The fleet's prefix (default: `AIRLOCK_PREFIX`, else `airlock`).
        policy: An Inspect policy file, sent with every request, or the name of a policy the
            workers hold (default: `AIRLOCK_POLICY`). A value with a `/` must be a file.
        timeout: Seconds to wait for a decision (default: `AIRLOCK_TIMEOUT`, else 600).
        on_timeout: The decision when none arrived in time (or the broker could not be
            reached): `reject` (default), `approve`, `terminate` or `escalate`.
        history_bytes: The most conversation history a request carries (encoded size); older
            messages are left out and their number is sent (default: 256 KiB, or the whole
            history with `generation`).
        ca_file: CA certificates (PEM) an `amqps://` broker's certificate is verified
            against, besides the system's (default: `AIRLOCK_CA_FILE`).
        verify_key: The fleet's public key file (`fleet.pub` of `airlock keys generate`;
            default: `AIRLOCK_VERIFY_KEY`). A reply is taken only with the fleet's proof
            (one without is dropped and the request waits on). Required unless `insecure`.
        reviewer_url: The reviewer UI's address (default: `AIRLOCK_REVIEWER_URL`). When the
            call waits for a person, Inspect's notifications (`--notification`) page once,
            with a link to the task there; without it, the page names the pool and the call.
        insecure: Take replies unproved, with no `verify_key` (default: `AIRLOCK_INSECURE=1`),
            from a fleet that runs `--insecure-unsigned`: anyone who can publish on the broker
            can then forge a decision, and it is taken. The client warns at every start.
        generation: Send, with every call, how the model was asked for it: the model's name,
            the generate config as set for the sample, the tools it was offered with their
            JSON Schemas, and the whole history (default: `AIRLOCK_GENERATION=1`, else off).
            Control steps that ask a model for a call of their own (`resample`,
            `defer_to_trusted`) need it; tool schemas can make each request many KB larger.

    Returns:
        Approver: an approver to list in a policy, e.g. with `tools: "*"`.
    """
    if on_timeout not in APPROVAL_ON_TIMEOUT:
        raise ValueError(
            f"airlock/fleet: on_timeout must be one of {', '.join(APPROVAL_ON_TIMEOUT)}, got '{on_timeout}'"
        )
    settings = FleetSettings.resolve(
        url, prefix, policy, timeout, history_bytes, ca_file, verify_key, reviewer_url, insecure, generation
    )

    async def approve(message: str, call: ToolCall, view: ToolCallView, history: list[ChatMessage]) -> Approval:
        request = new_request(settings, pb.ApprovalRequest(), message, call, view, history)
        answer = await decide(settings, request, on_timeout, on_refusal="reject")
        if isinstance(answer, Fallback):
            return Approval(decision=answer.decision, explanation=answer.explanation, metadata=answer.metadata)  # type: ignore[arg-type]
        return approval_from_decision(answer, call)

    return approve
