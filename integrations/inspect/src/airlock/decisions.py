"""From the fleet's answers to Inspect's: a `Decision` becomes an `Approval` or a `Review`,
and a request the fleet could not decide becomes a fail-closed one that says why.

The `metadata` of what is returned (Inspect writes it to the ApprovalEvent / ReviewEvent) is
the deciding step's own metadata, plus the key `airlock` with the fleet's record: the
decision id, the deciding step and its position, who decided, the deciding step's own
explanation, the policy digest, timings and the trail of every step's answer.

The explanation returned is the one the model is shown (Inspect gives it to the model as the
tool call's error, and writes it to the event): the decision's, which is the deciding step's
`model_explanation` when the policy fixes one, while the step's own reason stays in the
record. A decision that came from a deadline (nobody answered: a step's `on_timeout`, or the
runner's own `timeout`) adds `timed_out: true` to the metadata, beside `airlock`.
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

TIMED_OUT_KEY = "timed_out"
"""The metadata key, beside `airlock`, of a decision that came from a deadline."""

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
    """The deciding step's metadata plus the fleet's record under `airlock`, and
    `timed_out: true` for a decision that came from a deadline."""
    metadata = _json_object(decision.metadata_json)
    deciding = _deciding_answer(decision)
    record: dict[str, Any] = {
        "decision_id": decision.decision_id,
        "approver": decision.approver,
        "step": decision.step if decision.HasField("step") else None,
        "decided_by": decision.decided_by,
        "step_explanation": deciding.explanation if deciding and deciding.HasField("explanation") else None,
        "timed_out": decision.timed_out,
        "policy_digest": decision.policy_digest,
        "requested_at_unix_ms": decision.requested_at_unix_ms,
        "decided_at_unix_ms": decision.decided_at_unix_ms,
        "trail": [_answer_record(answer) for answer in decision.trail],
    }
    timed_out = {TIMED_OUT_KEY: True} if decision.timed_out else {}
    return {**metadata, **timed_out, METADATA_KEY: record}


def _deciding_answer(decision: pb.Decision) -> pb.StepAnswer | None:
    """The trail entry of the step that decided (its last answer), if the trail has one."""
    step = decision.step if decision.HasField("step") else None
    for answer in reversed(decision.trail):
        if answer.approver == decision.approver and (answer.step if answer.HasField("step") else None) == step:
            return answer
    return None


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
    if answer.timed_out:
        record["timed_out"] = True
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
    """The metadata of a decision made here rather than by the fleet; one made because no
    answer came in time is `timed_out`."""
    record: dict[str, Any] = {"decided_by": runner_id}
    if isinstance(error, FleetUnanswered):
        record.update(approver=TIMEOUT_APPROVER, timed_out=True, timeout=error.timeout, reason=error.reason)
        return {TIMED_OUT_KEY: True, METADATA_KEY: record}
    if isinstance(error, FleetRefused):
        record.update(approver=REFUSED_APPROVER, code=error.code, message=error.message)
    else:
        record.update(approver=FAILED_APPROVER, message=str(error))
    return {METADATA_KEY: record}
