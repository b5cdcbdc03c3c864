"""The fleet's public keys, whose proofs over its replies the runner checks.

The broker routes but does not vouch: anyone who may publish to a runner's reply queue could
answer in the fleet's name. So a runner that holds the fleet's public keys (`fleet.pub`)
makes an ephemeral X25519 key per client and sends its public half with every request
(`Request.runner_key`). Per fleet key, both sides agree on a reply key (X25519, then
HKDF-SHA256 over the fleet's and the runner's public keys), and a worker proves each reply
with HMAC-SHA256 over `airlock/v1/reply`, a zero byte, the SHA-256 of the request exactly as
the runner published it, and the reply's body. Nothing another runner holds makes that
proof, and a reply proved for one request does not hold for another. The native client
checks the proofs (Airlock's Rust client, as every runner does); the file is read here, so
that a bad one fails when the approver is made.

Without the fleet's public keys a runner would take a decision anyone made, so it does not
start unless told `insecure` in so many words (`INSECURE`: `insecure=True`, or
`AIRLOCK_INSECURE=1`), and then it warns at every start.

A public key file is text, one key per line, comments after `#`:
`airlock-fleet <key id> <32-byte X25519 public key, hex>`. Several keys are all accepted
(during a rotation). A key id is the first 8 bytes of the key's SHA-256, in hex.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

FLEET_TAG = "airlock-fleet"
"""The tag of a line of a fleet public key file."""


def key_id(public: bytes) -> str:
    """The id of a public key: the first 8 bytes of its SHA-256, in hex."""
    return hashlib.sha256(public).digest()[:8].hex()


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

    def text(self) -> str:
        """The keys as a public key file's text."""
        return "".join(f"{FLEET_TAG} {kid} {public.hex()}\n" for kid, public in self.keys)


@dataclass(frozen=True)
class Insecure:
    """Replies taken unproved, as from a fleet that runs `--insecure-unsigned`: anyone who can
    publish to the runner's reply queue can forge a decision, and it is taken as the fleet's.
    Only ever chosen explicitly (see `INSECURE`)."""


INSECURE = Insecure()
"""The explicit choice to take replies unproved."""

Proof = FleetPublicKeys | Insecure
"""How a runner takes replies: proved by the fleet's public keys, or (chosen) unproved."""


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
