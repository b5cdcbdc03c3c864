"""The fleet's proof over its replies, checked by the runner that asked.

The broker routes but does not vouch: anyone who may publish to a runner's reply queue could
answer in the fleet's name. So a runner that holds the fleet's public keys (`fleet.pub`)
makes an ephemeral X25519 key per client and sends its public half with every request
(`Request.runner_key`). Per fleet key, both sides agree on a reply key (X25519, then
HKDF-SHA256 over the fleet's and the runner's public keys), and a worker proves each reply
with HMAC-SHA256 over `airlock/v1/reply`, a zero byte, the SHA-256 of the request exactly as
the runner published it, and the reply's body. Nothing another runner holds makes that
proof, and a reply proved for one request does not hold for another.

A public key file is text, one key per line, comments after `#`:
`airlock-fleet <key id> <32-byte X25519 public key, hex>`. Several keys are all accepted
(during a rotation). A key id is the first 8 bytes of the key's SHA-256, in hex.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from google.protobuf.message import DecodeError

from ._proto import airlock_pb2 as pb

FLEET_TAG = "airlock-fleet"
"""The tag of a line of a fleet public key file."""
REPLY_KEY_SALT = b"airlock/v1/reply-key"
"""The HKDF salt of a reply key."""
REPLY_DOMAIN = b"airlock/v1/reply"
"""The tag that starts the text a reply proof covers."""


class UnprovedReply(Exception):
    """A reply whose proof does not hold for this runner and request."""


class MalformedReply(Exception):
    """A message that is not an `airlock.v1.Reply` with a `ReplyBody` that says something."""


def key_id(public: bytes) -> str:
    """The id of a public key: the first 8 bytes of its SHA-256, in hex."""
    return hashlib.sha256(public).digest()[:8].hex()


def bound_text(domain: bytes, digest: bytes, payload: bytes) -> bytes:
    """What a proof or signature covers: the domain's tag, a zero byte, a digest, the payload."""
    return domain + b"\x00" + digest + payload


@dataclass(frozen=True)
class FleetPublicKeys:
    """The fleet keys whose proofs a runner accepts, read from a public key file."""

    source: str
    """The file they were read from."""
    keys: tuple[tuple[str, bytes], ...]
    """Each key's id and its 32 bytes, in file order."""

    @classmethod
    def load(cls, path: str | Path) -> FleetPublicKeys:
        """Reads the public key file at `path`.

        Raises:
            OSError: the file cannot be read.
            ValueError: it is not a fleet public key file, or a key is wrong (see `parse`).
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{path}: not a text file ({error.reason})") from None
        return cls.parse(text, str(path))

    @classmethod
    def parse(cls, text: str, source: str) -> FleetPublicKeys:
        """The keys of a public key file's text; `source` names it in errors.

        Raises:
            ValueError: a line is not `airlock-fleet <key id> <64 hex digits>`, a key id is
                not its key's, a key is of small order, or there is no key.
        """
        keys: list[tuple[str, bytes]] = []
        for number, line in enumerate(text.splitlines(), start=1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            if len(fields) != 3 or fields[0] != FLEET_TAG:
                raise ValueError(f"{source}:{number}: expected '{FLEET_TAG} <key id> <hex>'")
            written_id, digits = fields[1], fields[2]
            public = _unhex32(digits)
            if public is None:
                raise ValueError(f"{source}:{number}: the key is not 64 hex digits")
            if written_id != key_id(public):
                raise ValueError(
                    f"{source}:{number}: key id {written_id} does not belong to its key (which is {key_id(public)})"
                )
            if _is_weak(public):
                raise ValueError(f"{source}:{number}: key {written_id} is of small order")
            if (written_id, public) not in keys:
                keys.append((written_id, public))
        if not keys:
            raise ValueError(f"{source}: no key in it")
        return cls(source=source, keys=tuple(keys))


class RunnerKeys:
    """A runner's side: an ephemeral X25519 key, whose public half every request carries, and
    the reply key agreed with each fleet key."""

    def __init__(self, fleet: FleetPublicKeys, secret: X25519PrivateKey | None = None) -> None:
        secret = secret or X25519PrivateKey.generate()
        self.public = secret.public_key().public_bytes_raw()
        """The runner's public key (32 bytes), sent as `Request.runner_key`."""
        self._reply_keys = {kid: reply_key(secret, fleet_public, self.public) for kid, fleet_public in fleet.keys}

    def verify(self, request: bytes, reply: pb.Reply) -> None:
        """Checks that `reply` is proved by a fleet key as the reply to `request` (its bytes
        exactly as published).

        Raises:
            UnprovedReply: it is unsigned, names an unknown key, or its proof does not match.
        """
        if not reply.key_id and not reply.proof:
            raise UnprovedReply("not signed")
        key = self._reply_keys.get(reply.key_id)
        if key is None:
            raise UnprovedReply(f"signed by unknown key {reply.key_id[:64]!r}")
        text = bound_text(REPLY_DOMAIN, hashlib.sha256(request).digest(), reply.body)
        if not hmac.compare_digest(hmac.new(key, text, hashlib.sha256).digest(), reply.proof):
            raise UnprovedReply(f"the proof by key {reply.key_id} does not match")


def reply_key(secret: X25519PrivateKey, fleet_public: bytes, runner_public: bytes) -> bytes:
    """The reply key `secret` (the runner's) agrees with the fleet key `fleet_public`.

    Raises:
        ValueError: the agreement is all zeros (a fleet key of small order).
    """
    shared = secret.exchange(X25519PublicKey.from_public_bytes(fleet_public))
    if not any(shared):
        raise ValueError("the fleet key is of small order")
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=REPLY_KEY_SALT, info=fleet_public + runner_public)
    return hkdf.derive(shared)


def open_reply(message: bytes, runner: RunnerKeys | None, request: bytes) -> pb.ReplyBody:
    """What the `Reply` in `message` says, once its proof holds for `runner` and `request`
    (the request's bytes exactly as published); without `runner` it is taken unproved.

    A `progress` (the call waits for a person) is returned unproved: the reviewer service
    that sends it holds no fleet key, and it decides nothing. It must never settle a call,
    and nothing it names may be trusted beyond that.

    Raises:
        UnprovedReply: `runner` is given and the message is not a `Reply` it can verify.
        MalformedReply: the message (or, once proved, its body) says nothing readable.
    """
    try:
        reply = pb.Reply.FromString(message)
    except DecodeError:
        if runner is not None:
            raise UnprovedReply("not an airlock.v1.Reply") from None
        raise MalformedReply("not an airlock.v1.Reply") from None
    try:
        body: pb.ReplyBody | None = pb.ReplyBody.FromString(reply.body)
    except DecodeError:
        body = None
    if body is not None and body.HasField("progress"):
        return body
    if runner is not None:
        runner.verify(request, reply)
    if body is None:
        raise MalformedReply("the reply's body is not an airlock.v1.ReplyBody")
    if body.WhichOneof("body") is None:
        raise MalformedReply("the reply has neither a decision nor an error")
    return body


def _unhex32(digits: str) -> bytes | None:
    if len(digits) != 64:
        return None
    try:
        return bytes.fromhex(digits)
    except ValueError:
        return None


def _is_weak(public: bytes) -> bool:
    """Whether agreeing with `public` gives all zeros whatever the secret (small order)."""
    try:
        return not any(X25519PrivateKey.generate().exchange(X25519PublicKey.from_public_bytes(public)))
    except ValueError:
        return True
