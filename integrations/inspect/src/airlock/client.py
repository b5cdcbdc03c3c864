"""The runner side of the fleet: one AMQP connection per event loop and fleet, shared by
every sample of the process.

Nothing is published through the broker's default exchange. A request is published, mandatory,
to the fleet's exchange `<prefix>.ask` (which reaches the requests queue only), `reply_to` =
this runner's reply queue and the correlation id `kind/run/sample/epoch/call`; its `Reply`
comes back on the reply queue and is handed to the waiting request by that id. The runner id is
`<broker user>.<host>-<pid>-<random>`, so a least-privilege broker user `U` (see `airlock
topology definitions`) may own its reply queue `<prefix>.reply.<runner id>` and bind it to
`<prefix>.route` under `reply.<runner id>`, the key the workers reply with. The reply queue is
a durable quorum queue that expires 30 minutes after its last consumer left, declared with
exactly the arguments the Rust transport uses, so it outlives a reconnect. The runner declares
nothing else: the workers declare `<prefix>.ask`, `<prefix>.route` and the rest of the fleet.
The connection is named `<prefix> runner (<host>:<pid>)` in the broker's management view.

Nothing waits past a request's deadline: meanwhile an unreachable broker, or a prefix with no
fleet (no `<prefix>.ask` or `<prefix>.route` yet, or the publish comes back unroutable), is
retried with backoff; at the deadline the request fails with `FleetUnanswered` (the caller makes the
fail-closed decision) and, if it was sent, is withdrawn with a `Cancel` on the
`<prefix>.cancels` exchange. Whether `<prefix>.route` exists is checked on a channel of its
own before the reply queue is bound, since the broker closes a channel that uses a missing
exchange. The URL may list the nodes of a cluster (see `nodes`): the connection starts at a
random one and, when its node is lost, moves on to the next. It is robust (aio-pika reconnects
it and restores the reply queue and its binding); after each reconnect the client consumes its
replies again and publishes every pending request again, since the broker may have lost what
was not confirmed. A reply that
matches nothing pending (a duplicate, or one that came too late), or a decision about an
earlier request for the same call (it carries that request's time), is ignored and counted.

With the fleet's public keys (`verify_key`), every request carries this client's ephemeral
public key and a reply is taken only with the fleet's proof over it and the exact request
(see `proof`); one without is dropped with a warning and counted, and its request keeps
waiting, so that it fails closed at its deadline unless the fleet's own reply comes.

A `progress` reply (the reviewer service took the call's human task) is not final and not
proved: it settles nothing. The first one for a waiting call runs the call's pager (see
`waiting`) in the background, in the context the call was asked from (its sample's, where
Inspect's notifications are set up); later ones, e.g. after a reconnect, are counted only.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import socket
import ssl
import sys
import time
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aio_pika
from aio_pika.abc import AbstractRobustChannel, AbstractRobustQueue
from aio_pika.exceptions import ChannelNotFoundEntity, PublishError
from aiormq import spec
from aiormq.abc import DeliveredMessage
from aiormq.exceptions import DeliveryError

from ._proto import airlock_pb2 as pb
from .errors import AlreadyPending, FleetError, FleetUnanswered
from .nodes import ClusterConnection, Nodes, describe, dial
from .proof import FleetPublicKeys, MalformedReply, RunnerKeys, UnprovedReply, open_reply
from .waiting import Pager
from .wire import correlation_id

log = logging.getLogger(__name__)

T = TypeVar("T")

PERSISTENT = 2
"""AMQP delivery mode of a message the broker writes to disk."""

REPLY_QUEUE_ARGUMENTS: dict[str, Any] = {"x-queue-type": "quorum", "x-expires": 30 * 60 * 1000}
"""The reply queue's arguments, identical to the Rust transport's `QueueKind::Private` (a
declaration with other arguments fails with PRECONDITION_FAILED)."""

CONNECT_TIMEOUT = 10.0
"""Seconds one connection attempt may take (per node)."""
ROLE = "runner"
"""The role in the connection's name, as the Rust roles name theirs."""
RETRY_FIRST, RETRY_MAX = 0.1, 2.0
"""Backoff of a request whose publish failed, in seconds."""
CLOSE_TIMEOUT = 5.0
"""Seconds a clean shutdown may take before the connection is dropped."""


