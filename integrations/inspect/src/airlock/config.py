"""The parameters of `airlock/fleet`, with their environment defaults, checked once when the
approver or reviewer is created (a bad configuration fails the eval at its start, as a bad
Inspect policy does, never a sample in the middle of it)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from inspect_ai._util.package import get_installed_package_name

from ._proto import airlock_pb2 as pb
from .nodes import Nodes
from .proof import INSECURE, FleetPublicKeys, Proof

ENV_URL = "AIRLOCK_AMQP_URL"
"""The broker, e.g. `amqp://guest:guest@127.0.0.1:5672/%2f`, or the comma-separated URLs of a
cluster's nodes."""
ENV_PREFIX = "AIRLOCK_PREFIX"
"""The fleet's prefix."""
ENV_POLICY = "AIRLOCK_POLICY"
"""An Inspect policy file (sent with each request) or the name of a policy the workers hold."""
ENV_TIMEOUT = "AIRLOCK_TIMEOUT"
"""Seconds a request may wait for its decision."""
ENV_CA_FILE = "AIRLOCK_CA_FILE"
"""A PEM file of CA certificates an `amqps://` broker's certificate is verified against."""
ENV_VERIFY_KEY = "AIRLOCK_VERIFY_KEY"
"""The fleet's public key file (`fleet.pub`): replies are taken only with its proof."""
ENV_INSECURE = "AIRLOCK_INSECURE"
"""`1`: take replies unproved, with no fleet public key (`0` or unset: a key is required)."""
ENV_GENERATION = "AIRLOCK_GENERATION"
"""`1`: approval requests carry how the model was asked and the whole history (`0` or unset:
they do not)."""
ENV_REVIEWER_URL = "AIRLOCK_REVIEWER_URL"
"""The reviewer UI's address: pages about a call waiting for a person link to its task there."""


def _registered_name(name: str) -> str:
    """The name to register `name` under so that Inspect finds it as `airlock/<name>`.

    Inspect prefixes a registered name with the import package when it can tell that the
    package is installed: from site-packages, or editable under a distribution named like
    the package. The distribution is `inspect-airlock` (the name `airlock` on the package
    index is another project's), so an editable install gets no prefix and writes it out.
    """
    return name if get_installed_package_name(_registered_name) == "airlock" else f"airlock/{name}"


FLEET = _registered_name("fleet")
"""What `airlock/fleet` is registered as (see `_registered_name`)."""

DEFAULT_PREFIX = "airlock"
"""The prefix of a fleet that does not choose one (as `airlock worker`)."""
DEFAULT_TIMEOUT = 600.0
"""Seconds a request waits by default: long enough for a person in the chain."""
DEFAULT_HISTORY_BYTES = 256 * 1024
"""How much conversation history a request carries by default (encoded size)."""


@dataclass(frozen=True)
class FleetSettings:
    """Where the fleet is, what it decides by, and how long to wait for it."""

    url: str
    """The broker's AMQP URL, or the comma-separated URLs of a cluster's nodes (one user and
    vhost)."""
    prefix: str
    """The fleet's prefix: every queue and exchange name starts with it."""
    policy: pb.Policy
    """The policy sent with every request (inline document or name)."""
    timeout: float
    """Seconds a request may wait for its decision."""
    history_bytes: int | None
    """The most conversation history a request carries, in encoded bytes; `None`: all of it."""
    verify_key: Proof
    """The fleet keys every reply must be proved by, or `INSECURE` (chosen with `insecure`):
    replies are taken unchecked."""
    ca_file: str | None = None
    """CA certificates (PEM) an `amqps://` broker's certificate is verified against, besides
    the system's."""
    reviewer_url: str | None = None
    """The reviewer UI's address (no trailing `/`), which the link in a page about a call
    waiting for a person starts with; `None`: the page names the pool and the call only."""
    generation: bool = False
    """Approval requests carry how the model was asked for the call (its name, generate
    config and tools), for steps that ask a model for a call of their own."""

    @classmethod
    def resolve(
        cls,
        url: str | None,
        prefix: str | None,
        policy: str | None,
        timeout: float | None,
        history_bytes: int | None,
        ca_file: str | None = None,
        verify_key: str | None = None,
        reviewer_url: str | None = None,
        insecure: bool | None = None,
        generation: bool | None = None,
    ) -> FleetSettings:
        """Fills what was not given from the environment and checks everything. The history
        is bounded by `DEFAULT_HISTORY_BYTES` unless `history_bytes` is given, or `generation`
        is on: a model asked again needs the whole conversation.

        Raises:
            ValueError: a parameter is missing or out of range, the URL (or a node of its
                list) is invalid or the nodes name different users or vhosts,
                `verify_key` is not a readable fleet public key file, neither `verify_key`
                nor `insecure` is given (or both are), `AIRLOCK_INSECURE` is neither `0`
                nor `1`, or `reviewer_url` is not an `http(s)://` address without query or
                fragment, or `AIRLOCK_GENERATION` is neither `0` nor `1`.
            FileNotFoundError: `policy` names a file (it has a `/`) that does not exist, or
                `ca_file` or `verify_key` does not exist.
        """
        url = url or os.environ.get(ENV_URL)
        if not url:
            raise ValueError(f"airlock/fleet needs a broker: pass url= or set {ENV_URL}")
        try:
            nodes = Nodes.parse(url)
        except ValueError as error:
            raise ValueError(f"airlock/fleet: {error}") from None
        policy = policy or os.environ.get(ENV_POLICY)
        if not policy:
            raise ValueError(f"airlock/fleet needs a policy: pass policy= or set {ENV_POLICY}")
        if timeout is None:
            timeout = float(os.environ.get(ENV_TIMEOUT, DEFAULT_TIMEOUT))
        if not timeout > 0:
            raise ValueError(f"airlock/fleet: timeout must be positive, got {timeout}")
        if generation is None:
            generation = flag_from_env(ENV_GENERATION)
        if history_bytes is None and not generation:
            history_bytes = DEFAULT_HISTORY_BYTES
        if history_bytes is not None and history_bytes < 0:
            raise ValueError(f"airlock/fleet: history_bytes must not be negative, got {history_bytes}")
        ca_file = ca_file or os.environ.get(ENV_CA_FILE) or None
        if ca_file is not None:
            if nodes.schemes != {"amqps"}:
                raise ValueError(f"airlock/fleet: a CA file ({ca_file}) is given but a broker URL is not amqps://")
            if not Path(ca_file).is_file():
                raise FileNotFoundError(f"airlock/fleet: CA file {ca_file} does not exist")
        verify_key = verify_key or os.environ.get(ENV_VERIFY_KEY) or None
        proof = resolve_proof(verify_key, flag_from_env(ENV_INSECURE) if insecure is None else insecure)
        return cls(
            url=url,
            prefix=prefix or os.environ.get(ENV_PREFIX) or DEFAULT_PREFIX,
            policy=load_policy(policy),
            timeout=float(timeout),
            history_bytes=history_bytes,
            ca_file=ca_file,
            verify_key=proof,
            reviewer_url=check_reviewer_url(reviewer_url or os.environ.get(ENV_REVIEWER_URL) or None),
            generation=generation,
        )


