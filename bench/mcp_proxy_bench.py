"""What `airlock mcp` adds to a tool call: the official MCP SDK's client calls the example
server (examples/agents/mcp_proxy/server.py) directly and through the proxy, alternating one
call each way, in one run; every proxied call is approved (the tool's `readOnlyHint`) and
reviewed (a pattern over its output) by a worker on the broker.

    python bench/mcp_proxy_bench.py AIRLOCK_BIN PREFIX FLEET_PUB [CALLS]

needs a worker of PREFIX holding examples/agents/policies (`--policy-dir`) on AIRLOCK_AMQP_URL.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

SERVER = Path(__file__).resolve().parents[1] / "examples" / "agents" / "mcp_proxy" / "server.py"


async def session(stack: AsyncExitStack, command: list[str]) -> ClientSession:
    parameters = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    read, write = await stack.enter_async_context(stdio_client(parameters))
    client = await stack.enter_async_context(ClientSession(read, write))
    await client.initialize()
    await client.list_tools()
    return client


async def timed(client: ClientSession) -> float:
    start = time.perf_counter()
    result = await client.call_tool("read_file", {"path": "notes.txt"})
    elapsed = time.perf_counter() - start
    assert not result.is_error, result
    return elapsed * 1000


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(binary: str, prefix: str, fleet_pub: str, calls: int) -> None:
    url = os.environ.get("AIRLOCK_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f")
    server = [sys.executable, str(SERVER)]
    proxy = [binary, "mcp", "--amqp", url, "--prefix", prefix, "--verify-key", fleet_pub, "--policy-name", "mcp"]
    async with AsyncExitStack() as stack:
        direct = await session(stack, server)
        proxied = await session(stack, [*proxy, "--", *server])
        for _ in range(20):  # warm-up
            await timed(direct)
            await timed(proxied)
        times: dict[str, list[float]] = {"direct": [], "proxied": []}
        for _ in range(calls):
            times["direct"].append(await timed(direct))
            times["proxied"].append(await timed(proxied))
    added = [p - d for p, d in zip(times["proxied"], times["direct"], strict=True)]
    for name, values in [*times.items(), ("added (pairwise)", added)]:
        print(f"{name:18} median {statistics.median(values):7.2f} ms   p99 {quantile(values, 0.99):7.2f} ms")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 500))
