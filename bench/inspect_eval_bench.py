#!/usr/bin/env python3
"""What asking an Airlock fleet costs a real Inspect eval, against Inspect's in-process policy.

One offline eval: 200 samples of 10 tool calls each on `mockllm/model` (a scripted model: one
`shell` call per turn, then "done"), 100 samples at once, run four ways:

- `none`: no approval;
- `inspect`: Inspect's own policy in process, the two-step glob policy below;
- `await`: an approver that awaits 2 ms and approves, with no client: what Inspect itself
  spends on an approver that waits for anything at all, the floor of every remote approver;
- `fleet`: every call asked of `airlock/fleet`, the same policy sent with each request, answered
  by two signing `airlock worker` processes over RabbitMQ (`AIRLOCK_AMQP_URL`), every reply's
  proof checked by the runner.

Each eval runs in a child process, after a small eval of the same mode there (the
interpreter's start, imports and what Inspect and the client set up on first use are left
out: the time is the measured `inspect_ai.eval()` alone); the modes alternate round by round
(which goes first rotates), so load that comes and goes on the machine weighs on all alike, and
the fleet's added time is the median of each round's ratio. Reported per mode: median
wall time, the eval's CPU time (user + system of its process), and the workers' and the
broker's CPU during it (from `/proc`).

With `--separate-cores`, every eval runs on CPU 0 and the workers and the RabbitMQ node on the
other CPUs (the node's threads are moved for the run and given back their CPUs after it), as
when the fleet runs on other machines than the eval: on a small machine that shares its cores,
the broker's and the workers' work also slows the eval's own code.

Usage (from the repository root, after `cargo build --release -p airlock`, in a Python
environment with `inspect-airlock` installed):

    python bench/inspect_eval_bench.py                  # 5 rounds, table
    python bench/inspect_eval_bench.py --rounds 9 --json
    python bench/inspect_eval_bench.py --separate-cores   # the eval on a core of its own
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODES = ("none", "inspect", "await", "fleet")
POLICY = """\
approvers:
  - name: auto
    tools: "shell(cmd='rm*"
    decision: reject
  - name: auto
    tools: "*"
    decision: approve
"""
"""The two-step glob policy: destructive calls are rejected, the rest approved."""
AWAIT_S = 0.002
"""How long the `await` approver waits: about the fleet's round trip here."""


# === the eval, run in a child process ===


