"""An Airlock plugin step in Python: blocks tool calls that contain a denied word.

It serves the external step `deny_words` (any name works: `--step`). A policy uses it like
any other step; its parameters travel with each task:

    approvers:
      - name: deny_words
        tools: "bash"
        words: ["rm -rf", "curl "]   # the default list when absent
      - name: human
        tools: "bash"

A call containing a word is rejected (terminated, in a review chain); any other call is
escalated to the next step. Run it with the fleet's broker and prefix (`--amqp`, `--prefix`,
or `AIRLOCK_AMQP_URL`, `AIRLOCK_PREFIX`; the prefix defaults to `airlock`):

    pip install -r examples/plugins/python/requirements.txt
    python examples/plugins/python/deny_words.py --amqp amqp://guest:guest@127.0.0.1:5672/%2f

It takes tasks from the queue `<prefix>.step.<step>` and publishes each answer to the fleet's
exchange `<prefix>.answer`, which reaches the fleet's results queue only (never through the
default exchange).

The protocol is described in docs/plugins.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import time

import pika

import airlock_pb2 as pb

DEFAULT_WORDS = ["rm -rf", "curl ", "wget ", "/etc/shadow"]


def now_ms() -> int:
    return int(time.time() * 1000)


def call_text(task: pb.StepTask) -> tuple[str, str]:
    """The request's kind ("approval" or "review") and the text the words are looked for in."""
    kind = task.request.WhichOneof("body")
    body = getattr(task.request, kind)
    text = f"{body.call.function}({body.call.arguments_json})"
    if kind == "review":
        text += "\n" + body.output
    return kind, text


def decide(task: pb.StepTask, decided_by: str) -> pb.StepAnswer:
    """The step's answer: reject (terminate) on a denied word, escalate otherwise."""
    started = now_ms()
    params = json.loads(task.params_json or "{}")
    words = params.get("words", DEFAULT_WORDS)
    kind, text = call_text(task)
    hit = next((word for word in words if word in text), None)
    if hit is None:
        decision, explanation = pb.DECISION_KIND_ESCALATE, "no denied word"
    else:
        decision = pb.DECISION_KIND_REJECT if kind == "approval" else pb.DECISION_KIND_TERMINATE
        explanation = f"the call contains the denied word {hit!r}"
    return pb.StepAnswer(
        decision=decision,
        explanation=explanation,
        metadata_json=json.dumps({"word": hit}),
        decided_by=decided_by,
        started_at_unix_ms=started,
        answered_at_unix_ms=now_ms(),
    )


def serve(amqp: str, prefix: str, step: str, decided_by: str) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(amqp))
    channel = connection.channel()
    # Publishes block until the broker confirms them (and raise if it refuses or cannot route).
    channel.confirm_delivery()
    # The step queue, declared exactly as Airlock declares it (any other arguments are refused
    # with PRECONDITION_FAILED); declaring it lets the plugin start before any worker.
    queue = f"{prefix}.step.{step}"
    arguments = {"x-queue-type": "quorum", "x-dead-letter-exchange": f"{prefix}.dlx", "x-delivery-limit": 5}
    channel.queue_declare(queue, durable=True, arguments=arguments)
    channel.basic_qos(prefetch_count=16)

    def on_task(ch, method, properties, body: bytes) -> None:
        try:
            task = pb.StepTask.FromString(body)
            call_text(task)  # a task without a request body is as bad as undecodable bytes
        except Exception:
            # Not a StepTask: to the dead-letter queue, never back to this one.
            ch.basic_reject(method.delivery_tag, requeue=False)
            return
        now = now_ms()
        if 0 < task.request.deadline_unix_ms <= now:
            # The runner has failed closed already: nobody waits for an answer.
            ch.basic_ack(method.delivery_tag)
            return
        if 0 < task.deadline_unix_ms <= now:
            answer = pb.StepAnswer(
                decision=task.on_timeout,
                explanation="the step's deadline passed before the plugin took the task",
                decided_by=decided_by,
                timed_out=True,  # nobody answered: not a refusal, whatever on_timeout says
                started_at_unix_ms=now,
                answered_at_unix_ms=now,
            )
        else:
            answer = decide(task, decided_by)
        result = pb.StepResult(task=task, answer=answer)
        ch.basic_publish(
            exchange=f"{prefix}.answer",
            routing_key="results",
            body=result.SerializeToString(),
            properties=pika.BasicProperties(correlation_id=properties.correlation_id, delivery_mode=2),
            mandatory=True,
        )
        # Only now, with the result confirmed, is the task done.
        ch.basic_ack(method.delivery_tag)

    channel.basic_consume(queue, on_task)
    # SIGTERM stops the plugin like Ctrl-C does.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    print(f"deny_words: consuming {queue}", flush=True)
    try:
        channel.start_consuming()
    except KeyboardInterrupt:
        pass
    finally:
        # Unacknowledged tasks go back to the queue when the connection closes.
        if connection.is_open:
            connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--amqp", default=os.environ.get("AIRLOCK_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f"))
    parser.add_argument("--prefix", default=os.environ.get("AIRLOCK_PREFIX", "airlock"))
    parser.add_argument("--step", default="deny_words")
    parser.add_argument("--id", default=f"deny_words@{socket.gethostname()}:{os.getpid()}")
    args = parser.parse_args()
    serve(args.amqp, args.prefix, args.step, args.id)


if __name__ == "__main__":
    main()
