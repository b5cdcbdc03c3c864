"""Where the broker is: one AMQP URL, or the comma-separated URLs of a cluster's nodes (one
user and vhost), as the Rust roles take them.

A connection starts at a node picked at random, so a fleet's runners spread over the nodes,
and tries each node once in turn. Once connected, a lost connection dials the node after the
one it was on first, and that node last. Within a round the next node is dialled at once;
after a round in which every node failed, the wait before the next one doubles from
`RECONNECT_FIRST` up to `RECONNECT_MAX`.

`ClusterConnection` is aio-pika's robust connection with only the address of each attempt
changed, so what it restores after a reconnect (channels, the reply queue and its binding)
and its reconnect callbacks stay aio-pika's. It relies on three things aio-pika's
`RobustConnection` does from 9.4 to 10.x: every attempt dials `self.url`; `_on_connection_close`
runs once when a connection is lost and once when an attempt fails; the reconnect loop reads
`reconnect_interval` before each next attempt. The tests that cut nodes fail if either of the
first two changes; the third only sets how long the waits are.

Layout: `Node` and `Nodes` (the parsed list and the order to dial it in), `ClusterConnection`,
and `dial` (the first connection).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import aio_pika
from aio_pika.connection import make_url
from aio_pika.exceptions import CONNECTION_EXCEPTIONS

log = logging.getLogger(__name__)

DEFAULT_PORTS = {"amqp": 5672, "amqps": 5671}
"""The port of each scheme when a URL names none."""
RECONNECT_FIRST, RECONNECT_MAX = 0.5, 5.0
"""Seconds to wait after a round of nodes that all failed: the first time, and at most."""


@dataclass(frozen=True)
class Node:
    """One node of the broker."""

    url: str
    """Its AMQP URL, credentials included."""
    label: str
    """`host:port`, for logs and explanations (the URL carries the password)."""


class Nodes:
    """The nodes of the broker, and where the next dial starts."""

    def __init__(self, nodes: list[Node], start: int, user: str) -> None:
        self._nodes = nodes
        self._next = start
        self.user = user
        """The broker user every node is reached as (`guest` when the URLs name none)."""

    @classmethod
    def parse(cls, urls: str) -> Nodes:
        """The nodes `urls` lists, comma-separated, starting at one picked at random. Every
        node must name the same user and vhost: the runner is one identity on one cluster.

        Raises:
            ValueError: an entry is empty or not an AMQP URL, or the entries name different
                users or vhosts. The message never carries a password.
        """
        entries = [entry.strip() for entry in urls.split(",")]
        nodes: list[Node] = []
        first: tuple[str, str] | None = None
        for position, url in enumerate(entries, 1):
            where = f"AMQP URL {position} of the list" if len(entries) > 1 else "the AMQP URL"
            if not url:
                raise ValueError(f"{where} is empty")
            parts = urlsplit(url)
            if parts.scheme not in DEFAULT_PORTS:
                raise ValueError(f"{where} does not start with amqp:// or amqps://")
            try:
                port = parts.port or DEFAULT_PORTS[parts.scheme]
            except ValueError:
                raise ValueError(f"{where} has an invalid port") from None
            identity = (unquote(parts.username or "") or "guest", unquote(parts.path[1:]) or "/")
            if first is None:
                first = identity
            elif identity != first:
                raise ValueError(
                    "every AMQP URL of the list must name the same user and vhost (the nodes of one "
                    f"cluster): URL 1 names user '{first[0]}' and vhost '{first[1]}', URL {position} "
                    f"user '{identity[0]}' and vhost '{identity[1]}'"
                )
            nodes.append(Node(url=url, label=f"{parts.hostname or 'localhost'}:{port}"))
        assert first is not None  # `urls.split` gives at least one entry, and each was checked
        return cls(nodes, random.randrange(len(nodes)), user=first[0])

    @property
    def schemes(self) -> set[str]:
        """The URL schemes of the nodes (`amqp`, `amqps`)."""
        return {urlsplit(node.url).scheme for node in self._nodes}

    def in_turn(self) -> Iterator[int]:
        """Every node's place in the list once, in the order to dial them now."""
        start = self._next
        return ((start + offset) % len(self._nodes) for offset in range(len(self._nodes)))

    def connected(self, index: int) -> None:
        """A connection was made to node `index`: the next dial starts after it."""
        self._next = self.after(index)

    def after(self, index: int) -> int:
        """The place of the node after node `index`."""
        return (index + 1) % len(self._nodes)

    def __getitem__(self, index: int) -> Node:
        return self._nodes[index]

    def __len__(self) -> int:
        return len(self._nodes)

    def __str__(self) -> str:
        """The URLs without their credentials, for explanations."""
        return ",".join(redact(node.url) for node in self._nodes)

    def __repr__(self) -> str:
        return f"Nodes({[node.label for node in self._nodes]})"


