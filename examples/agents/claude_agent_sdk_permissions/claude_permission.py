"""A Claude Agent SDK `can_use_tool` callback that asks the Airlock fleet.

Claude Code asks the callback before a tool call it would otherwise ask a person about; the
callback sends the call to the gateway (`POST /v1/approvals`, waiting for the decision) and
answers `PermissionResultAllow` on `approve`, `PermissionResultDeny` with the fleet's
explanation otherwise. Claude Code decides some calls without asking (read-only shell
commands such as a plain `ls`, and whatever the settings' permission rules allow): those
never reach the callback, nor the fleet.

    AIRLOCK_GATEWAY_URL=http://127.0.0.1:8090 AIRLOCK_GATEWAY_TOKEN=... ANTHROPIC_API_KEY=... \\
        PYTHONPATH=examples/agents python examples/agents/claude_agent_sdk_permissions/claude_permission.py \\
        "ls -la > listing.txt"
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    CanUseTool,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResult,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    TextBlock,
    ToolPermissionContext,
)

from airlock_gateway import Gateway


def airlock_permissions(gateway: Gateway, conversation: str) -> CanUseTool:
    """A `can_use_tool` callback that lets the fleet decide each call of `conversation`."""

    async def can_use_tool(
        tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        call_id = context.tool_use_id or uuid.uuid4().hex
        decision = await gateway.approve(call_id, tool_name, tool_input, sample=conversation)
        if decision.approved:
            return PermissionResultAllow()
        return PermissionResultDeny(message=f"Airlock refused this call ({decision.decision}): {decision.explanation}")

    return can_use_tool


async def run(prompt: str, gateway: Gateway, options: ClaudeAgentOptions) -> tuple[str, ResultMessage | None]:
    """One turn of Claude Code with the fleet deciding its tool calls: the last text the model
    wrote, and the run's result."""
    options.can_use_tool = airlock_permissions(gateway, conversation=uuid.uuid4().hex)
    text, result = "", None
    # can_use_tool needs the streaming mode of the SDK, which ClaudeSDKClient is.
    async with ClaudeSDKClient(options) as client:
        await client.query(prompt)
        async for message in client.receive_response():
            if isinstance(message, AssistantMessage):
                text = "".join(block.text for block in message.content if isinstance(block, TextBlock)) or text
            elif isinstance(message, ResultMessage):
                result = message
    return text, result


if __name__ == "__main__":
    print(asyncio.run(run(sys.argv[1], Gateway.from_env(), ClaudeAgentOptions()))[0])
