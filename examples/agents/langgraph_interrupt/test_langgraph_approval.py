"""The LangGraph example against a real fleet: `ls` is approved and runs, `rm` is rejected and
the model is told so."""

from __future__ import annotations

import asyncio
import uuid

from langchain_core.messages import ToolMessage

from conftest import Fleet
from langgraph_approval import EXECUTED, build_graph, run


def test_an_approved_call_runs_and_its_output_reaches_the_model(fleet: Fleet) -> None:
    EXECUTED.clear()
    result = asyncio.run(run(build_graph(), "ls -la", fleet.gateway(), thread_id=uuid.uuid4().hex))
    assert EXECUTED == ["ls -la"]
    [tool_message] = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert tool_message.status == "success"
    assert result["messages"][-1].content.startswith("The tool answered: $ ls -la")


def test_a_rejected_call_never_runs_and_the_model_gets_the_refusal(fleet: Fleet) -> None:
    EXECUTED.clear()
    result = asyncio.run(run(build_graph(), "rm -rf /", fleet.gateway(), thread_id=uuid.uuid4().hex))
    assert EXECUTED == []
    [tool_message] = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert tool_message.status == "error"
    assert tool_message.content == "Airlock refused this call (reject): Automatic decision."
    assert "Airlock refused this call" in result["messages"][-1].content
