"""Where the broker is: one AMQP URL, or the comma-separated URLs of a cluster's nodes (one
user and vhost), as the Rust roles take them. The native client dials them (starting at a node
picked at random, moving on to the next when its node is lost); they are checked here, when
the approver is made, and named without their credentials in explanations.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

DEFAULT_PORTS = {"amqp": 5672, "amqps": 5671}
"""The port of each scheme when a URL names none."""


@dataclass(frozen=True)
class Node:
    """One node of the broker."""

    url: str
    """Its AMQP URL, credentials included."""
    label: str
    """`host:port`, for logs and explanations (the URL carries the password)."""


class Nodes:
    """The nodes of the broker."""

    def __init__(self, nodes: list[Node], user: str) -> None:
        self._nodes = nodes
        self.user = user
        """The broker user every node is reached as (`guest` when the URLs name none)."""

    @classmethod
    def parse(cls, urls: str) -> Nodes:
        """The nodes `urls` lists, comma-separated. Every node must name the same user and
        vhost: the runner is one identity on one cluster.

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
        return cls(nodes, user=first[0])

    @property
    def schemes(self) -> set[str]:
        """The URL schemes of the nodes (`amqp`, `amqps`)."""
        return {urlsplit(node.url).scheme for node in self._nodes}

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
