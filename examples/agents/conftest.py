"""What the examples' tests share: a fleet on a unique prefix (one `airlock worker` holding
the policies of `policies/`, one `airlock gateway` in front of it), started once per session from
this build's `airlock`, with its own keys, tokens file and webhook secret.

Without a broker or the binary the tests skip, except under `CI`, where they fail. The
binary is `AIRLOCK_BIN` (the Rust test that runs this suite sets it) or the workspace's
`target/debug/airlock`; the broker is `AIRLOCK_AMQP_URL`.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

import pytest

from airlock_gateway import Gateway

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
URL = os.environ.get("AIRLOCK_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f")
START_TIMEOUT = 60.0
"""The longest a role may take to say it is ready before the session is declared broken."""


def unavailable(reason: str) -> None:
    """Skips the test, or fails it when `CI` is set."""
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and {reason}")
    pytest.skip(reason)


def broker_reachable(url: str) -> bool:
    """Whether the first node of `url` accepts a TCP connection (the roles report the rest)."""
    first = urlsplit(url.split(",")[0])
    try:
        with socket.create_connection((first.hostname or "127.0.0.1", first.port or 5672), timeout=5):
            return True
    except OSError:
        return False


class Role:
    """One `airlock` process, its output (text or JSON lines) kept and watched for a line."""

    def __init__(self, name: str, argv: list[str], log: Path) -> None:
        self.name = name
        self.log = log
        self.lines: queue.Queue[str] = queue.Queue()
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.process.stdout is not None
        threading.Thread(target=self._pump, args=(self.process.stdout,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        with self.log.open("a") as log:
            for line in stream:
                log.write(line)
                log.flush()
                self.lines.put(line)

    def wait_for(self, needle: str) -> str:
        """The first line that contains `needle`."""
        while True:
            try:
                line = self.lines.get(timeout=START_TIMEOUT)
            except queue.Empty:
                raise RuntimeError(f"{self.name} did not log {needle!r}; see {self.log}") from None
            if needle in line:
                return line

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass(frozen=True)
class Fleet:
    """A running worker and gateway, and what a caller of the gateway needs."""

    url: str
    """The gateway's base URL."""
    token: str
    """A token that may use the named policies `agents` and `claude_code`."""
    webhook_secret: str
    """The gateway's `whsec_…` secret, for verifying its webhooks."""
    binary: Path
    """The `airlock` binary the fleet runs."""
    prefix: str
    """The fleet's prefix on the broker at `URL`."""
    directory: Path
    """The fleet's files: `keys/` (its signing keys), the tokens file, the roles' logs."""

    @property
    def runner_args(self) -> tuple[str, ...]:
        """What a runner of this fleet is started with besides its own arguments (the MCP
        proxy's): the binary, then the broker, the prefix and the fleet's public key."""
        return (
            str(self.binary),
            "--amqp",
            URL,
            "--prefix",
            self.prefix,
            "--verify-key",
            str(self.directory / "keys" / "fleet.pub"),
        )

    def gateway(self, run: str | None = None) -> Gateway:
        """A client on a run of its own, so no two tests share a call key."""
        return Gateway(self.url, self.token, policy="agents", run=run or f"examples-{uuid.uuid4().hex[:12]}")


@pytest.fixture(scope="session")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    binary = Path(os.environ.get("AIRLOCK_BIN", REPO / "target" / "debug" / "airlock"))
    if not binary.is_file():
        unavailable(f"no airlock binary at {binary} (build it, or set AIRLOCK_BIN)")
    if not broker_reachable(URL):
        unavailable(f"no broker at AIRLOCK_AMQP_URL ({URL})")

    directory = tmp_path_factory.mktemp("fleet")

    def airlock(*args: str) -> str:
        return subprocess.run(
            [str(binary), *args], check=True, capture_output=True, text=True, timeout=60
        ).stdout.strip()

    airlock("keys", "generate", "--out", str(directory / "keys"))
    tokens = directory / "gateway-tokens.yaml"
    policies = ["--policy", "agents", "--policy", "claude_code"]
    token = airlock("gateway", "add-token", "--tokens", str(tokens), "--name", "examples", *policies)
    secret = airlock("gateway", "webhook-secret")
    prefix = f"examples-{uuid.uuid4().hex[:12]}"
    common = ["--amqp", URL, "--prefix", prefix]

    roles: list[Role] = []
    try:
        worker = Role(
            "worker",
            [
                str(binary),
                "worker",
                *common,
                "--id",
                "examples-worker",
                "--policy-dir",
                str(HERE / "policies"),
                "--signing-key",
                str(directory / "keys" / "fleet.key"),
                "--reviewer-keys",
                str(directory / "keys" / "reviewer.pub"),
            ],
            directory / "worker.log",
        )
        roles.append(worker)
        # The worker declares the fleet's queues: the gateway publishes once they exist.
        worker.wait_for("Worker consuming.")
        gateway = Role(
            "gateway",
            [
                str(binary),
                "gateway",
                *common,
                "--listen",
                "127.0.0.1:0",
                "--tokens",
                str(tokens),
                "--verify-key",
                str(directory / "keys" / "fleet.pub"),
                "--webhook-secret",
                secret,
                # The Managed Agents example's receiver is on this host.
                "--allow-private-callbacks",
                "--log-format",
                "json",
            ],
            directory / "gateway.log",
        )
        roles.append(gateway)
        ready = json.loads(gateway.wait_for("Gateway ready."))
        yield Fleet(
            url=ready["fields"]["url"],
            token=token,
            webhook_secret=secret,
            binary=binary,
            prefix=prefix,
            directory=directory,
        )
    finally:
        for role in reversed(roles):
            role.stop()
        subprocess.run([str(binary), "topology", "delete", *common], capture_output=True, timeout=60, check=False)