def run_eval(
    mode: str, samples: int, calls: int, concurrency: int, policy_file: str, verify_key: str
) -> dict[str, Any]:
    """Runs the eval once in this process; its wall and CPU time and how its calls were decided."""
    from inspect_ai import Task, eval
    from inspect_ai.approval import Approval, ApprovalPolicy, Approver, approver
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ChatMessageAssistant, ModelOutput, ModelUsage, get_model
    from inspect_ai.solver import generate, use_tools
    from inspect_ai.tool import Tool, ToolCall, tool

    @tool
    def shell() -> Tool:
        async def execute(cmd: str) -> str:
            """Run a shell command.

            Args:
                cmd: The command to run.
            """
            return f"ran: {cmd}"

        return execute

    @approver(name="bench/await")
    def awaiting_approver() -> Approver:
        async def approve(message: str, call: ToolCall, view: Any, history: Any) -> Approval:
            await asyncio.sleep(AWAIT_S)
            return Approval(decision="approve", explanation="awaited")

        return approve

    usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)

    def scripted(input: Any, tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
        turn = sum(isinstance(message, ChatMessageAssistant) for message in input)
        if turn >= calls:
            output = ModelOutput.from_content(model="mockllm/model", content="done")
        else:
            call = ToolCall(id=f"call-{turn}", function="shell", arguments={"cmd": f"ls /data/{turn}"})
            message = ChatMessageAssistant(content=f"turn {turn}", tool_calls=[call], model="mockllm/model")
            output = ModelOutput.from_message(message)
        output.usage = usage
        return output

    task = Task(
        dataset=[Sample(id=i, input="list the data") for i in range(samples)],
        solver=[use_tools(shell()), generate()],
        model=get_model("mockllm/model", custom_outputs=scripted),
    )
    approval: Any = None
    if mode == "inspect":
        approval = policy_file
    elif mode == "await":
        approval = [ApprovalPolicy(awaiting_approver(), "*")]
    elif mode == "fleet":
        from airlock import fleet_approver

        approval = [ApprovalPolicy(fleet_approver(policy=policy_file, timeout=60, verify_key=verify_key), "*")]
    with tempfile.TemporaryDirectory() as logs:
        started, cpu = time.perf_counter(), os.times()
        [log] = eval(task, approval=approval, max_samples=concurrency, log_dir=logs, display="none", score=False)
        wall = time.perf_counter() - started
        spent = os.times()
        approved = sum(
            1
            for sample in log.samples or []
            for event in sample.events
            if event.event == "approval" and event.decision == "approve"
        )
    return {
        "status": log.status,
        "wall_s": wall,
        "cpu_s": (spent.user - cpu.user) + (spent.system - cpu.system),
        "approved": approved,
    }


# === the harness ===


def process_cpu_s(pid: int) -> float:
    """`utime + stime` of process `pid` (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


EVAL_CPUS = {0}
"""The CPUs of the eval with `--separate-cores`; the fleet gets the others."""


def fleet_cpus() -> set[int]:
    """The CPUs the workers and the broker run on with `--separate-cores`."""
    others = os.sched_getaffinity(0) - EVAL_CPUS
    if not others:
        raise SystemExit("--separate-cores needs at least two CPUs")
    return others


def pin_process(pid: int, cpus: set[int]) -> dict[int, set[int]]:
    """Moves every thread of process `pid` to `cpus`; what each ran on before."""
    before = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        tid = int(task.name)
        before[tid] = os.sched_getaffinity(tid)
        os.sched_setaffinity(tid, cpus)
    return before


def unpin_process(before: dict[int, set[int]]) -> None:
    """Gives the threads `pin_process` moved back their CPUs (threads gone since are skipped)."""
    for tid, cpus in before.items():
        try:
            os.sched_setaffinity(tid, cpus)
        except ProcessLookupError:
            pass


def broker_pid() -> int | None:
    """The RabbitMQ node's Erlang VM on this machine, if there is one."""
    found = subprocess.run(
        ["pgrep", "-f", "beam.smp.*rabbit"], check=False, capture_output=True, text=True
    ).stdout.split()
    return int(found[0]) if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--calls", type=int, default=10, help="tool calls per sample")
    parser.add_argument("--concurrency", type=int, default=100, help="samples at once")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--airlock", default=str(ROOT / "target/release/airlock"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--separate-cores", action="store_true", help="the eval on CPU 0, the workers and the broker on the other CPUs"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--policy-file", help=argparse.SUPPRESS)
    parser.add_argument("--verify-key", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.separate_cores:
            os.sched_setaffinity(0, EVAL_CPUS)
        # A small eval first: what Inspect and the client load or set up on first use is not measured.
        run_eval(args.child, 10, 1, args.concurrency, args.policy_file, args.verify_key)
        result = run_eval(args.child, args.samples, args.calls, args.concurrency, args.policy_file, args.verify_key)
        print(json.dumps(result))
        return

    url = os.environ.setdefault("AIRLOCK_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f")
    prefix = f"evalbench-{uuid.uuid4().hex[:8]}"
    os.environ["AIRLOCK_PREFIX"] = prefix
    with tempfile.TemporaryDirectory() as scratch:
        policy_file = str(Path(scratch) / "policy.yaml")
        Path(policy_file).write_text(POLICY)
        subprocess.run([args.airlock, "keys", "generate", "--out", scratch], check=True, capture_output=True)
        key = str(Path(scratch) / "fleet.key")
        fleet = fleet_cpus() if args.separate_cores else None
        broker = broker_pid()
        broker_cpus = pin_process(broker, fleet) if fleet and broker else {}
        try:
            workers = start_workers(args, url, prefix, key, fleet)
            try:
                results = measure(args, policy_file, str(Path(scratch) / "fleet.pub"), workers)
            finally:
                for worker in workers:
                    worker.terminate()
                for worker in workers:
                    worker.wait(timeout=30)
        finally:
            unpin_process(broker_cpus)
            subprocess.run(
                [args.airlock, "topology", "delete", "--amqp", url, "--prefix", prefix],
                check=False,
                capture_output=True,
            )
    report(results, args)


def start_workers(
    args: argparse.Namespace, url: str, prefix: str, key: str, cpus: set[int] | None
) -> list[subprocess.Popen[bytes]]:
    """The fleet's signing workers, on `cpus` when given."""
    spawning_cpus = os.sched_getaffinity(0)
    if cpus:
        os.sched_setaffinity(0, cpus)  # the workers inherit it
    try:
        return [
            subprocess.Popen(
                [args.airlock, "worker", "--amqp", url, "--prefix", prefix, "--signing-key", key],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(args.workers)
        ]
    finally:
        os.sched_setaffinity(0, spawning_cpus)


def measure(
    args: argparse.Namespace, policy_file: str, verify_key: str, workers: list[subprocess.Popen[bytes]]
) -> dict[str, Any]:
    """Every mode once per round, the fleet's helpers' CPU read around each fleet eval."""
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    broker = broker_pid()
    for number in range(args.rounds):
        first = number % len(MODES)  # which goes first rotates
        for mode in MODES[first:] + MODES[:first]:
            before = [process_cpu_s(w.pid) for w in workers], process_cpu_s(broker) if broker else 0.0
            child = subprocess.run(
                [sys.executable, __file__, "--child", mode, "--policy-file", policy_file, "--verify-key", verify_key]
                + ["--samples", str(args.samples), "--calls", str(args.calls)]
                + ["--concurrency", str(args.concurrency)]
                + (["--separate-cores"] if args.separate_cores else []),
                capture_output=True,
                text=True,
                check=True,
            )
            result = json.loads(child.stdout.strip().splitlines()[-1])
            result["workers_cpu_s"] = sum(process_cpu_s(w.pid) for w in workers) - sum(before[0])
            result["broker_cpu_s"] = (process_cpu_s(broker) - before[1]) if broker else None
            expected = args.samples * args.calls if mode != "none" else 0
            if result["status"] != "success" or result["approved"] != expected:
                raise SystemExit(f"{mode}: {result['status']}, {result['approved']} of {expected} calls approved")
            runs[mode].append(result)
            print(f"round {number} {mode}: {result['wall_s']:.2f} s", file=sys.stderr)
    return runs


def report(runs: dict[str, Any], args: argparse.Namespace) -> None:
    def median(mode: str, field: str) -> float:
        return statistics.median(run[field] for run in runs[mode])

    summary = {
        mode: {
            "wall_s": median(mode, "wall_s"),
            "eval_cpu_s": median(mode, "cpu_s"),
            "workers_cpu_s": median(mode, "workers_cpu_s"),
            "broker_cpu_s": median(mode, "broker_cpu_s") if runs[mode][0]["broker_cpu_s"] is not None else None,
            "walls_s": [round(run["wall_s"], 2) for run in runs[mode]],
        }
        for mode in MODES
    }
    # Each round's ratio, then their median: the machine's speed drifts between rounds more
    # than the modes differ within one.
    for baseline in ("none", "inspect", "await"):
        ratios = [f["wall_s"] / b["wall_s"] for f, b in zip(runs["fleet"], runs[baseline])]
        summary[f"fleet_over_{baseline}"] = statistics.median(ratios) - 1
    summary["await_over_none"] = (
        statistics.median(a["wall_s"] / b["wall_s"] for a, b in zip(runs["await"], runs["none"])) - 1
    )
    summary["calls"] = args.samples * args.calls
    if args.json:
        print(json.dumps(summary))
        return
    cores = ", the eval on a core of its own" if args.separate_cores else ""
    print(
        f"{args.samples} samples x {args.calls} calls, {args.concurrency} at once{cores}, "
        f"{args.rounds} rounds (medians)"
    )
    for mode in MODES:
        row = summary[mode]
        print(
            f"{mode:8} wall {row['wall_s']:6.2f} s   eval CPU {row['eval_cpu_s']:6.2f} s   "
            f"workers CPU {row['workers_cpu_s']:5.2f} s   broker CPU {row['broker_cpu_s'] or 0:5.2f} s   "
            f"runs {row['walls_s']}"
        )
    print(
        f"fleet: {summary['fleet_over_none']:+.1%} wall time over no approval, "
        f"{summary['fleet_over_inspect']:+.1%} over Inspect's in-process policy, "
        f"{summary['fleet_over_await']:+.1%} over an approver that only awaits "
        f"(which itself adds {summary['await_over_none']:+.1%}; medians of the rounds' ratios)"
    )


if __name__ == "__main__":
    main()