def redact(url: str) -> str:
    """An AMQP URL without its credentials, for explanations and logs."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname or '?'}{port}{parts.path}"


def describe(error: BaseException | None) -> str:
    """An error for a log line or an explanation."""
    if error is None:
        return "closed"
    return str(error) or type(error).__name__


class ClusterConnection(aio_pika.RobustConnection):
    """aio-pika's robust connection whose every attempt, after a lost connection or a failed
    attempt, dials the next node of `nodes`, waiting only between rounds (see the module)."""

    def __init__(self, nodes: Nodes, index: int, **kwargs: Any) -> None:
        super().__init__(make_url(nodes[index].url), **kwargs)
        self.nodes = nodes
        self.node = index
        """The place of the node connected to, or dialled next."""
        self.last_failure: str | None = None
        """Why the last attempt failed (`host:port: error`), until one succeeds."""
        self._on_node = False
        self._failures = 0
        self.reconnect_interval = 0

    @property
    def label(self) -> str:
        """`host:port` of the node connected to, or dialled next."""
        return self.nodes[self.node].label

    async def _on_connected(self) -> None:
        # aio-pika's part restores the channels and runs the reconnect callbacks; if it
        # raises, the attempt failed and the connection is closed again.
        await super()._on_connected()
        self._on_node, self._failures, self.last_failure = True, 0, None
        self.reconnect_interval = RECONNECT_FIRST  # a node that drops every connection at once
        self.nodes.connected(self.node)
        log.info("Connected to broker node %s.", self.label)

    async def _on_connection_close(self, closing: asyncio.Future[Any]) -> None:
        unplanned = not (self.close_called or self.is_closed)
        await super()._on_connection_close(closing)
        # Before the reconnect loop runs again: it has not been woken or resumed yet.
        if unplanned:
            self._move_on(_closing_error(closing))

    def _move_on(self, error: BaseException | None) -> None:
        """The connection to the current node was lost, or an attempt on it failed: the next
        attempt dials the node after it."""
        lost, self._on_node = self._on_node, False
        if not lost:
            self._failures += 1
            self.last_failure = f"{self.label}: {describe(error)}"
        self.reconnect_interval = self._backoff()
        following = self.nodes.after(self.node)
        if lost:
            log.warning(
                "Lost broker node %s (%s); reconnecting, to %s first.",
                self.label,
                describe(error),
                self.nodes[following].label,
            )
        elif len(self.nodes) > 1:
            log.warning("Broker node %s unreachable (%s); trying the next.", self.label, describe(error))
        self.node = following
        self.url = make_url(self.nodes[following].url)

    def _backoff(self) -> float:
        """Seconds to wait before the next attempt: none within a round of the nodes, then
        `RECONNECT_FIRST`, doubling up to `RECONNECT_MAX`."""
        rounds, within = divmod(self._failures, len(self.nodes))
        if self._failures == 0 or within:
            return 0
        return min(RECONNECT_FIRST * 2 ** (rounds - 1), RECONNECT_MAX)


def _closing_error(closing: asyncio.Future[Any]) -> BaseException | None:
    """Why a connection closed (or an attempt failed)."""
    if closing.cancelled():
        return asyncio.CancelledError()
    return closing.exception() if closing.done() else None


async def dial(nodes: Nodes, timeout: float, **kwargs: Any) -> ClusterConnection:
    """A connection to the first node that answers, each tried once in turn (`timeout` seconds
    each); `kwargs` go to every `ClusterConnection`.

    Raises:
        ConnectionError: none of several nodes answered; the message names each and its error.
        Exception: the one node did not answer (its own error, as aio-pika raised it).
    """
    failures: list[str] = []
    last: BaseException | None = None
    for index in nodes.in_turn():
        connection = ClusterConnection(nodes, index, **kwargs)
        try:
            await connection.connect(timeout=timeout)
        except (*CONNECTION_EXCEPTIONS, asyncio.TimeoutError) as error:
            await asyncio.shield(connection.close())
            failures.append(f"{nodes[index].label}: {describe(error)}")
            last = error
            continue
        except BaseException:
            await asyncio.shield(connection.close())
            raise
        return connection
    if len(nodes) == 1 and last is not None:
        raise last
    raise ConnectionError(f"none of its {len(nodes)} nodes answered ({'; '.join(failures)})")
