"""Claude Code gated by Airlock through its hooks: the settings snippets of this folder
(`settings.json`, HTTP hooks posting to the gateway; `settings.command.json`, command hooks
running `airlock hook`) pointed at a gateway, and one turn of Claude Code run with them.

    AIRLOCK_GATEWAY_TOKEN=... ANTHROPIC_API_KEY=... \\
        PYTHONPATH=examples/agents python examples/agents/claude_code_hooks/claude_hooks.py \\
        http://127.0.0.1:8090 "ls -la > listing.txt"
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ClaudeSDKClient, ResultMessage, TextBlock

HERE = Path(__file__).resolve().parent
SNIPPETS = {"http": HERE / "settings.json", "command": HERE / "settings.command.json"}
"""The settings snippets, by the kind of hook they configure."""
DEFAULT_GATEWAY = "http://127.0.0.1:8090"
"""The gateway the snippets name."""


def settings(kind: str, gateway: str, airlock: str = "airlock", escalated: str = "deny") -> dict[str, Any]:
    """The snippet of `kind` with its gateway replaced by `gateway`, for command hooks the
    `airlock` program by `airlock` (a path), and what a call every step escalated gets
    (`deny`, or `ask` the person at Claude Code)."""
    text = SNIPPETS[kind].read_text().replace(DEFAULT_GATEWAY, gateway.rstrip("/"))
    document = json.loads(text)
    for matchers in document["hooks"].values():
        for matcher in matchers:
            for hook in matcher["hooks"]:
                if hook["type"] == "command":
                    hook["command"] = hook["command"].replace("airlock ", f"{airlock} ", 1)
                    hook["command"] += f" --escalated {escalated}"
                else:
                    hook["url"] += f"&escalated={escalated}"
    return document


async def run(prompt: str, options: ClaudeAgentOptions) -> tuple[str, ResultMessage | None]:
    """One turn of Claude Code: the last text the model wrote, and the run's result."""
    text, result = "", None
    # The SDK's streaming mode, which a `can_use_tool` callback (Claude Code's prompt, in the
    # SDK) needs.
    async with ClaudeSDKClient(options) as client:
        await client.query(prompt)
        async for message in client.receive_response():
            if isinstance(message, AssistantMessage):
                text = "".join(block.text for block in message.content if isinstance(block, TextBlock)) or text
            elif isinstance(message, ResultMessage):
                result = message
    return text, result


if __name__ == "__main__":
    gateway, prompt = sys.argv[1], sys.argv[2]
    options = ClaudeAgentOptions(settings=json.dumps(settings("http", gateway)))
    print(asyncio.run(run(prompt, options))[0])
