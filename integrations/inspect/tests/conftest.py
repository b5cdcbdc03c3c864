"""What the tests share: the broker gate, an Airlock fleet on a unique prefix (`airlock
worker` processes started here, with keys made once per session), and external steps served
by the test itself (a person's answers signed as a reviewer service signs them), and an
`airlock reviewer` process with its HTTP API.

Tests that need the broker or the `airlock` binary skip without them, except under `CI`,
where they fail. The binary is `AIRLOCK_BIN` (the Rust test that runs this suite sets it) or
the workspace's `target/debug/airlock`.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import inspect
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aio_pika
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from airlock import FleetClient, client_for
from airlock._proto import airlock_pb2 as pb
from airlock.config import load_verify_key
from airlock.proof import key_id

REPO = Path(__file__).resolve().parents[3]
URL = os.environ.get("AIRLOCK_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f")
HANG_GUARD = 60.0
"""The longest any wait here may take before the test is declared hung (not a measure)."""


def unavailable(reason: str) -> None:
    """Skips the test, or fails it when `CI` is set."""
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def broker() -> str:
    """The broker URL, once it answered."""

    async def probe() -> None:
        connection = await aio_pika.connect(URL, timeout=5)
        await connection.close()

    try:
        asyncio.run(probe())
    except Exception as error:
        unavailable(f"no broker at AIRLOCK_AMQP_URL ({error!r})")
    return URL


@pytest.fixture(scope="session")
def airlock_bin() -> Path:
    """The `airlock` binary."""
    binary = Path(os.environ.get("AIRLOCK_BIN", REPO / "target" / "debug" / "airlock"))
    if not binary.is_file():
        unavailable(f"no airlock binary at {binary} (build it, or set AIRLOCK_BIN)")
    return binary


@pytest.fixture(scope="session")
def keys(airlock_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with a fleet key and a reviewer key (`airlock keys generate`)."""
    directory = tmp_path_factory.mktemp("keys") / "keys"
    subprocess.run(
        [str(airlock_bin), "keys", "generate", "--out", str(directory)], check=True, capture_output=True, timeout=60
    )
    return directory


HUMAN_ANSWER_DOMAIN = b"airlock/v1/human-answer"
"""The tag that starts the text a reviewer service signs."""


def read_secret(path: Path, tag: str) -> bytes:
    """The 32-byte seed of the one `tag` line of the secret key file at `path`."""
    [line] = [line.split() for line in path.read_text().splitlines() if line.startswith(f"{tag} ")]
    return bytes.fromhex(line[2])


def sign_human_answer(reviewer_key: Path, result: pb.StepResult) -> None:
    """Signs `result`'s answer as the reviewer service holding `reviewer_key` does: Ed25519
    over the domain tag, a zero byte, the SHA-256 of the task's seal and the encoded answer."""
    secret = Ed25519PrivateKey.from_private_bytes(read_secret(reviewer_key, "airlock-ed25519-secret"))
    text = HUMAN_ANSWER_DOMAIN + b"\x00" + hashlib.sha256(result.task.seal).digest() + result.answer.SerializeToString()
    result.signer_key_id = key_id(secret.public_key().public_bytes_raw())
    result.signature = secret.sign(text)


def fleet_secret(fleet_key: Path) -> X25519PrivateKey:
    """The fleet's secret key in the key file `fleet_key` (what only workers hold)."""
    return X25519PrivateKey.from_private_bytes(read_secret(fleet_key, "airlock-fleet-secret"))


def prove_reply(fleet: X25519PrivateKey, runner_public: bytes, request: bytes, body: bytes) -> pb.Reply:
    """`body` (an encoded ReplyBody) as the holder of the fleet key `fleet` proves it to the
    runner whose public key is `runner_public`, about `request` (its bytes as published),
    computed from the definition."""
    fleet_public = fleet.public_key().public_bytes_raw()
    shared = fleet.exchange(X25519PublicKey.from_public_bytes(runner_public))
    info = fleet_public + runner_public
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"airlock/v1/reply-key", info=info).derive(shared)
    text = b"airlock/v1/reply\x00" + hashlib.sha256(request).digest() + body
    return pb.Reply(body=body, key_id=key_id(fleet_public), proof=hmac.new(key, text, hashlib.sha256).digest())


def unique_prefix() -> str:
    """A fleet prefix no other test uses."""
    return f"test-py-{uuid.uuid4().hex[:12]}"


