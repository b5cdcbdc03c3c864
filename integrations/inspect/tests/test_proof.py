"""The fleet public key file, the `verify_key` setting and the explicit choice to run
`insecure` without it. The proofs themselves are checked by
the native client (Airlock's Rust client, whose tests cover every way a proof fails); the
tests against a broker (`test_client`, `test_notify`) send it forged replies."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from airlock import INSECURE, FleetClient, _native, client_for, fleet_approver, fleet_reviewer
from airlock.config import FleetSettings, load_verify_key
from airlock.proof import FleetPublicKeys, key_id

FLEET_SECRET = X25519PrivateKey.from_private_bytes(bytes(range(32)))
FLEET_PUBLIC = bytes.fromhex("8f40c5adb68f25624ae5b214ea767a6ec94d829d3d7b5e1ad1ba6f3e2138285f")
FLEET_KEY_ID = "eedd883da0a94515"
ZERO_ID = key_id(bytes(32))
"""The id of a key of small order (all zeros)."""


def fleet_file(*secrets: X25519PrivateKey) -> str:
    lines = ["# the fleet's keys", ""]
    for secret in secrets:
        public = secret.public_key().public_bytes_raw()
        lines.append(f"airlock-fleet {key_id(public)} {public.hex()}  # since today")
    return "\n".join(lines) + "\n"


def test_a_key_id_is_its_keys() -> None:
    assert FLEET_SECRET.public_key().public_bytes_raw() == FLEET_PUBLIC and key_id(FLEET_PUBLIC) == FLEET_KEY_ID


def test_every_key_of_the_file_is_kept_and_written_back() -> None:
    new = X25519PrivateKey.generate()
    keys = FleetPublicKeys.parse(fleet_file(FLEET_SECRET, new, FLEET_SECRET), "fleet.pub")
    assert [kid for kid, _ in keys.keys] == [FLEET_KEY_ID, key_id(new.public_key().public_bytes_raw())]
    assert FleetPublicKeys.parse(keys.text(), "again") == FleetPublicKeys("again", keys.keys)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            f"airlock-fleet 0000000000000000 {FLEET_PUBLIC.hex()}\n",
            f"fleet.pub:1: key id 0000000000000000 does not belong to its key (which is {FLEET_KEY_ID})",
        ),
        (f"\nairlock-fleet {FLEET_KEY_ID} {FLEET_PUBLIC.hex()[:-2]}\n", "fleet.pub:2: the key is not 64 hex digits"),
        (f"airlock-fleet {FLEET_KEY_ID} {'zz' * 32}\n", "fleet.pub:1: the key is not 64 hex digits"),
        (
            f"airlock-ed25519 {FLEET_KEY_ID} {FLEET_PUBLIC.hex()}\n",
            "fleet.pub:1: expected 'airlock-fleet <key id> <hex>'",
        ),
        (f"airlock-fleet {FLEET_PUBLIC.hex()}\n", "fleet.pub:1: expected 'airlock-fleet <key id> <hex>'"),
        (f"airlock-fleet {ZERO_ID} {bytes(32).hex()}\n", f"fleet.pub:1: key {ZERO_ID} is of small order"),
        ("# nothing yet\n\n", "fleet.pub: no key in it"),
    ],
)
def test_a_malformed_fleet_key_file_is_refused(text: str, problem: str) -> None:
    with pytest.raises(ValueError) as error:
        FleetPublicKeys.parse(text, "fleet.pub")
    assert str(error.value) == problem


def test_verify_key_is_checked_when_the_approver_is_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = tmp_path / "fleet.pub"
    good.write_text(fleet_file(FLEET_SECRET))
    bad = tmp_path / "bad.pub"
    bad.write_text(f"airlock-fleet 0000000000000000 {FLEET_PUBLIC.hex()}\n")
    settings = dict(url="amqp://localhost", policy="strict")
    with pytest.raises(FileNotFoundError, match="verify key file /nonexistent/fleet.pub does not exist"):
        fleet_approver(**settings, verify_key="/nonexistent/fleet.pub")
    with pytest.raises(ValueError, match=f"airlock/fleet: verify key file {bad}:1: key id 0000000000000000 does not"):
        fleet_reviewer(**settings, verify_key=str(bad))
    binary = tmp_path / "binary.pub"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(ValueError, match="not a text file"):
        fleet_approver(**settings, verify_key=str(binary))
    monkeypatch.setenv("AIRLOCK_VERIFY_KEY", str(bad))
    with pytest.raises(ValueError, match="does not belong to its key"):
        fleet_approver(**settings)
    monkeypatch.setenv("AIRLOCK_VERIFY_KEY", str(good))
    fleet_approver(**settings)
    fleet_reviewer(**settings)
    assert load_verify_key(str(good)) == FleetPublicKeys(str(good), ((FLEET_KEY_ID, FLEET_PUBLIC),))


def test_clients_differ_by_verify_key(tmp_path: Path) -> None:
    path = tmp_path / "fleet.pub"
    path.write_text(fleet_file(FLEET_SECRET))

    async def run() -> None:
        keys = load_verify_key(str(path))
        verifying = client_for("amqp://localhost", "p", verify_key=keys)
        assert client_for("amqp://localhost", "p", verify_key=load_verify_key(str(path))) is verifying
        assert client_for("amqp://localhost", "p", verify_key=INSECURE) is not verifying

    asyncio.run(run())


def test_a_runner_without_the_fleets_key_refuses_to_be_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither a key nor `insecure`: the approver and the reviewer are not made (so nothing is
    ever asked), and the message says what to pass and what insecure means."""
    monkeypatch.delenv("AIRLOCK_VERIFY_KEY", raising=False)
    monkeypatch.delenv("AIRLOCK_INSECURE", raising=False)
    for make in (fleet_approver, fleet_reviewer):
        with pytest.raises(ValueError) as refused:
            make(url="amqp://localhost", policy="strict")
        message = str(refused.value)
        assert "pass verify_key=<fleet.pub> or set AIRLOCK_VERIFY_KEY" in message, message
        assert "insecure=True (or AIRLOCK_INSECURE=1)" in message and "insecure accepts forged decisions" in message
    # Told no, the environment's yes does not count.
    monkeypatch.setenv("AIRLOCK_INSECURE", "1")
    with pytest.raises(ValueError, match="insecure accepts forged decisions"):
        fleet_approver(url="amqp://localhost", policy="strict", insecure=False)
    # The client and the native module have no default either.
    with pytest.raises(ValueError, match="verify_key=INSECURE"):
        FleetClient("amqp://localhost", "p")
    with pytest.raises(ValueError, match="insecure accepts forged decisions"):
        asyncio.run(_client_for_without_a_key())
    with pytest.raises(ValueError, match="insecure=True to take replies unproved"):
        _native.Client("amqp://localhost", "amqp://localhost", "p", "r", "n")


async def _client_for_without_a_key() -> None:
    client_for("amqp://localhost", "p")


def test_insecure_is_chosen_in_so_many_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`insecure=True` or `AIRLOCK_INSECURE=1` makes a runner that takes replies unproved; any
    other value of the variable, or a key as well, is refused."""
    good = tmp_path / "fleet.pub"
    good.write_text(fleet_file(FLEET_SECRET))
    monkeypatch.delenv("AIRLOCK_VERIFY_KEY", raising=False)
    monkeypatch.delenv("AIRLOCK_INSECURE", raising=False)
    resolve = FleetSettings.resolve
    assert resolve("amqp://localhost", None, "strict", None, 0, insecure=True).verify_key is INSECURE
    with pytest.raises(ValueError, match="exclude each other"):
        resolve("amqp://localhost", None, "strict", None, 0, verify_key=str(good), insecure=True)
    monkeypatch.setenv("AIRLOCK_INSECURE", "yes")
    with pytest.raises(ValueError, match="AIRLOCK_INSECURE must be 0 or 1, got 'yes'"):
        fleet_approver(url="amqp://localhost", policy="strict")
    monkeypatch.setenv("AIRLOCK_INSECURE", "0")
    with pytest.raises(ValueError, match="needs the fleet's public key"):
        fleet_approver(url="amqp://localhost", policy="strict")
    monkeypatch.setenv("AIRLOCK_INSECURE", "1")
    assert resolve("amqp://localhost", None, "strict", None, 0).verify_key is INSECURE
    fleet_reviewer(url="amqp://localhost", policy="strict")
    assert resolve("amqp://localhost", None, "strict", None, 0, verify_key=str(good), insecure=False).verify_key == (
        load_verify_key(str(good))
    )
