"""From the fleet's answers to Inspect's: a `Decision` becomes an `Approval` or a `Review`,
and a request the fleet could not decide becomes a fail-closed one that says why.

The `metadata` of what is returned (Inspect writes it to the ApprovalEvent / ReviewEvent) is
the deciding step's own metadata, plus the key `airlock` with the fleet's record: the
decision id, the deciding step and its position, who decided, the policy digest, timings and
the trail of every step's answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from inspect_ai.approval import Approval
from inspect_ai.review import Review
from inspect_ai.tool import ToolCall

from ._proto import airlock_pb2 as pb
from .errors import FleetError, FleetRefused, FleetUnanswered
from .wire import call_from_wire

METADATA_KEY = "airlock"
"""The metadata key under which the fleet's record travels."""

STEP_FAILED = "step_failed"
"""The `Error` code of an answer Inspect fails the sample on (a `modify` to another function)."""

TIMEOUT_APPROVER = "timeout"
"""Recorded as the deciding step of a decision made here because time ran out."""

REFUSED_APPROVER = "refused"
"""Recorded as the deciding step of a decision made here because the fleet refused."""

FAILED_APPROVER = "failed"
"""Recorded as the deciding step of a decision made here because asking failed otherwise."""

DECISION_NAMES = {
    pb.DECISION_KIND_APPROVE: "approve",
    pb.DECISION_KIND_MODIFY: "modify",
    pb.DECISION_KIND_REJECT: "reject",
    pb.DECISION_KIND_TERMINATE: "terminate",
    pb.DECISION_KIND_ESCALATE: "escalate",
    pb.DECISION_KIND_CONTINUE: "continue",
}

APPROVAL_DECISIONS = ("approve", "modify", "reject", "terminate")
REVIEW_DECISIONS = ("continue", "terminate")


def approval_from_decision(decision: pb.Decision, call: ToolCall) -> Approval:
    """The Inspect `Approval` for a fleet decision about `call`. A decision that is not one
    an approval chain can give fails closed (reject)."""
    name = DECISION_NAMES.get(decision.decision, "unspecified")
    metadata = decision_metadata(decision)
    explanation = decision.explanation if decision.HasField("explanation") else None
    if name not in APPROVAL_DECISIONS:
        return Approval(
            decision="reject",
            explanation=f"The Airlock fleet answered '{name}', which is not an approval decision.",
            metadata=metadata,
        )
    modified = None
    if name == "modify" and decision.HasField("modified"):
        try:
            modified = call_from_wire(decision.modified, call)
        except ValueError as error:
            return Approval(
                decision="reject",
                explanation=f"The Airlock fleet's modified call is unreadable ({error}). It fails closed: 'reject'.",
                metadata=metadata,
            )
    return Approval(decision=name, modified=modified, explanation=explanation, metadata=metadata)  # type: ignore[arg-type]


def review_from_decision(decision: pb.Decision) -> Review:
    """The Inspect `Review` for a fleet decision. A decision that is not one a review chain
    can give fails closed (terminate)."""
    name = DECISION_NAMES.get(decision.decision, "unspecified")
    metadata = decision_metadata(decision)
    if name not in REVIEW_DECISIONS:
        return Review(
            decision="terminate",
            explanation=f"The Airlock fleet answered '{name}', which is not a review decision.",
            metadata=metadata,
        )
    explanation = decision.explanation if decision.HasField("explanation") else None
    return Review(decision=name, explanation=explanation, metadata=metadata)  # type: ignore[arg-type]


def decision_metadata(decision: pb.Decision) -> dict[str, Any]:
    """The deciding step's metadata plus the fleet's record under `airlock`."""
    metadata = _json_object(decision.metadata_json)
    record: dict[str, Any] = {
        "decision_id": decision.decision_id,
        "approver": decision.approver,
        "step": decision.step if decision.HasField("step") else None,
        "decided_by": decision.decided_by,
        "policy_digest": decision.policy_digest,
        "requested_at_unix_ms": decision.requested_at_unix_ms,
        "decided_at_unix_ms": decision.decided_at_unix_ms,
        "trail": [_answer_record(answer) for answer in decision.trail],
    }
    return {**metadata, METADATA_KEY: record}


def _answer_record(answer: pb.StepAnswer) -> dict[str, Any]:
    record: dict[str, Any] = {
        "step": answer.step if answer.HasField("step") else None,
        "approver": answer.approver,
        "decision": DECISION_NAMES.get(answer.decision, "unspecified"),
        "explanation": answer.explanation if answer.HasField("explanation") else None,
        "decided_by": answer.decided_by,
        "started_at_unix_ms": answer.started_at_unix_ms,
        "answered_at_unix_ms": answer.answered_at_unix_ms,
    }
    if answer.HasField("modified"):
        record["modified"] = {
            "function": answer.modified.function,
            "arguments": _json_object(answer.modified.arguments_json),
        }
    if answer.metadata_json:
        record["metadata"] = _json_object(answer.metadata_json)
    return record


def _json_object(text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"unparsed": text}
    return value if isinstance(value, dict) else {"value": value}


@dataclass(frozen=True)
class Fallback:
    """A decision made here, not by the fleet, because no usable answer came: the approver
    or reviewer returns it as its `Approval` / `Review`."""

    decision: str
    explanation: str
    metadata: dict[str, Any]


def fallback(error: FleetError, on_timeout: str, on_refusal: str, runner_id: str) -> Fallback:
    """What a request that `error` kept from being decided becomes: `on_timeout` when no
    answer came in time, `on_refusal` for any other failure (both fail closed by default)."""
    if isinstance(error, FleetUnanswered):
        decision, explanation = on_timeout, unanswered_explanation(error, on_timeout)
    else:
        decision, explanation = on_refusal, failure_explanation(error, on_refusal)
    return Fallback(decision, explanation, failure_metadata(error, runner_id))


def unanswered_explanation(error: FleetUnanswered, decision: str) -> str:
    """Why a request that got no answer in time was decided `decision` here."""
    reason = f": {error.reason}" if error.reason else ""
    return (
        f"The Airlock fleet did not answer within {error.timeout:.1f}s{reason}. "
        f"It fails closed: '{decision}' (on_timeout)."
    )


def failure_explanation(error: FleetError, decision: str) -> str:
    """Why a request the fleet could not decide was decided `decision` here."""
    return f"No decision from the Airlock fleet: {error}. It fails closed: '{decision}'."


def failure_metadata(error: FleetError, runner_id: str) -> dict[str, Any]:
    """The metadata of a decision made here rather than by the fleet."""
    record: dict[str, Any] = {"decided_by": runner_id}
    if isinstance(error, FleetUnanswered):
        record.update(approver=TIMEOUT_APPROVER, timeout=error.timeout, reason=error.reason)
    elif isinstance(error, FleetRefused):
        record.update(approver=REFUSED_APPROVER, code=error.code, message=error.message)
    else:
        record.update(approver=FAILED_APPROVER, message=str(error))
    return {METADATA_KEY: record}