StepAnswerer = Callable[[Any], pb.StepAnswer | Awaitable[pb.StepAnswer]]
"""What an external step answers to a `StepTask` (or a person to a `HumanTask`), plain or
async."""


class Fleet:
    """A fleet on its own prefix: `airlock worker` processes signing with the keys in `keys`,
    the queues of the external steps the test serves, and everything deleted at the end."""

    def __init__(self, binary: Path, url: str, policy_dir: Path, keys: Path) -> None:
        self.binary = binary
        self.url = url
        self.prefix = unique_prefix()
        self.policy_dir = policy_dir
        self.keys = keys
        self.verify_key = str(keys / "fleet.pub")
        """What runners verify this fleet's replies with."""
        self.steps: list[str] = []
        self.pools: list[str] = []
        self.workers: list[subprocess.Popen[bytes]] = []
        self.servers: list[StepServer] = []

    def settings(self) -> dict[str, Any]:
        """The approver's and reviewer's parameters that reach this fleet, its replies verified."""
        return {"url": self.url, "prefix": self.prefix, "verify_key": self.verify_key}

    def client(self) -> FleetClient:
        """The running event loop's client of this fleet (the one its approvers use)."""
        return client_for(self.url, self.prefix, verify_key=load_verify_key(self.verify_key))

    def airlock(self, *args: str) -> None:
        """Runs an `airlock` command on this fleet's broker and prefix."""
        command = [str(self.binary), *args, "--amqp", self.url, "--prefix", self.prefix]
        subprocess.run(command, check=True, capture_output=True, timeout=HANG_GUARD)

    def start_worker(self, concurrency: int = 64) -> None:
        """Starts one more worker and waits until it consumes."""
        worker = subprocess.Popen(
            [
                str(self.binary),
                "worker",
                "--amqp",
                self.url,
                "--prefix",
                self.prefix,
                "--id",
                f"py-worker-{len(self.workers)}",
                "--concurrency",
                str(concurrency),
                "--policy-dir",
                str(self.policy_dir),
                "--signing-key",
                str(self.keys / "fleet.key"),
                "--reviewer-keys",
                str(self.keys / "reviewer.pub"),
            ],
            stdout=subprocess.DEVNULL,
        )
        self.workers.append(worker)
        wait_for_consumers(self.url, f"{self.prefix}.requests", len(self.workers))

    def serve(self, name: str, answer: StepAnswerer) -> None:
        """Serves the external step `name` with `answer`, from a thread of its own."""
        self.steps.append(name)
        self.airlock("topology", "apply", "--steps", name)
        server = StepServer(self.url, self.prefix, f"{self.prefix}.step.{name}", answer)
        server.start()
        self.servers.append(server)

    def serve_human(self, pool: str, answer: StepAnswerer) -> None:
        """Answers the human tasks of `pool` with `answer`, signed with the fleet's reviewer key
        (a reviewer service's part)."""
        self.pools.append(pool)
        self.airlock("topology", "apply", "--pools", pool)
        queue = f"{self.prefix}.human.{pool}"
        server = StepServer(self.url, self.prefix, queue, answer, reviewer_key=self.keys / "reviewer.key")
        server.start()
        self.servers.append(server)

    def stop_workers(self) -> None:
        """Stops every worker (SIGTERM, then SIGKILL if one hangs) and forgets them."""
        for worker in self.workers:
            worker.send_signal(signal.SIGTERM)
        for worker in self.workers:
            try:
                worker.wait(timeout=HANG_GUARD)
            except subprocess.TimeoutExpired:
                worker.kill()
        self.workers.clear()

    def close(self) -> None:
        """Stops the workers and step servers, and deletes the fleet's queues."""
        self.stop_workers()
        for server in self.servers:
            server.stop()
        steps = ["--steps", ",".join(self.steps)] if self.steps else []
        pools = ["--pools", ",".join(self.pools)] if self.pools else []
        self.airlock("topology", "delete", *steps, *pools)


@pytest.fixture
def fleet(broker: str, airlock_bin: Path, keys: Path, tmp_path: Path) -> Iterator[Fleet]:
    """A fleet with one worker; named policies live in `tmp_path / "policies"`."""
    policy_dir = tmp_path / "policies"
    policy_dir.mkdir()
    fleet = Fleet(airlock_bin, broker, policy_dir, keys)
    try:
        fleet.start_worker()
        yield fleet
    finally:
        fleet.close()


