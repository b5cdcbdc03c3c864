"""A small MCP server (the official MCP Python SDK's `MCPServer`) with three file tools that
declare what they do: `read_file` is read-only, `delete_file` destructive, `write_file`
neither. It keeps its files in memory and appends every call it runs to the JSON-lines file
named by `MCP_EXAMPLE_CALLS` (if set), so a test can tell which calls reached it.

    python server.py                    # stdio
    python server.py --http PORT        # streamable HTTP at http://127.0.0.1:PORT/mcp
"""

from __future__ import annotations

import json
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("files")
FILES = {
    "notes.txt": "remember the milk",
    "id_ed25519": "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA...\n-----END PRIVATE KEY-----",
}


def record(tool: str, arguments: dict[str, str]) -> None:
    """Appends the call to the calls file, one JSON object per line."""
    path = os.environ.get("MCP_EXAMPLE_CALLS")
    if path:
        with open(path, "a") as calls:
            calls.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_file(path: str) -> str:
    """Returns a file's text."""
    record("read_file", {"path": path})
    return FILES.get(path, f"no such file: {path}")


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
def write_file(path: str, text: str) -> str:
    """Writes a file."""
    record("write_file", {"path": path, "text": text})
    FILES[path] = text
    return f"wrote {len(text)} characters to {path}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
def delete_file(path: str) -> str:
    """Deletes a file."""
    record("delete_file", {"path": path})
    FILES.pop(path, None)
    return f"deleted {path}"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
