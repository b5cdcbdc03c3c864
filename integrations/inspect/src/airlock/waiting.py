"""Paging someone when a call waits for a person, through Inspect's own notifications
(`--notification`, `INSPECT_EVAL_NOTIFICATION`): what Inspect's human approver does in
process, done when the reviewer service that took the call's human task says so with a
`Progress` reply; and once more when it warns (the step's `warn_before`) that nobody answered
the task yet and it expires soon.

A progress is not proved (the reviewer service holds no fleet key), so anyone able to publish
to the runner's reply queue could forge one. The page therefore takes nothing from it but a
pool name that follows the fleet's rule for pool names and the task id, percent-encoded into
a link built from the runner's own reviewer URL (`reviewer_url`), and from a warning a number
of minutes. The call's text comes from the runner's own request, and a call pages at most once
that it waits and once that it expires.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from urllib.parse import quote

from inspect_ai._util.format import format_function_call
from inspect_ai.util._notify import notify

from ._proto import airlock_pb2 as pb

log = logging.getLogger(__name__)

POOL_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
"""A pool name as the reviewer service accepts it: letters, digits, `-`, `_`, `.`."""
MAX_TASK_ID = 128
"""The longest task id put in a link (the service's are UUIDs)."""

Pager = Callable[[pb.Progress], Awaitable[None]]
"""What a waiting call does with the progress that says so."""


def pager(request: pb.Request, reviewer_url: str | None) -> Pager:
    """Pages, through Inspect's `notify()`, that `request`'s call waits for a person, with a
    link to the task on the reviewer UI at `reviewer_url` when there is one."""

    async def page(progress: pb.Progress) -> None:
        await notify(waiting_message(request, progress, reviewer_url))

    return page


def waiting_message(
    request: pb.Request, progress: pb.Progress, reviewer_url: str | None, now: float | None = None
) -> str:
    """The page: the assistant message (as Inspect's human approver sends it), then which
    call waits for whom, and where to decide it; for a warning (a progress naming when the task
    expires), how soon it expires, as of `now` (unix seconds; the clock's time when `None`)."""
    body = request.review if request.HasField("review") else request.approval
    what = "review" if request.HasField("review") else "approval"
    pool = f" in pool '{progress.pool}'" if POOL_NAME.fullmatch(progress.pool) else ""
    text = f"Tool call {call_text(body.call)} waits for a person's {what}{pool}"
    if progress.expires_at_unix_ms > 0:
        now = time.time() if now is None else now
        text += f" and expires {expires_in(progress.expires_at_unix_ms / 1000 - now)}"
    link = task_link(reviewer_url, progress.task_id)
    text += f": {link}" if link is not None else "."
    return f"{body.message}\n\n{text}" if body.message else text


def expires_in(seconds: float) -> str:
    """When a task expires, `seconds` from now, in words: `in 2 minutes`, `in 40 seconds`,
    `now` once due."""
    if seconds < 1:
        return "now"
    if seconds < 90:
        return f"in {round(seconds)} second{'s' if round(seconds) != 1 else ''}"
    return f"in {round(seconds / 60)} minutes"


def call_text(call: pb.ToolCall) -> str:
    """The call as Inspect prints one (`name(key='value')`), from the runner's own request."""
    try:
        arguments = json.loads(call.arguments_json) if call.arguments_json else {}
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        return f"{call.function}(…)"
    return format_function_call(call.function, arguments, width=1000)


def task_link(reviewer_url: str | None, task_id: str) -> str | None:
    """The task's card on the reviewer UI's pending page, `<reviewer_url>/#task-<id>` with the
    id percent-encoded, or `None` without a reviewer URL or a usable id."""
    if not reviewer_url or not task_id or len(task_id) > MAX_TASK_ID:
        return None
    return f"{reviewer_url}/#task-{quote(task_id, safe='')}"
