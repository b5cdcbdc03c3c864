"""The runner side of the fleet: one client per event loop and fleet, shared by every sample
of the process, on Airlock's Rust client (the native module `airlock._native`).

The eval's thread only builds a request's bytes and reads the decision. The native client runs
on a thread of its own: its AMQP connection (to a random node of a cluster's list, moving on
to the next when its node is lost; TLS with `ca_file`), the runner's reply queue (a durable
quorum queue `<prefix>.reply.<runner id>` that expires 30 minutes after its last consumer
left, bound to `<prefix>.route` under `reply.<runner id>`), publishing each request to
`<prefix>.ask` with publisher confirms, resending every pending request after a reconnect,
the fleet's proof over each reply (a reply without the fleet's proof over it and the exact
request is dropped and counted, and its request waits on; a client told `INSECURE` instead
takes replies unproved, and warns when it starts), ignoring
duplicates and decisions about an earlier request for the same call, each request's deadline
and the `Cancel` that withdraws it.

The runner id is `<broker user>.<host>-<pid>-<random>`, so a least-privilege broker user `U`
(see `airlock topology definitions`) may own its reply queue. The runner declares nothing
else: until the workers declared the fleet (`<prefix>.route`), or while the broker is away or
refuses a request, the request is retried with backoff; at its deadline it fails with
`FleetUnanswered`, saying what it met (the caller makes the fail-closed decision). The
connection is named `<prefix> runner (<host>:<pid>)` in the broker's management view.

Each outcome comes back through one socket the event loop watches: its callback drains every
outcome that came since in one call and settles their futures. A `progress` reply (the
reviewer service took the call's human task) is not final and not proved: the first one for
a waiting call runs the call's pager (see `waiting`) in the background, in the context the
call was asked from (its sample's, where Inspect's notifications are set up), and so does the
first one warning that the task expires (the step's `warn_before`).
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import os
import socket
import uuid
from dataclasses import dataclass, field

from . import _native
from ._proto import airlock_pb2 as pb
from .errors import AlreadyPending, FleetError, FleetUnanswered
from .nodes import Nodes
from .proof import FleetPublicKeys, Insecure, Proof
from .waiting import Pager
from .wire import correlation_id

log = logging.getLogger(__name__)

ROLE = "runner"
"""The role in the connection's name, as the Rust roles name theirs."""

NO_FLEET_KEYS = (
    "FleetClient needs the fleet's public keys: verify_key=FleetPublicKeys.load('fleet.pub'), or "
    "verify_key=INSECURE to take replies unproved (insecure accepts forged decisions)"
)
"""What a client made without `verify_key` is told."""

INSECURE_WARNING = (
    "Airlock runner %s runs insecure: decisions are not proved, and a forged one is taken as the fleet's."
)
"""What an insecure client logs each time it starts (its runner id fills the `%s`)."""


@dataclass
class ClientStats:
    """Counters for logs and tests."""

    pending: int
    """Requests waiting for a decision now."""
    unsent: int
    """Of those, the ones not yet handed to the connection (the broker is down, or no fleet
    is there)."""
    ignored_replies: int
    """Replies that matched nothing pending (duplicates or late ones) or said nothing."""
    rejected_replies: int
    """Replies dropped because the fleet's proof did not hold for them."""
    timed_out: int
    """Requests that ran out of time."""
    resent: int
    """Requests published again after a reconnect."""
    progress_replies: int
    """Progress replies (a call waits for a person) to a waiting call; they settle nothing."""
    repeated: int
    """Requests published again because no answer came within their soft deadline."""


@dataclass
class _Pending:
    """A request waiting for its outcome."""

    future: asyncio.Future[pb.ReplyBody]
    correlation: str
    key: pb.CallKey
    kind: int
    timeout: float
    context: contextvars.Context
    """Where the request was asked from: its pager runs there."""
    pager: Pager | None = None
    """What to do once the call waits for a person, and once its task is about to expire."""
    paged: set[bool] = field(default_factory=set)
    """Which pages went out: `False` for the wait, `True` for the warning (each goes once)."""