@dataclass
class ClientStats:
    """Counters for logs and tests."""

    pending: int
    """Requests waiting for a decision now."""
    unsent: int
    """Of those, the ones the broker has not accepted yet (it is down, or no fleet is there)."""
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


@dataclass
class _Pending:
    """A request waiting for its reply, with what it takes to send it again."""

    future: asyncio.Future[pb.ReplyBody]
    body: bytes
    key: pb.CallKey
    kind: int
    requested_at_unix_ms: int
    context: contextvars.Context
    """Where the request was asked from: its pager runs there."""
    pager: Pager | None = None
    """What to do once the call waits for a person; `None` once done (a call pages once)."""
    published: bool = False
    problem: str | None = field(default=None)


class _MissingExchange(Exception):
    """An exchange of the fleet is not on the broker."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no exchange {name}")
        self.name = name


class FleetClient:
    """A runner's link to one fleet (broker URL, or the comma-separated URLs of a cluster's
    nodes, and prefix). Use `client_for()` to get the one shared by the running event loop.
    With `verify_key`, replies are taken only with the proof of one of its fleet keys.

    Raises:
        ValueError: `url` is not a valid list of nodes (see `Nodes.parse`).
    """

    def __init__(
        self, url: str, prefix: str, ca_file: str | None = None, verify_key: FleetPublicKeys | None = None
    ) -> None:
        self.url = url
        self.nodes = Nodes.parse(url)
        self.prefix = prefix
        self.ca_file = ca_file
        self.verify_key = verify_key
        self._runner_keys = RunnerKeys(verify_key) if verify_key is not None else None
        self.runner_id = f"{self.nodes.user}.{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.reply_queue = f"{prefix}.reply.{self.runner_id}"
        self.reply_key = f"reply.{self.runner_id}"
        self.route_exchange = f"{prefix}.route"
        self.ask_exchange = f"{prefix}.ask"
        self.requests_queue = f"{prefix}.requests"
        self.cancels_exchange = f"{prefix}.cancels"
        self.closed = False
        self._connection: ClusterConnection | None = None
        self._channel: AbstractRobustChannel | None = None
        self._replies: AbstractRobustQueue | None = None
        self._replies_channel: AbstractRobustChannel | None = None
        self._bound = False
        self._binding = asyncio.Lock()
        self._consumer_tag: str | None = None
        self._cancel_channel: aio_pika.abc.AbstractChannel | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._pending: dict[str, _Pending] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._ignored_replies = 0
        self._rejected_replies = 0
        self._timed_out = 0
        self._resent = 0
        self._progress_replies = 0

    # === requests ===

    async def decide(self, request: pb.Request, timeout: float, pager: Pager | None = None) -> pb.ReplyBody:
        """Sends `request` and waits at most `timeout` seconds for its final reply; `pager`
        runs in the background, once, when a progress says the call waits for a person.

        Raises:
            FleetUnanswered: no reply in time (the request was withdrawn if it was sent).
            AlreadyPending: a request for the same call and kind is waiting already.
        """
        kind = pb.KIND_REVIEW if request.HasField("review") else pb.KIND_APPROVAL
        correlation = correlation_id(kind, request.key)
        if correlation in self._pending:
            raise AlreadyPending(correlation)
        now_ms = int(time.time() * 1000)
        request.reply_to = self.reply_queue
        request.requested_at_unix_ms = now_ms
        request.deadline_unix_ms = now_ms + int(timeout * 1000)
        if not request.origin.runner_id:
            request.origin.runner_id = self.runner_id
        if self._runner_keys is not None:
            request.runner_key = self._runner_keys.public
        pending = _Pending(
            future=asyncio.get_running_loop().create_future(),
            body=request.SerializeToString(),
            key=request.key,
            kind=kind,
            requested_at_unix_ms=now_ms,
            context=contextvars.copy_context(),
            pager=pager,
        )
        self._pending[correlation] = pending
        try:
            return await _within(timeout, self._exchange(correlation, pending))
        except asyncio.TimeoutError:
            self._timed_out += 1
            if pending.published:
                self._withdraw(pending, "the runner stopped waiting: deadline passed")
            raise FleetUnanswered(timeout, self._lost() or pending.problem) from None
        except asyncio.CancelledError:
            if pending.published:
                self._withdraw(pending, "the sample ended before a decision")
            raise
        finally:
            if self._pending.get(correlation) is pending:
                del self._pending[correlation]

    async def _exchange(self, correlation: str, pending: _Pending) -> pb.ReplyBody:
        """Publishes until the broker routed the request, then waits for the reply."""
        delay = RETRY_FIRST
        while not pending.future.done():
            lost = self._lost()
            if lost is not None:
                pending.problem = lost
            try:
                await self._publish(correlation, pending.body)
                pending.published = True
                break
            except PublishError:
                pending.problem = self._no_fleet(f"no queue {self.requests_queue}")
            except DeliveryError:  # a negative confirm
                pending.problem = f"the broker at {self.nodes} refused the request (a negative confirm)"
            except _MissingExchange as missing:
                self._bound = False  # the exchange went away, and the binding with it
                pending.problem = self._no_fleet(f"no exchange {missing.name}")
            except ChannelNotFoundEntity:  # deleted since it was checked
                self._bound = False
                pending.problem = self._no_fleet(f"no exchange {self.ask_exchange}")
            except FleetError:
                raise
            except Exception as error:  # the broker is down, the connection went away, …
                pending.problem = f"the broker at {self.nodes} could not be reached: {describe(error)}"
            log.debug("Request %s not sent yet (%s); retrying in %.1fs.", correlation, pending.problem, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)
        return await pending.future

    def _no_fleet(self, missing: str) -> str:
        """The problem of a request that found `missing` instead of a fleet."""
        return f"{missing} on the broker at {self.nodes}: no Airlock fleet runs on prefix '{self.prefix}'"

    def _lost(self) -> str | None:
        """The problem of a request while the connection is lost and being made again (with
        why the last attempt failed), or `None` when it is up or not made yet."""
        connection = self._connection
        if connection is None or connection.connected.is_set():
            return None
        failed = f" ({connection.last_failure})" if connection.last_failure else ""
        return f"the connection to the broker at {self.nodes} was lost; reconnecting{failed}"

    async def _publish(self, correlation: str, body: bytes) -> None:
        """Publishes a request on the confirm channel (aiormq's own, under aio-pika's robust
        one: no message object per publish) and waits for the broker's confirm.

        Raises:
            PublishError: the broker returned it: no queue is bound.
            DeliveryError: the broker did not take it (a negative confirm).
        """
        await self._ready()
        await self._bind()
        assert self._channel is not None
        channel = await self._channel.get_underlay_channel()
        headers = trace_headers()
        properties = spec.Basic.Properties(
            correlation_id=correlation,
            reply_to=self.reply_queue,
            delivery_mode=PERSISTENT,
            headers=headers or None,
        )
        # `wait=False`: the channel's lock is not held until the frames are written, only while
        # they are queued; the confirm is still awaited.
        await channel.basic_publish(
            body, exchange=self.ask_exchange, routing_key="requests", properties=properties, mandatory=True, wait=False
        )

    async def _bind(self) -> None:
        """Binds the reply queue to `<prefix>.route` under `reply.<runner id>`, once it and
        `<prefix>.ask` exist (the workers declare them). They are checked on a throwaway
        channel: using a missing exchange makes the broker close the channel.

        Raises:
            _MissingExchange: no `<prefix>.route` or no `<prefix>.ask` on the broker.
        """
        async with self._binding:
            if self._bound:
                return
            assert self._connection is not None and self._replies is not None
            async with aio_pika.Channel(self._connection, publisher_confirms=False) as probe:
                for name in (self.route_exchange, self.ask_exchange):
                    try:
                        await probe.declare_exchange(name, passive=True)
                    except ChannelNotFoundEntity as missing:
                        raise _MissingExchange(name) from missing
            # Through the robust queue: restored with it after a reconnect.
            await self._replies.bind(self.route_exchange, routing_key=self.reply_key)
            self._bound = True

    def _withdraw(self, pending: _Pending, reason: str) -> None:
        """Publishes a `Cancel` for `pending` in the background (best effort)."""
        cancel = pb.Cancel(key=pending.key, kind=pending.kind, reason=reason)  # type: ignore[arg-type]
        self._spawn(self._publish_cancel(cancel))

    async def _publish_cancel(self, cancel: pb.Cancel) -> None:
        try:
            if self._connection is None or not self._connection.connected.is_set():
                log.warning("Could not publish a cancel to %s: the connection is lost.", self.cancels_exchange)
                return
            if self._cancel_channel is None or self._cancel_channel.is_closed:
                # Its own channel without confirms: a missing exchange closes this one only.
                self._cancel_channel = await self._connection.channel(publisher_confirms=False)
            exchange = await self._cancel_channel.get_exchange(self.cancels_exchange, ensure=False)
            message = aio_pika.Message(
                cancel.SerializeToString(),
                correlation_id=correlation_id(cancel.kind, cancel.key),
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            )
            await exchange.publish(message, routing_key="")
        except Exception as error:
            log.warning("Could not publish a cancel to %s: %s", self.cancels_exchange, error)

    # === connection ===

    async def _ready(self) -> None:
        """Returns once the publishing channel is open. One connection attempt at a time is
        shared by every request that needs it; a request's own deadline bounds its wait."""
        if self.closed:
            raise FleetError("the Airlock client was closed")
        if self._channel is None:
            if self._connecting is None or self._connecting.done():
                self._connecting = asyncio.get_running_loop().create_task(self._connect())
                self._connecting.add_done_callback(_retrieve)
            await asyncio.shield(self._connecting)
        assert self._channel is not None
        await self._channel.ready()  # waits out a reconnect or a reopening in progress

    async def _connect(self) -> None:
        connection = await dial(
            self.nodes,
            CONNECT_TIMEOUT,
            client_properties={"connection_name": connection_name(self.prefix)},
            ssl_context=ssl.create_default_context(cafile=self.ca_file) if self.ca_file else None,
        )
        try:
            # Publishes have a channel of their own, with no queue to restore: one the broker
            # closes (a missing exchange) is reopened as it is.
            channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
            replies = await connection.channel(publisher_confirms=False)
            # Declared through the robust channel: restored, with its binding, after a reconnect.
            queue = await replies.declare_queue(self.reply_queue, durable=True, arguments=REPLY_QUEUE_ARGUMENTS)
            consumer_tag = await self._consume(replies)
        except BaseException:
            await asyncio.shield(connection.close())
            raise
        connection.reconnect_callbacks.add(self._on_reconnect)
        self._connection, self._channel = connection, channel
        self._replies, self._replies_channel, self._consumer_tag = queue, replies, consumer_tag
        log.info(
            "Connected to the Airlock fleet '%s' through broker node %s; replies on %s.",
            self.prefix,
            connection.label,
            self.reply_queue,
        )

    async def _consume(self, replies: AbstractRobustChannel) -> str:
        """Consumes the reply queue on aiormq's channel under the robust one: each reply is
        the raw delivery, with no aio-pika message object and task of its own. Not restored by
        aio-pika: done again after every reconnect."""
        underlay = await replies.get_underlay_channel()
        ok = await underlay.basic_consume(self.reply_queue, self._on_reply, no_ack=True)
        return str(ok.consumer_tag)

    def _on_reconnect(self, *_: Any) -> None:
        self._spawn(self._restore())

    async def _restore(self) -> None:
        """After a reconnect: consumes replies again, then publishes every request that was
        sent and is still waiting (the broker may have lost what was not confirmed)."""
        assert self._replies_channel is not None
        try:
            await self._replies_channel.ready()
            self._consumer_tag = await self._consume(self._replies_channel)
        except Exception as error:
            log.warning("Could not consume %s again: %s", self.reply_queue, error)
        await self._resend_pending()

    async def _resend_pending(self) -> None:
        """Publishes every request that was sent and is still waiting, all at once (their
        confirms are awaited together)."""
        waiting = [(c, p) for c, p in self._pending.items() if p.published and not p.future.done()]
        await asyncio.gather(*(self._resend(correlation, pending) for correlation, pending in waiting))

    async def _resend(self, correlation: str, pending: _Pending) -> None:
        if pending.future.done():
            return
        try:
            await self._publish(correlation, pending.body)
            self._resent += 1
        except Exception as error:
            log.warning("Could not send %s again after a reconnect: %s", correlation, error)

    def _on_reply(self, message: DeliveredMessage) -> None:
        correlation = message.header.properties.correlation_id or ""
        pending = self._pending.get(correlation)
        if pending is None or pending.future.done():
            self._ignored_replies += 1
            return
        try:
            reply = open_reply(message.body, self._runner_keys, pending.body)
        except UnprovedReply as error:
            log.warning("A reply to %s was dropped: %s.", correlation, error)
            self._rejected_replies += 1
            return
        except MalformedReply as error:
            log.warning("A reply to %s was ignored: %s.", correlation, error)
            self._ignored_replies += 1
            return
        if reply.HasField("progress"):
            self._progress_replies += 1
            if pending.pager is not None:
                page, pending.pager = pending.pager, None
                # The task copies the call's context: its sample, and its notification setup.
                pending.context.run(self._spawn, self._page(correlation, page, reply.progress))
            return
        if reply.HasField("decision") and reply.decision.requested_at_unix_ms != pending.requested_at_unix_ms:
            # A decision about an earlier request for the same call (its key was reused).
            self._ignored_replies += 1
            return
        pending.future.set_result(reply)

    async def _page(self, correlation: str, page: Pager, progress: pb.Progress) -> None:
        try:
            await page(progress)
        except Exception as error:
            log.warning("Telling that %s waits for a person failed: %s", correlation, error)

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # === lifecycle ===

    def stats(self) -> ClientStats:
        """Counters for logs and tests."""
        return ClientStats(
            pending=len(self._pending),
            unsent=sum(not pending.published for pending in self._pending.values()),
            ignored_replies=self._ignored_replies,
            rejected_replies=self._rejected_replies,
            timed_out=self._timed_out,
            resent=self._resent,
            progress_replies=self._progress_replies,
        )

    async def close(self) -> None:
        """Deletes the reply queue and closes the connection (bounded by `CLOSE_TIMEOUT`).
        Requests still waiting fail with `FleetUnanswered` at their deadline."""
        self.closed = True
        if self._connecting is not None and not self._connecting.done():
            self._connecting.cancel()
        if self._background:
            await asyncio.wait(self._background, timeout=CLOSE_TIMEOUT)
        if self._connection is None:
            return
        if not self._connection.connected.is_set():
            log.warning("The Airlock connection is lost; its reply queue %s expires on its own.", self.reply_queue)
            await asyncio.shield(self._connection.close())
            self._connection = self._channel = self._cancel_channel = self._replies = self._replies_channel = None
            return
        try:
            await asyncio.wait_for(self._teardown(), CLOSE_TIMEOUT)
        except Exception as error:
            log.warning("The Airlock connection did not close cleanly (%s); the reply queue expires on its own.", error)
        finally:
            self._connection = self._channel = self._cancel_channel = self._replies = self._replies_channel = None

    async def _teardown(self) -> None:
        """Stops consuming, deletes the reply queue, closes the connection, in that order."""
        assert self._connection is not None and self._replies is not None and self._replies_channel is not None
        if self._consumer_tag is not None:
            underlay = await self._replies_channel.get_underlay_channel()
            await underlay.basic_cancel(self._consumer_tag)
        await self._replies.delete(if_unused=False, if_empty=False)
        await self._connection.close()