def wait_for_consumers(url: str, queue: str, count: int) -> None:
    """Waits until `queue` exists and has `count` consumers."""

    async def consumers() -> int:
        connection = await aio_pika.connect(url)
        try:
            channel = await connection.channel()
            declared = await channel.declare_queue(queue, passive=True)
            return declared.declaration_result.consumer_count or 0
        except aio_pika.exceptions.ChannelNotFoundEntity:
            return 0
        finally:
            await connection.close()

    deadline = time.monotonic() + HANG_GUARD
    while asyncio.run(consumers()) < count:
        assert time.monotonic() < deadline, f"{queue} never had {count} consumers"
        time.sleep(0.05)


class StepServer:
    """An external step: consumes its queue (`<prefix>.step.<name>`, or `<prefix>.human.<pool>`
    with a `reviewer_key` to sign with) and answers each task with a `StepResult` published to
    `<prefix>.route` under `results`, as a plugin or a reviewer service would."""

    def __init__(
        self, url: str, prefix: str, queue: str, answer: StepAnswerer, reviewer_key: Path | None = None
    ) -> None:
        self.url, self.prefix, self.queue, self.answer = url, prefix, queue, answer
        self.reviewer_key = reviewer_key
        self.tasks: list[pb.StepTask] = []
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(),), daemon=True)

    def start(self) -> None:
        self._thread.start()
        assert self._ready.wait(HANG_GUARD), f"the server of {self.queue} did not start"

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(HANG_GUARD)

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        connection = await aio_pika.connect(self.url)
        channel = await connection.channel(on_return_raises=True)
        queue = await channel.declare_queue(self.queue, passive=True)
        answers = await channel.get_exchange(f"{self.prefix}.answer")

        async def on_task(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            if self.reviewer_key is not None:
                human = pb.HumanTask.FromString(message.body)
                task, asked = human.task, human
            else:
                task = asked = pb.StepTask.FromString(message.body)
            self.tasks.append(task)
            started = int(time.time() * 1000)
            answer = self.answer(asked)
            if inspect.isawaitable(answer):
                answer = await answer
            answer.started_at_unix_ms, answer.answered_at_unix_ms = started, int(time.time() * 1000)
            result = pb.StepResult(task=task, answer=answer)
            if self.reviewer_key is not None:
                sign_human_answer(self.reviewer_key, result)
            await answers.publish(
                aio_pika.Message(result.SerializeToString(), correlation_id=message.correlation_id),
                routing_key="results",
                mandatory=True,
            )
            await message.ack()

        await queue.consume(on_task)
        self._ready.set()
        await self._stop.wait()
        await connection.close()


def rabbitmqctl(*args: str) -> str:
    """Runs `rabbitmqctl` (faults injected on the broker side) and returns its output."""
    return subprocess.run(["rabbitmqctl", *args], check=True, capture_output=True, text=True, timeout=HANG_GUARD).stdout


def close_connections(name: str) -> int:
    """Closes, on the broker, the connections whose name starts with `name` (what a network
    cut looks like to a client), leaving every other user of the broker alone."""
    listing = rabbitmqctl("list_connections", "-q", "--no-table-headers", "pid", "client_properties")
    ours = [line.split("\t", 1)[0] for line in listing.splitlines() if f'{{"connection_name","{name}' in line]
    for pid in ours:
        rabbitmqctl("close_connection", pid, "test")
    return len(ours)


def queues_named(prefix: str) -> list[str]:
    """The broker's queues whose names start with `prefix`."""
    listing = rabbitmqctl("list_queues", "-q", "--no-table-headers", "name")
    return [name for name in listing.split() if name.startswith(prefix)]


class Node:
    """A stand-in for one node of a cluster: forwards every connection to the test broker
    until stopped. Stopping it cuts its connections as a stopped node would, while the broker
    keeps the queues, so what is tested is the runner's side of a failover (which address it
    dials, and that it moves on), not the cluster's. Freezing it makes its connections silent
    (no byte moves, both sockets stay open: a half-open link) while new ones still pass. Runs
    on the test's event loop."""

    def __init__(self) -> None:
        parts = urlsplit(URL)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 5672)
        self._server: asyncio.AbstractServer | None = None
        self._streams: set[asyncio.StreamWriter] = set()
        self._moving: set[asyncio.Event] = set()
        """One per forwarded connection: set while its bytes move."""
        self._frozen: set[asyncio.Event] = set()
        self.port = 0
        self.connections = 0
        """Connections forwarded now."""

    @property
    def url(self) -> str:
        """The test broker's URL, credentials included, with this node's address."""
        parts = urlsplit(URL)
        credentials = parts.netloc.rpartition("@")[0]
        return urlunsplit(parts._replace(netloc=f"{credentials}@127.0.0.1:{self.port}"))

    @property
    def label(self) -> str:
        """`host:port`, as the runner logs it."""
        return f"127.0.0.1:{self.port}"

    async def start(self) -> Node:
        """Listens (on the port of an earlier start, if any) and forwards."""
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        """Stops listening and cuts every forwarded connection."""
        assert self._server is not None
        self._server.close()
        for stream in list(self._streams):
            stream.transport.abort()
        for moving in self._frozen:
            moving.set()
        await self._server.wait_closed()

    def freeze(self) -> None:
        """Stops moving the bytes of every connection forwarded now, leaving their sockets open;
        later connections are forwarded as before."""
        for moving in self._moving:
            moving.clear()
        self._frozen |= self._moving
        self._moving = set()

    async def _forward(self, client_reader: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
        try:
            broker_reader, broker = await asyncio.open_connection(*self._upstream)
        except OSError:
            client.transport.abort()
            return
        moving = asyncio.Event()
        moving.set()
        self._streams |= {client, broker}
        self._moving.add(moving)
        self.connections += 1
        try:
            await asyncio.gather(_pipe(client_reader, broker, moving), _pipe(broker_reader, client, moving))
        finally:
            self.connections -= 1
            self._streams -= {client, broker}
            self._moving.discard(moving)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, moving: asyncio.Event) -> None:
    """Copies `reader` to `writer` while `moving` is set, until either side ends, then ends
    the other."""
    try:
        while (await moving.wait()) and (data := await reader.read(65536)):
            await moving.wait()
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.transport.abort()


