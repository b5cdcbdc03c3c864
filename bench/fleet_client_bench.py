#!/usr/bin/env python3
"""The event loop's CPU per call of the `airlock/fleet` approver, without Inspect around it.

Calls the approver as Inspect would (a `shell` call with an 11-message history), 100 at once,
against running workers, and reports the event loop's CPU time per call (its thread's: building
the request, handing it to the client, reading the decision, and making the `Approval`) and the
whole process's (with the native client's own thread: publishing, reading and checking the
reply). The workers must serve `AIRLOCK_PREFIX` on `AIRLOCK_AMQP_URL`, signing with the key
whose public half is given.

Usage (from the repository root, in a Python environment with `inspect-airlock` installed):

    airlock keys generate --out /tmp/keys
    airlock worker --signing-key /tmp/keys/fleet.key &     # AIRLOCK_AMQP_URL, AIRLOCK_PREFIX
    python bench/fleet_client_bench.py --verify-key /tmp/keys/fleet.pub --calls 3000
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from airlock import fleet_approver
from airlock.client import shutdown
from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageTool, ChatMessageUser
from inspect_ai.tool import ToolCall, ToolCallView

POLICY = 'approvers:\n  - name: auto\n    tools: "*"\n    decision: approve\n'


def history() -> list[ChatMessage]:
    """A user message and five turns of a call and its output."""
    messages: list[ChatMessage] = [ChatMessageUser(content="list the data")]
    for turn in range(5):
        call = ToolCall(id=f"call-{turn}", function="shell", arguments={"cmd": f"ls /data/{turn}"})
        messages.append(ChatMessageAssistant(content=f"turn {turn}", tool_calls=[call]))
        messages.append(ChatMessageTool(content="ran", tool_call_id=call.id, function="shell"))
    return messages


async def measure(calls: int, concurrency: int, verify_key: str, policy: str) -> tuple[float, float]:
    """CPU seconds per call over `calls` approvals, `concurrency` at a time: the event loop's
    thread's, and the process's."""
    approve = fleet_approver(policy=policy, timeout=60, verify_key=verify_key)
    conversation = history()
    slots = asyncio.Semaphore(concurrency)

    async def one(index: int) -> None:
        call = ToolCall(id=f"c{index}", function="shell", arguments={"cmd": f"ls /data/{index}"})
        async with slots:
            approval = await approve("", call, ToolCallView(), conversation)
        assert approval.decision == "approve", approval

    await one(-1)  # connects
    started, process_started = time.thread_time(), time.process_time()
    await asyncio.gather(*(one(index) for index in range(calls)))
    spent, process_spent = time.thread_time() - started, time.process_time() - process_started
    await shutdown()  # deletes the reply queue
    return spent / calls, process_spent / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verify-key", required=True, help="the fleet's public key (fleet.pub)")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        policy = Path(scratch) / "policy.yaml"
        policy.write_text(POLICY)
        rounds = [
            asyncio.run(measure(args.calls, args.concurrency, args.verify_key, str(policy))) for _ in range(args.rounds)
        ]
    for name, per_call in (("event loop", sorted(r[0] for r in rounds)), ("process", sorted(r[1] for r in rounds))):
        median = per_call[len(per_call) // 2] * 1e6
        print(f"{args.calls} calls, {args.concurrency} at once: {median:.0f} µs CPU per call ({name})")
        print("  rounds:", ", ".join(f"{seconds * 1e6:.0f}" for seconds in per_call))


if __name__ == "__main__":
    main()
