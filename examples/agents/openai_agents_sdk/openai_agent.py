"""An OpenAI Agents SDK agent whose tool approvals come from the Airlock fleet.

The `bash` tool is declared with `needs_approval=True`, so the SDK stops the run before it
and returns the pending calls as `result.interruptions`; the application asks the gateway
about each one, approves or rejects it in the run's state (`state.approve(item)` /
`state.reject(item, rejection_message=...)`), and resumes the run from that state. A
rejected call never runs: the model gets the rejection message as the tool's answer.

    AIRLOCK_GATEWAY_URL=http://127.0.0.1:8090 AIRLOCK_GATEWAY_TOKEN=... OPENAI_API_KEY=... \\
        PYTHONPATH=examples/agents python examples/agents/openai_agents_sdk/openai_agent.py "ls -la"
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any

from agents import Agent, Model, Runner, function_tool

from airlock_gateway import Gateway

EXECUTED: list[str] = []
"""Commands the tool ran, in order (the tests read it)."""


@function_tool(needs_approval=True)
def bash(cmd: str) -> str:
    """Run a shell command and return its output.

    Args:
        cmd: The command line.
    """
    # A stand-in for running the command: the example never touches the machine.
    EXECUTED.append(cmd)
    return f"$ {cmd}\nREADME.md  src  tests"


def build_agent(model: str | Model = "gpt-4.1-mini") -> Agent[Any]:
    return Agent(
        name="operator", instructions="Run the command the user gives with the bash tool.", tools=[bash], model=model
    )


async def run(agent: Agent[Any], prompt: str, gateway: Gateway, conversation: str) -> Any:
    """Runs the agent to its final output, every tool call approved or rejected by the fleet."""
    result = await Runner.run(agent, prompt)
    while result.interruptions:
        state = result.to_state()
        for item in result.interruptions:
            arguments = json.loads(item.arguments or "{}")
            decision = await gateway.approve(
                item.call_id or uuid.uuid4().hex,
                item.name or "unknown",
                arguments,
                sample=conversation,
                messages=[
                    {"role": "user", "content": prompt},
                    {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [{"id": item.call_id, "function": item.name, "arguments": arguments}],
                    },
                ],
            )
            if decision.approved:
                state.approve(item)
            else:
                state.reject(
                    item, rejection_message=f"Airlock refused this call ({decision.decision}): {decision.explanation}"
                )
        result = await Runner.run(agent, state)
    return result


if __name__ == "__main__":
    final = asyncio.run(run(build_agent(), sys.argv[1], Gateway.from_env(), conversation=uuid.uuid4().hex))
    print(final.final_output)