class FleetClient:
    """A runner's link to one fleet (broker URL, or the comma-separated URLs of a cluster's
    nodes, and prefix). Use `client_for()` to get the one shared by the running event loop.
    Replies are taken only with the proof of one of `verify_key`'s fleet keys, or, with
    `verify_key=INSECURE` (chosen in so many words), unproved.

    Raises:
        ValueError: `url` is not a valid list of nodes (see `Nodes.parse`), or `verify_key`
            is not given.
    """

    def __init__(self, url: str, prefix: str, ca_file: str | None = None, verify_key: Proof | None = None) -> None:
        if verify_key is None:
            raise ValueError(NO_FLEET_KEYS)
        self.url = url
        self.nodes = Nodes.parse(url)
        self.prefix = prefix
        self.ca_file = ca_file
        self.verify_key = verify_key
        self.runner_id = f"{self.nodes.user}.{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.reply_queue = f"{prefix}.reply.{self.runner_id}"
        self.reply_key = f"reply.{self.runner_id}"
        self.closed = False
        self._native: _native.Client | None = None
        self._tickets = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._by_correlation: dict[str, int] = {}
        self._background: set[asyncio.Task[None]] = set()

    def _start(self) -> _native.Client:
        """The native client, started (connecting in the background) on first use, its
        completions settled on the running event loop."""
        if self._native is None:
            if isinstance(self.verify_key, Insecure):
                log.warning(INSECURE_WARNING, self.runner_id)
            self._native = _native.Client(
                self.url,
                str(self.nodes),
                self.prefix,
                self.runner_id,
                connection_name(self.prefix),
                self.ca_file,
                self.verify_key.text() if isinstance(self.verify_key, FleetPublicKeys) else None,
                insecure=isinstance(self.verify_key, Insecure),
            )
            asyncio.get_running_loop().add_reader(self._native.fileno(), self._settle)
        return self._native

    # === requests ===

    async def decide(self, request: pb.Request, timeout: float, pager: Pager | None = None) -> pb.ReplyBody:
        """Sends `request` and waits at most `timeout` seconds for its final reply; `pager`
        runs in the background, once, when a progress says the call waits for a person.

        Raises:
            FleetUnanswered: no reply in time (the request was withdrawn if it was sent).
            AlreadyPending: a request for the same call and kind is waiting already.
            FleetError: the client was closed.
        """
        if self.closed:
            raise FleetError("the Airlock client was closed")
        native = self._start()
        kind = pb.KIND_REVIEW if request.HasField("review") else pb.KIND_APPROVAL
        correlation = correlation_id(kind, request.key)
        if correlation in self._by_correlation:
            raise AlreadyPending(correlation)
        ticket = next(self._tickets)
        pending = _Pending(
            future=asyncio.get_running_loop().create_future(),
            correlation=correlation,
            key=request.key,
            kind=kind,
            timeout=timeout,
            context=contextvars.copy_context(),
            pager=pager,
        )
        self._pending[ticket] = pending
        self._by_correlation[correlation] = ticket
        try:
            native.ask(ticket, request.SerializeToString(), timeout, trace_headers())
            return await pending.future
        except asyncio.CancelledError:
            cancel = pb.Cancel(key=pending.key, kind=pending.kind, reason="the sample ended before a decision")  # type: ignore[arg-type]
            native.cancel(ticket, cancel.SerializeToString())
            raise
        finally:
            del self._pending[ticket]
            del self._by_correlation[correlation]

    def _settle(self) -> None:
        """Settles every call whose outcome came since the last time (the socket's callback)."""
        assert self._native is not None
        for kind, ticket, first, second in self._native.drain():
            if kind == _native.PROGRESS:
                self._progress(first, second)
                continue
            pending = self._pending.get(ticket)
            if pending is None or pending.future.done():
                continue
            if kind == _native.ANSWERED:
                pending.future.set_result(pb.ReplyBody.FromString(first))
            elif kind == _native.UNANSWERED:
                pending.future.set_exception(FleetUnanswered(pending.timeout, first))
            else:
                pending.future.set_exception(FleetError(first))

    def _progress(self, correlation: str, encoded: bytes) -> None:
        """The first progress of a waiting call from a reviewer service that took its task
        runs its pager, in the call's context (a worker's, handing the call to a step, names no
        task and pages nobody); so does the first that warns the task expires."""
        pending = self._pending.get(self._by_correlation.get(correlation, 0))
        if pending is None or pending.pager is None:
            return
        progress = pb.Progress.FromString(encoded)
        warning = progress.expires_at_unix_ms > 0
        if not progress.task_id or warning in pending.paged:
            return
        pending.paged.add(warning)
        pending.context.run(self._spawn, correlation, pending.pager, progress)

    def _spawn(self, correlation: str, page: Pager, progress: pb.Progress) -> None:
        task = asyncio.get_running_loop().create_task(_page(correlation, page, progress))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # === lifecycle ===

    def stats(self) -> ClientStats:
        """Counters for logs and tests."""
        native = self._native
        unsent, ignored, rejected, timed_out, resent, progress, repeated = native.stats() if native else (0,) * 7
        return ClientStats(
            pending=len(self._pending),
            unsent=unsent,
            ignored_replies=ignored,
            rejected_replies=rejected,
            timed_out=timed_out,
            resent=resent,
            progress_replies=progress,
            repeated=repeated,
        )

    async def close(self) -> None:
        """Deletes the reply queue and closes the connection (within seconds). Requests
        still waiting fail with `FleetError`."""
        if self.closed:
            return
        self.closed = True
        if self._background:
            await asyncio.wait(self._background, timeout=5)
        if self._native is None:
            return
        await asyncio.to_thread(self._native.close)
        self._settle()
        asyncio.get_running_loop().remove_reader(self._native.fileno())
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_exception(FleetError("the Airlock client was closed"))