def check_reviewer_url(url: str | None) -> str | None:
    """`url` without its trailing `/`, once it is an `http://` or `https://` address with a
    host and without query or fragment (a task's link is appended to it).

    Raises:
        ValueError: it is not.
    """
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"airlock/fleet: reviewer_url must be an http(s):// address without query or fragment: {url}")
    return url.rstrip("/")


NO_VERIFY_KEY = (
    f"airlock/fleet needs the fleet's public key: pass verify_key=<fleet.pub> or set {ENV_VERIFY_KEY}, so that only "
    f"decisions the fleet proved are taken; or insecure=True (or {ENV_INSECURE}=1) to take them unproved "
    "(insecure accepts forged decisions)"
)
"""What a runner given neither a fleet public key nor `insecure` is told."""


def flag_from_env(name: str) -> bool:
    """Whether the environment variable `name` is on (`1`; `0` or unset: off).

    Raises:
        ValueError: it is set to anything else.
    """
    value = os.environ.get(name, "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"airlock/fleet: {name} must be 0 or 1, got '{value}'")
    return value == "1"


def resolve_proof(verify_key: str | None, insecure: bool) -> Proof:
    """The fleet public keys in the file `verify_key`, or `INSECURE` when told `insecure`.

    Raises:
        ValueError: neither is given, or both are; the file is not a fleet public key file.
        FileNotFoundError: there is no file at `verify_key`.
    """
    if verify_key is not None and insecure:
        raise ValueError(
            f"airlock/fleet: a verify key ({verify_key}) and insecure exclude each other: drop insecure, "
            "or the key to run unproved"
        )
    if verify_key is not None:
        return load_verify_key(verify_key)
    if insecure:
        return INSECURE
    raise ValueError(NO_VERIFY_KEY)


def load_verify_key(path: str) -> FleetPublicKeys:
    """The fleet public keys in the file at `path`.

    Raises:
        FileNotFoundError: there is no file at `path`.
        ValueError: it cannot be read or is not a valid fleet public key file.
    """
    if not Path(path).is_file():
        raise FileNotFoundError(f"airlock/fleet: verify key file {path} does not exist")
    try:
        return FleetPublicKeys.load(path)
    except OSError as error:
        raise ValueError(f"airlock/fleet: verify key file {path} cannot be read: {error.strerror}") from None
    except ValueError as error:
        raise ValueError(f"airlock/fleet: verify key file {error}") from None


def load_policy(policy: str) -> pb.Policy:
    """The wire policy for `policy`: an existing file is sent inline with its digest (sha256
    of its text, as the workers compute it); a bare name (no `/`) that is not a file names a
    policy the workers hold in their policy directory.

    Raises:
        FileNotFoundError: `policy` contains a `/` and is not a file.
    """
    path = Path(policy)
    if path.is_file():
        text = path.read_bytes().decode("utf-8")
        return pb.Policy(inline=text, digest=hashlib.sha256(text.encode("utf-8")).hexdigest())
    if "/" in policy or os.sep in policy:
        raise FileNotFoundError(f"Airlock policy file not found: {policy}")
    return pb.Policy(name=policy)
