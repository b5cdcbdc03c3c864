"""Which sample a call belongs to: the call key and origin of a request, read from Inspect's
active sample (or a per-process run id when called outside an eval), and the model call that
made it, read from the sample's transcript."""

from __future__ import annotations

import logging
import uuid

from inspect_ai.event import ModelEvent
from inspect_ai.log._samples import sample_active
from inspect_ai.log._transcript import TranscriptHistoryUnavailableError, transcript

from ._proto import airlock_pb2 as pb

log = logging.getLogger(__name__)

_OUTSIDE_EVAL_RUN = f"python-{uuid.uuid4()}"
"""The run id of calls made outside any eval (e.g. an approver called directly)."""


def call_key_and_origin(tool_call_id: str) -> tuple[pb.CallKey, pb.Origin]:
    """The call key and origin of a request about the call `tool_call_id` of the active
    sample.

    The key's run is Inspect's eval id: unique per task of a run, so two tasks of one
    `eval()` whose samples share ids (and whose models reuse tool call ids) never share a
    key. The origin carries both the run id and the eval id.
    """
    active = sample_active()
    if active is None:
        key = pb.CallKey(run_id=_OUTSIDE_EVAL_RUN, sample_id="", epoch=0, tool_call_id=tool_call_id)
        return key, pb.Origin(run_id=_OUTSIDE_EVAL_RUN)
    sample_id = "" if active.sample.id is None else str(active.sample.id)
    key = pb.CallKey(run_id=active.eval_id, sample_id=sample_id, epoch=active.epoch, tool_call_id=tool_call_id)
    origin = pb.Origin(
        run_id=active.run_id or "",
        eval_id=active.eval_id,
        task=active.task,
        sample_id=sample_id,
        epoch=active.epoch,
        model=active.model,
    )
    return key, origin


def model_event_of(tool_call_id: str) -> ModelEvent | None:
    """The latest model call of the running sample whose answer carries the call
    `tool_call_id`: how that model was asked for it. None outside an eval, or when the
    transcript holds no such call (an agent bridge's own client, history no longer available).
    """
    if sample_active() is None:
        return None

    def made_it(event: object) -> bool:
        if not isinstance(event, ModelEvent) or event.pending:
            return False
        message = event.output.message if event.output.choices else None
        return message is not None and any(call.id == tool_call_id for call in message.tool_calls or [])

    try:
        found = transcript().history.find_last(made_it)
    except TranscriptHistoryUnavailableError as error:
        log.warning("The model call of %s is no longer in the transcript: %s", tool_call_id, error)
        return None
    return found if isinstance(found, ModelEvent) else None