async def _page(correlation: str, page: Pager, progress: pb.Progress) -> None:
    try:
        await page(progress)
    except Exception as error:
        log.warning("Telling that %s waits for a person failed: %s", correlation, error)


def connection_name(prefix: str) -> str:
    """The connection's name in the broker's management view, `<prefix> runner (<host>:<pid>)`,
    as the Rust roles name theirs."""
    return f"{prefix} {ROLE} ({socket.gethostname()}:{os.getpid()})"


# === one client per event loop and fleet ===

_clients: dict[tuple[str, str, str | None, Proof], FleetClient] = {}
_clients_loop: asyncio.AbstractEventLoop | None = None


def client_for(url: str, prefix: str, ca_file: str | None = None, verify_key: Proof | None = None) -> FleetClient:
    """The client of the running event loop for the fleet at `url` / `prefix` (verified with
    `ca_file` over TLS, its replies with `verify_key`, or unproved with `INSECURE`; see
    `FleetClient`), created on first use. Each
    `inspect_ai.eval()` runs its own event loop; clients of an earlier loop are forgotten
    (their loop is gone)."""
    global _clients_loop
    from . import hooks  # imports this module: loaded late

    hooks.install()
    loop = asyncio.get_running_loop()
    if _clients_loop is not loop:
        _clients.clear()
        _clients_loop = loop
    if verify_key is None:
        raise ValueError(NO_FLEET_KEYS)
    key = (url, prefix, ca_file, verify_key)
    client = _clients.get(key)
    if client is None or client.closed:
        client = _clients[key] = FleetClient(url, prefix, ca_file, verify_key)
    return client


def has_clients() -> bool:
    """Whether the running event loop has a client to shut down."""
    try:
        return bool(_clients) and _clients_loop is asyncio.get_running_loop()
    except RuntimeError:
        return False


async def shutdown() -> None:
    """Closes every client of the running event loop that has no request waiting (a client
    still busy, e.g. with another eval running concurrently, is left open)."""
    if not has_clients():
        return
    for key, client in list(_clients.items()):
        if client.stats().pending == 0:
            del _clients[key]
            await client.close()


def trace_headers() -> dict[str, str]:
    """The W3C trace context of the current span (`traceparent`, `tracestate`), so the fleet's
    spans join the runner's trace; empty when OpenTelemetry is absent or records nothing."""
    try:
        from opentelemetry.propagate import inject
    except ImportError:
        return {}
    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier
