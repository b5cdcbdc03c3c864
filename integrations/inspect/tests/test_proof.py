"""Unit tests of the reply proof: vectors from known keys, every way a proof fails, the fleet
public key file, and the `verify_key` setting."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from conftest import prove_reply
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from airlock import client_for, fleet_approver, fleet_reviewer
from airlock._proto import airlock_pb2 as pb
from airlock.config import load_verify_key
from airlock.proof import FleetPublicKeys, MalformedReply, RunnerKeys, UnprovedReply, key_id, open_reply

FLEET_SECRET = X25519PrivateKey.from_private_bytes(bytes(range(32)))
RUNNER_SECRET = X25519PrivateKey.from_private_bytes(bytes(range(32, 64)))
FLEET_PUBLIC = bytes.fromhex("8f40c5adb68f25624ae5b214ea767a6ec94d829d3d7b5e1ad1ba6f3e2138285f")
FLEET_KEY_ID = "eedd883da0a94515"
RUNNER_PUBLIC = bytes.fromhex("358072d6365880d1aeea329adf9121383851ed21a28e3b75e965d0d2cd166254")
REQUEST = pb.Request(key=pb.CallKey(run_id="run", sample_id="s", epoch=1, tool_call_id="c1")).SerializeToString()
BODY = pb.ReplyBody(decision=pb.Decision(decision_id="d-1", decision=pb.DECISION_KIND_APPROVE))
ENCODED = BODY.SerializeToString()
PROOF = bytes.fromhex("06597df0a74520b893d081083878cadc053c0683e483a2974bebc0bf5b247340")
"""HMAC-SHA256 of `BODY` as the reply to `REQUEST`, under the key `FLEET_SECRET`'s public key
and `RUNNER_SECRET` agree on."""
ZERO_ID = key_id(bytes(32))
"""The id of a key of small order (all zeros)."""


def fleet_file(*secrets: X25519PrivateKey) -> str:
    lines = ["# the fleet's keys", ""]
    for secret in secrets:
        public = secret.public_key().public_bytes_raw()
        lines.append(f"airlock-fleet {key_id(public)} {public.hex()}  # since today")
    return "\n".join(lines) + "\n"


def runner(*secrets: X25519PrivateKey) -> RunnerKeys:
    return RunnerKeys(FleetPublicKeys.parse(fleet_file(*(secrets or (FLEET_SECRET,))), "fleet.pub"), RUNNER_SECRET)


def refused(reply: pb.Reply, request: bytes = REQUEST) -> str:
    with pytest.raises(UnprovedReply) as error:
        open_reply(reply.SerializeToString(), runner(), request)
    return str(error.value)


def test_the_vector_holds() -> None:
    keys = runner()
    assert FLEET_SECRET.public_key().public_bytes_raw() == FLEET_PUBLIC and key_id(FLEET_PUBLIC) == FLEET_KEY_ID
    assert keys.public == RUNNER_PUBLIC
    reply = prove_reply(FLEET_SECRET, RUNNER_PUBLIC, REQUEST, ENCODED)
    assert (reply.key_id, reply.proof) == (FLEET_KEY_ID, PROOF)
    assert open_reply(reply.SerializeToString(), keys, REQUEST) == BODY


def test_a_proof_for_another_request_is_refused() -> None:
    other = pb.Request(key=pb.CallKey(run_id="run", sample_id="s", epoch=1, tool_call_id="c2")).SerializeToString()
    reply = pb.Reply(body=ENCODED, key_id=FLEET_KEY_ID, proof=PROOF)
    assert refused(reply, other) == f"the proof by key {FLEET_KEY_ID} does not match"
    assert refused(prove_reply(FLEET_SECRET, RUNNER_PUBLIC, other, ENCODED)).endswith("does not match")


def test_a_proof_for_another_runner_is_refused() -> None:
    another = X25519PrivateKey.generate().public_key().public_bytes_raw()
    assert refused(prove_reply(FLEET_SECRET, another, REQUEST, ENCODED)).endswith("does not match")


def test_unsigned_and_unknown_keys_are_refused() -> None:
    assert refused(pb.Reply(body=ENCODED)) == "not signed"
    stranger = X25519PrivateKey.generate()
    reply = prove_reply(stranger, RUNNER_PUBLIC, REQUEST, ENCODED)
    assert refused(reply) == f"signed by unknown key {reply.key_id!r}"
    assert refused(pb.Reply(body=ENCODED, key_id=FLEET_KEY_ID)).endswith("does not match")
    assert refused(pb.Reply(body=ENCODED, key_id=FLEET_KEY_ID, proof=PROOF[:16])).endswith("does not match")


def test_a_tampered_body_is_refused() -> None:
    tampered = pb.ReplyBody(decision=pb.Decision(decision_id="d-1", decision=pb.DECISION_KIND_REJECT))
    reply = pb.Reply(body=tampered.SerializeToString(), key_id=FLEET_KEY_ID, proof=PROOF)
    assert refused(reply).endswith("does not match")
    flipped = bytearray(PROOF)
    flipped[0] ^= 1
    assert refused(pb.Reply(body=ENCODED, key_id=FLEET_KEY_ID, proof=bytes(flipped))).endswith("does not match")


def test_what_is_not_a_reply() -> None:
    with pytest.raises(UnprovedReply, match="not an airlock.v1.Reply"):
        open_reply(b"\xff\xff", runner(), REQUEST)
    with pytest.raises(MalformedReply, match="not an airlock.v1.Reply"):
        open_reply(b"\xff\xff", None, REQUEST)
    empty = prove_reply(FLEET_SECRET, RUNNER_PUBLIC, REQUEST, b"")
    with pytest.raises(MalformedReply, match="neither a decision nor an error"):
        open_reply(empty.SerializeToString(), runner(), REQUEST)


def test_without_keys_a_reply_is_taken_unproved() -> None:
    assert open_reply(pb.Reply(body=ENCODED).SerializeToString(), None, REQUEST) == BODY


def test_every_key_of_the_file_is_accepted_during_a_rotation() -> None:
    new = X25519PrivateKey.generate()
    keys = runner(FLEET_SECRET, new)
    for fleet in (FLEET_SECRET, new):
        reply = prove_reply(fleet, RUNNER_PUBLIC, REQUEST, ENCODED)
        assert open_reply(reply.SerializeToString(), keys, REQUEST) == BODY


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
        assert client_for("amqp://localhost", "p") is not verifying

    asyncio.run(run())