def connection_name(prefix: str) -> str:
    """The connection's name in the broker's management view, `<prefix> runner (<host>:<pid>)`,
    as the Rust roles name theirs."""
    return f"{prefix} {ROLE} ({socket.gethostname()}:{os.getpid()})"


async def _within(timeout: float, work: Coroutine[Any, Any, T]) -> T:
    """What `work` returns, or `asyncio.TimeoutError` after `timeout` seconds: in the calling
    task with `asyncio.timeout` (Python 3.11 on), in a task of its own before."""
    if sys.version_info < (3, 11):
        return await asyncio.wait_for(work, timeout)
    async with asyncio.timeout(timeout):
        return await work


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Marks a failed connection attempt's exception as seen (its waiters may be gone)."""
    if not task.cancelled():
        task.exception()


# === one client per event loop and fleet ===

_clients: dict[tuple[str, str, str | None, FleetPublicKeys | None], FleetClient] = {}
_clients_loop: asyncio.AbstractEventLoop | None = None


def client_for(
    url: str, prefix: str, ca_file: str | None = None, verify_key: FleetPublicKeys | None = None
) -> FleetClient:
    """The client of the running event loop for the fleet at `url` / `prefix` (verified with
    `ca_file` over TLS, its replies with `verify_key`), created on first use. Each
    `inspect_ai.eval()` runs its own event loop; clients of an earlier loop are forgotten
    (their loop is gone)."""
    global _clients_loop
    from . import hooks  # imports this module: loaded late

    hooks.install()
    loop = asyncio.get_running_loop()
    if _clients_loop is not loop:
        _clients.clear()
        _clients_loop = loop
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
