"""The reviewer `airlock/fleet`: every result it is asked about is reviewed by the fleet."""

from __future__ import annotations

from inspect_ai.model import ChatMessage, ChatMessageTool
from inspect_ai.review import Review, Reviewer, reviewer
from inspect_ai.tool import ToolCall, ToolCallView, ToolResult

from ._proto import airlock_pb2 as pb
from .config import DEFAULT_HISTORY_BYTES, FLEET, FleetSettings
from .decisions import Fallback, review_from_decision
from .request import decide, new_request
from .wire import message_to_wire, output_text

REVIEW_ON_TIMEOUT = ("terminate", "continue", "escalate")
"""What `on_timeout` may be for a review (`escalate` hands the result to the next reviewer
of the Inspect policy that lists `airlock/fleet`)."""


@reviewer(name=FLEET)
def fleet_reviewer(
    url: str | None = None,
    prefix: str | None = None,
    policy: str | None = None,
    timeout: float | None = None,
    on_timeout: str = "terminate",
    history_bytes: int = DEFAULT_HISTORY_BYTES,
    ca_file: str | None = None,
    verify_key: str | None = None,
    reviewer_url: str | None = None,
    insecure: bool | None = None,
) -> Reviewer:
    """Reviewer whose decisions come from an Airlock fleet.

    Args:
        url: The broker's AMQP URL (default: `AIRLOCK_AMQP_URL`). Prefer the environment
            variable: parameters are written to the eval log.
        prefix: The fleet's prefix (default: `AIRLOCK_PREFIX`, else `airlock`).
        policy: An Inspect policy file, sent with every request, or the name of a policy the
            workers hold (default: `AIRLOCK_POLICY`). A value with a `/` must be a file.
        timeout: Seconds to wait for a decision (default: `AIRLOCK_TIMEOUT`, else 600).
        on_timeout: The decision when none arrived in time (or the broker could not be
            reached): `terminate` (default), `continue` or `escalate`.
        history_bytes: The most conversation history a request carries (encoded size); older
            messages are left out and their number is sent.
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

    Returns:
        Reviewer: a reviewer to list in a policy, e.g. with `tools: "*"`.
    """
    if on_timeout not in REVIEW_ON_TIMEOUT:
        raise ValueError(f"airlock/fleet: on_timeout must be one of {', '.join(REVIEW_ON_TIMEOUT)}, got '{on_timeout}'")
    settings = FleetSettings.resolve(
        url, prefix, policy, timeout, history_bytes, ca_file, verify_key, reviewer_url, insecure, generation=False
    )

    async def review(
        message: str,
        call: ToolCall,
        result: ChatMessageTool,
        output: ToolResult,
        view: ToolCallView,
        history: list[ChatMessage],
    ) -> Review:
        body = pb.ReviewRequest(result=message_to_wire(result), output=output_text(output))
        request = new_request(settings, body, message, call, view, history)
        answer = await decide(settings, request, on_timeout, on_refusal="terminate")
        if isinstance(answer, Fallback):
            return Review(decision=answer.decision, explanation=answer.explanation, metadata=answer.metadata)  # type: ignore[arg-type]
        return review_from_decision(answer)

    return review
