"""What can keep the fleet from deciding, as typed errors the approver and reviewer map to
fail-closed decisions (or, for `StepFailed`, to the failure Inspect itself would raise)."""

from __future__ import annotations


class FleetError(Exception):
    """Base class of the errors of this package."""


class FleetUnanswered(FleetError):
    """No decision arrived before the request's deadline.

    `reason` says what was seen meanwhile (the broker unreachable, no fleet on the prefix),
    or is `None` when the request was sent and the fleet stayed silent.
    """

    def __init__(self, timeout: float, reason: str | None) -> None:
        self.timeout = timeout
        self.reason = reason
        detail = f" ({reason})" if reason else ""
        super().__init__(f"the Airlock fleet did not answer within {timeout:.1f}s{detail}")


class FleetRefused(FleetError):
    """The fleet answered with an `Error` reply: it could not process the request."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"the Airlock fleet refused the request ({code}): {message}")


class AlreadyPending(FleetError):
    """A request with the same kind and call key is waiting for its decision already."""

    def __init__(self, correlation_id: str) -> None:
        self.correlation_id = correlation_id
        super().__init__(f"a request for {correlation_id} is already pending")


class StepFailed(FleetError):
    """A step answered what Inspect fails the sample on (a `modify` that changed the
    function); the message is Inspect's own."""