async def dead_url() -> str:
    """The test broker's URL with an address nothing listens on."""
    node = await Node().start()
    await node.stop()
    return node.url


def connections_named(name: str) -> int:
    """How many of the broker's connections are named exactly `name`."""
    listing = rabbitmqctl("list_connections", "-q", "--no-table-headers", "client_properties")
    return sum(f'{{"connection_name","{name}"}}' in line for line in listing.splitlines())


# === a reviewer service ===

REVIEWER_ID = "py-reviewer"


@pytest.fixture
def reviewer(fleet: Fleet, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """An `airlock reviewer` process serving the fleet's pool `ops` from its own SQLite file:
    its API's address and the token of alice, its one reviewer. Stopped (SIGTERM) before the
    fleet, whose deletion takes the pool's queue along."""
    tokens = tmp_path / "reviewers.yaml"
    added = subprocess.run(
        [str(fleet.binary), "reviewer", "add-token", "--tokens", str(tokens), "--name", "alice", "--pools", "ops"],
        check=True,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
    )
    token = added.stdout.strip()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    fleet.pools.append("ops")
    service = subprocess.Popen(
        [
            str(fleet.binary),
            "reviewer",
            "--amqp",
            fleet.url,
            "--prefix",
            fleet.prefix,
            "--store",
            f"sqlite:{tmp_path / 'reviewer.db'}",
            "--listen",
            f"127.0.0.1:{port}",
            "--pools",
            "ops",
            "--tokens",
            str(tokens),
            "--id",
            REVIEWER_ID,
            "--signing-key",
            str(fleet.keys / "reviewer.key"),
        ],
        stdout=subprocess.DEVNULL,
    )
    api = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + HANG_GUARD
        while not answers_health(api):
            assert service.poll() is None, f"the reviewer service exited ({service.returncode})"
            assert time.monotonic() < deadline, "the reviewer service never answered /healthz"
            time.sleep(0.05)
        wait_for_consumers(fleet.url, f"{fleet.prefix}.human.ops", 1)
        yield api, token
    finally:
        service.send_signal(signal.SIGTERM)
        try:
            service.wait(timeout=HANG_GUARD)
        except subprocess.TimeoutExpired:
            service.kill()
        asyncio.run(delete_queue(fleet.url, f"{fleet.prefix}.reply.{REVIEWER_ID}"))


def answers_health(api: str) -> bool:
    try:
        with urllib.request.urlopen(f"{api}/healthz", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


async def delete_queue(url: str, name: str) -> None:
    """Deletes the reviewer's queue of cancels (not part of `topology delete`)."""
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel()
        await channel.queue_delete(name)
    finally:
        await connection.close()


def call_api(api: str, token: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """A request to the reviewer's API as the bearer of `token`: GET, or POST of `body`."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    with urllib.request.urlopen(urllib.request.Request(api + path, data, headers), timeout=HANG_GUARD) as response:
        return json.load(response)
