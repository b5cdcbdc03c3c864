"""The OpenAI Agents SDK example against a real fleet, its model a local stand-in for the Chat
Completions API: `ls` is approved and runs, `rm` is rejected and never runs."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from agents import OpenAIChatCompletionsModel, set_tracing_disabled
from openai import AsyncOpenAI

from conftest import Fleet
from fake_openai import chat_completions
from local_http import serve
from openai_agent import EXECUTED, build_agent, run


@pytest.fixture
def model() -> Iterator[OpenAIChatCompletionsModel]:
    # Traces would go to OpenAI's servers: nothing leaves the machine here.
    set_tracing_disabled(True)
    with serve(chat_completions) as url:
        client = AsyncOpenAI(base_url=f"{url}/v1", api_key="not-a-key", max_retries=0)
        yield OpenAIChatCompletionsModel(model="fake-model", openai_client=client)


def test_an_approved_call_runs_and_the_model_gets_its_output(fleet: Fleet, model: OpenAIChatCompletionsModel) -> None:
    EXECUTED.clear()
    result = asyncio.run(run(build_agent(model), "ls -la", fleet.gateway(), conversation=uuid.uuid4().hex))
    assert EXECUTED == ["ls -la"]
    assert result.final_output.startswith("The tool answered: $ ls -la")


def test_a_rejected_call_never_runs_and_the_model_gets_the_refusal(
    fleet: Fleet, model: OpenAIChatCompletionsModel
) -> None:
    EXECUTED.clear()
    result = asyncio.run(run(build_agent(model), "rm -rf /", fleet.gateway(), conversation=uuid.uuid4().hex))
    assert EXECUTED == []
    assert result.final_output == "The tool answered: Airlock refused this call (reject): Automatic decision."
