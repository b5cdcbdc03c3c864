"""An MCP client (the official MCP Python SDK's `ClientSession`) that calls one tool through
`airlock mcp` and prints what it hears, one line each: `progress N: MESSAGE` while the call
waits for the fleet (a person, say), then `result: TEXT`, `error: TEXT` (a tool error result,
as a rejected call's) or `session ended: MESSAGE` (a JSON-RPC error, as a terminated call's).

    python client.py stdio TOOL 'JSON_ARGUMENTS' -- airlock mcp ... -- python server.py
    python client.py http  TOOL 'JSON_ARGUMENTS' http://127.0.0.1:PORT/mcp
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from contextlib import asynccontextmanager
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult


@asynccontextmanager
async def connect(transport: str, target: list[str]):
    """A session with the proxy: started as a command (stdio), or at its URL (HTTP)."""
    if transport == "stdio":
        # The whole environment: the SDK passes only a few variables on by default.
        parameters = StdioServerParameters(command=target[0], args=target[1:], env=dict(os.environ))
        streams = stdio_client(parameters)
    else:
        streams = streamable_http_client(target[0])
    async with streams as (read, write, *_), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(
    transport: str, target: list[str], tool: str, arguments: dict[str, Any], on_progress=None
) -> CallToolResult | MCPError:
    """Lists the tools (the proxy learns their annotations), calls one, and returns its
    result, or the JSON-RPC error that answered it."""
    async with connect(transport, target) as session:
        await session.list_tools()
        try:
            return await session.call_tool(tool, arguments, progress_callback=on_progress)
        except MCPError as error:
            return error


async def progress(done: float, total: float | None, message: str | None) -> None:
    print(f"progress {done:g}: {message}", flush=True)


def main() -> None:
    transport, tool, arguments, *rest = sys.argv[1:]
    target = rest[1:] if rest[:1] == ["--"] else rest
    result = asyncio.run(call(transport, target, tool, json.loads(arguments), progress))
    if isinstance(result, MCPError):
        print(f"session ended: {result}", flush=True)
        return
    text = "\n".join(item.text for item in result.content if item.type == "text")
    print(("error: " if result.is_error else "result: ") + text, flush=True)


if __name__ == "__main__":
    main()
