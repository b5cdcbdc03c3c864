"""What the approver and the reviewer share: building a request for the active sample and
asking the fleet, with the fleet's answer sorted into a decision or a typed failure."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from inspect_ai.model import ChatMessage
from inspect_ai.tool import ToolCall, ToolCallView

from ._proto import airlock_pb2 as pb
from .client import client_for
from .config import FleetSettings
from .context import call_key_and_origin, model_event_of
from .decisions import STEP_FAILED, Fallback, fallback
from .errors import FleetError, FleetRefused, StepFailed
from .waiting import pager
from .wire import call_to_wire, generation_to_wire, history_to_wire, view_to_wire

log = logging.getLogger(__name__)


def new_request(
    settings: FleetSettings,
    body: pb.ApprovalRequest | pb.ReviewRequest,
    message: str,
    call: ToolCall,
    view: ToolCallView | None,
    history: Sequence[ChatMessage],
) -> pb.Request:
    """A request about `call` of the active sample, with `body` (an empty approval or review
    body) filled with the message, the call, its view and the history (its most recent
    messages within `settings.history_bytes`; how many were left out is stated), and for an
    approval with `settings.generation`, how the model was asked for the call (when the
    sample's transcript holds that model call)."""
    body.message = message
    body.call.CopyFrom(call_to_wire(call))
    body.view.CopyFrom(view_to_wire(view))
    messages, omitted = history_to_wire(history, settings.history_bytes)
    body.history.extend(messages)
    body.history_omitted = omitted
    key, origin = call_key_and_origin(call.id)
    request = pb.Request(key=key, origin=origin, policy=settings.policy)
    if isinstance(body, pb.ApprovalRequest):
        event = model_event_of(call.id) if settings.generation else None
        if event is not None:
            body.generation.CopyFrom(generation_to_wire(event))
        request.approval.CopyFrom(body)
    else:
        request.review.CopyFrom(body)
    return request


async def ask(settings: FleetSettings, request: pb.Request) -> pb.Decision:
    """The fleet's decision about `request`. Once the call waits for a person, Inspect's
    notifications page about it (see `waiting`).

    Raises:
        StepFailed: the fleet answered `step_failed` (a `modify` that changed the function).
        FleetRefused: the fleet answered any other `Error` (unknown or invalid policy, bad
            message).
        FleetUnanswered: no answer before the deadline.
        FleetError: anything else kept the request from being decided.
    """
    try:
        client = client_for(settings.url, settings.prefix, settings.ca_file, settings.verify_key)
        reply = await client.decide(request, settings.timeout, pager(request, settings.reviewer_url))
    except FleetError:
        raise
    except Exception as error:
        log.exception("Asking the Airlock fleet failed.")
        raise FleetError(f"asking the Airlock fleet failed: {error!r}") from error
    if reply.HasField("error"):
        if reply.error.code == STEP_FAILED:
            raise StepFailed(reply.error.message)
        raise FleetRefused(reply.error.code, reply.error.message)
    return reply.decision


async def decide(
    settings: FleetSettings, request: pb.Request, on_timeout: str, on_refusal: str
) -> pb.Decision | Fallback:
    """The fleet's decision about `request`, or the fallback when none can be had.

    An answer Inspect itself fails the sample on (`step_failed`) raises Inspect's
    `RuntimeError` with its very message; every other failure is logged and becomes a
    [`Fallback`]: `on_timeout` when no answer came in time, `on_refusal` otherwise.
    """
    try:
        return await ask(settings, request)
    except StepFailed as error:
        raise RuntimeError(str(error)) from None
    except FleetError as error:
        log.warning("%s", error)
        return fallback(error, on_timeout, on_refusal, request.origin.runner_id)
