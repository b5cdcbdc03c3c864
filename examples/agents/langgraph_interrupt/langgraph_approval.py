"""A LangGraph graph whose tool calls wait for the Airlock fleet: before the tool node runs,
the `approval` node interrupts the graph (`interrupt()`) with the call; the application asks
the gateway and resumes the graph with the decision (`Command(resume=...)`). An approved call
runs; a rejected one reaches the model as a refusal instead.

The model is a scripted node (it turns the user's message into one `bash` call, then reports
the tool's answer), so the example runs without a model API; put a chat model in its place
for a real agent.

    AIRLOCK_GATEWAY_URL=http://127.0.0.1:8090 AIRLOCK_GATEWAY_TOKEN=... \\
        PYTHONPATH=examples/agents python examples/agents/langgraph_interrupt/langgraph_approval.py "ls -la"
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from typing import Any, Literal

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt

from airlock_gateway import Gateway

EXECUTED: list[str] = []
"""Commands the tool ran, in order (the tests read it)."""


@tool
def bash(cmd: str) -> str:
    """Run a shell command and return its output."""
    # A stand-in for running the command: the example never touches the machine.
    EXECUTED.append(cmd)
    return f"$ {cmd}\nREADME.md  src  tests"


def model(state: MessagesState) -> dict[str, list[AnyMessage]]:
    """A scripted model: the user's message becomes a `bash` call; a tool's answer, the reply."""
    last = state["messages"][-1]
    if isinstance(last, HumanMessage):
        call = {"name": "bash", "args": {"cmd": str(last.content)}, "id": f"call_{uuid.uuid4().hex[:8]}"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}
    return {"messages": [AIMessage(content=f"The tool answered: {last.content}")]}


def approval(state: MessagesState) -> Command[Literal["tools", "model"]]:
    """Stops the graph until the application resumes it with the fleet's decision on the call."""
    call = state["messages"][-1].tool_calls[0]
    decision: dict[str, Any] = interrupt({"call": call, "messages": to_gateway_messages(state["messages"])})
    if decision["decision"] == "approve":
        return Command(goto="tools")
    refusal = ToolMessage(
        content=f"Airlock refused this call ({decision['decision']}): {decision['explanation']}",
        tool_call_id=call["id"],
        status="error",
    )
    return Command(goto="model", update={"messages": [refusal]})


def after_model(state: MessagesState) -> Literal["approval", "__end__"]:
    return "approval" if state["messages"][-1].tool_calls else END


def build_graph() -> Any:
    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("approval", approval)
    graph.add_node("tools", ToolNode([bash]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", after_model)
    graph.add_edge("tools", "model")
    # Interrupts need a checkpointer: the paused run is saved under its thread id.
    return graph.compile(checkpointer=InMemorySaver())


def to_gateway_messages(messages: list[AnyMessage]) -> list[dict[str, Any]]:
    """The conversation in the gateway's message shape (docs/gateway.md, "A request")."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, HumanMessage):
            out.append({"role": "user", "content": str(message.content)})
        elif isinstance(message, AIMessage):
            calls = [{"id": c["id"], "function": c["name"], "arguments": c["args"]} for c in message.tool_calls]
            out.append(
                {"role": "assistant", "content": str(message.content), **({"tool_calls": calls} if calls else {})}
            )
        elif isinstance(message, ToolMessage):
            out.append({"role": "tool", "content": str(message.content), "tool_call_id": message.tool_call_id})
    return out


async def run(graph: Any, prompt: str, gateway: Gateway, thread_id: str) -> dict[str, Any]:
    """Runs the graph to its end, answering each interrupt with the gateway's decision."""
    config = {"configurable": {"thread_id": thread_id}}
    result = await graph.ainvoke({"messages": [HumanMessage(prompt)]}, config)
    while result.get("__interrupt__"):
        request = result["__interrupt__"][0].value
        call = request["call"]
        decision = await gateway.approve(
            call["id"], call["name"], call["args"], sample=thread_id, messages=request["messages"]
        )
        result = await graph.ainvoke(
            Command(resume={"decision": decision.decision, "explanation": decision.explanation}), config
        )
    return result


if __name__ == "__main__":
    final = asyncio.run(run(build_graph(), sys.argv[1], Gateway.from_env(), thread_id=uuid.uuid4().hex))
    print(final["messages"][-1].content)
