"""The agent turn end to end: real providers over httpx against the fake LLM server.

Covers tool rounds, concurrent calls, the iteration cap, tool timeouts and
failures, unreadable arguments, XML dispatch, the auto switch to XML, fallback
providers, streaming, and history carried between turns.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from bot.agent.dispatch import DispatchMode, ToolDispatch
from bot.agent.history import HistoryStore
from bot.agent.loop import Agent, ModelSettings
from bot.agent.prompt import PromptBuilder
from bot.agent.tool_registry import ToolRegistry
from bot.config.general import AgentConfig
from bot.config.provider import ProviderConfig
from bot.core.errors import ProviderUnavailable, ToolError
from bot.core.messages import InboundMessage
from bot.core.tool_api import Tool, ToolContext, tool
from bot.providers import build_provider_chain
from bot.store.db import Database
from tests.fake_llm import CallTools, Fail, FakeLLM, Say
from tools.calculator import calculator
from tools.clock import clock

MakeAgent = Callable[..., Awaitable[tuple[Agent, HistoryStore, ToolDispatch]]]


@tool()
async def slow(ctx: ToolContext, seconds: float) -> str:
    """Sleeps."""
    await asyncio.sleep(seconds)
    return "slept"


@tool()
async def broken(ctx: ToolContext) -> str:
    """Always fails."""
    raise ToolError("the sensor is not answering")


def rendezvous() -> list[Tool]:
    """Two tools that can only both finish if they run at the same time."""
    barrier = asyncio.Barrier(2)

    async def meet(ctx: ToolContext) -> str:
        """Waits for the other one."""
        try:
            async with asyncio.timeout(5):
                await barrier.wait()
        except TimeoutError:
            raise ToolError("ran alone: the calls were not concurrent") from None
        return "met"

    return [Tool(meet, name="left"), Tool(meet, name="right")]


@pytest.fixture
async def make_agent(
    llm: FakeLLM, http_client: httpx.AsyncClient, tmp_path: Path
) -> AsyncIterator[MakeAgent]:
    databases: list[Database] = []

    async def make(
        tools: Sequence[Tool] = (clock, calculator),
        *,
        mode: DispatchMode = "native",
        provider: dict[str, Any] | None = None,
        max_tool_iterations: int = 10,
        tool_timeout_s: float = 5.0,
    ) -> tuple[Agent, HistoryStore, ToolDispatch]:
        spec = provider or {"kind": "openai", "model": "test-model", "base_url": f"{llm.url}/v1"}
        db = Database(tmp_path / "pinclaw.db")
        await db.open()
        databases.append(db)
        history = HistoryStore(db)
        await history.setup()
        dispatch = ToolDispatch(mode)
        agent = Agent(
            provider=build_provider_chain(ProviderConfig.model_validate(spec), http_client),
            tools=ToolRegistry(tools, default_timeout_s=tool_timeout_s),
            history=history,
            prompt=PromptBuilder(tmp_path / "IDENTITY.md", ZoneInfo("UTC")),
            dispatch=dispatch,
            settings=AgentConfig(max_tool_iterations=max_tool_iterations),
            model=ModelSettings(),
            workspace=tmp_path,
            timezone=ZoneInfo("UTC"),
        )
        return agent, history, dispatch

    yield make
    for db in databases:
        await db.close()


def msg(text: str, chat: str = "1") -> InboundMessage:
    return InboundMessage(
        channel="test", chat_id=chat, sender_id="u1", sender_name="Ana", text=text
    )


async def turn(agent: Agent, text: str, chat: str = "1") -> str:
    result = await agent.run_turn(msg(text, chat), channel_context="A test chat.")
    return result.text


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]


async def test_text_reply_is_stored_with_usage(make_agent: MakeAgent, llm: FakeLLM) -> None:
    agent, history, _ = await make_agent()
    llm.queue(Say("Hello Ana"))
    result = await agent.run_turn(msg("hi"), channel_context="A test chat.")
    assert (result.text, result.status, result.rounds, result.tool_calls) == (
        "Hello Ana",
        "done",
        1,
        0,
    )
    assert result.usage.input_tokens > 0
    body = llm.requests[0].body
    assert body["messages"][0]["role"] == "system"
    assert "A test chat." in body["messages"][0]["content"]
    assert {t["function"]["name"] for t in body["tools"]} == {"clock", "calculator"}
    session = await history.session_for(msg("hi").session)
    assert [m.content for m in await history.load(session)] == ["hi", "Hello Ana"]


async def test_a_lone_surrogate_from_the_model_is_answered_and_stored(
    make_agent: MakeAgent, llm: FakeLLM
) -> None:
    """Half an emoji (a lone surrogate JSON can carry) in a reply or a tool call's
    arguments is stored and answered with U+FFFD in its place, not a failed turn."""
    agent, history, _ = await make_agent()
    llm.queue(
        CallTools([("calculator", {"expression": "6*7 \ud83d"})]),
        Say("Forty-two \ud83d!"),
    )
    result = await agent.run_turn(msg("hi"), channel_context="A test chat.")
    assert (result.status, result.text) == ("done", "Forty-two \ufffd!")
    session = await history.session_for(msg("hi").session)
    stored = await history.load(session)
    assert stored[-1].content == "Forty-two \ufffd!"
    assert stored[1].tool_calls[0].arguments == {"expression": "6*7 \ufffd"}


async def test_a_tool_round_feeds_the_result_back(make_agent: MakeAgent, llm: FakeLLM) -> None:
    agent, _, _ = await make_agent()
    llm.queue(CallTools([("calculator", {"expression": "6*7"})]), Say("It is 42."))
    assert await turn(agent, "what is 6*7?") == "It is 42."
    second = llm.requests[1].body
    assert tool_messages(second)[0]["content"] == "6*7 = 42"
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "calculator"


async def test_calls_of_one_response_run_concurrently(make_agent: MakeAgent, llm: FakeLLM) -> None:
    agent, _, _ = await make_agent(rendezvous())
    llm.queue(CallTools([("left", {}), ("right", {})]), Say("both met"))
    assert await turn(agent, "meet") == "both met"
    results = tool_messages(llm.requests[1].body)
    assert [r["content"] for r in results] == ["met", "met"]


async def test_iteration_cap_stops_the_turn_and_leaves_valid_history(
    make_agent: MakeAgent, llm: FakeLLM
) -> None:
    agent, _, _ = await make_agent(max_tool_iterations=3)
    llm.queue(*[CallTools([("clock", {})]) for _ in range(3)])
    result = await agent.run_turn(msg("loop forever"), channel_context="A test chat.")
    assert result.status == "iteration_limit"
    assert result.rounds == 3
    assert "I stopped after 3 rounds of tool use" in result.text
    assert len(llm.requests) == 3
    llm.queue(Say("fresh answer"))
    assert await turn(agent, "next question") == "fresh answer"
    messages = llm.requests[3].body["messages"]
    asked = {c["id"] for m in messages for c in m.get("tool_calls") or []}
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    assert asked == answered
    assert "not run: the turn reached its limit of 3 tool rounds" in json.dumps(messages)


async def test_a_slow_tool_times_out_and_the_model_is_told(
    make_agent: MakeAgent, llm: FakeLLM
) -> None:
    agent, _, _ = await make_agent([slow], tool_timeout_s=0.1)
    llm.queue(CallTools([("slow", {"seconds": 30})]), Say("too slow"))
    assert await turn(agent, "sleep") == "too slow"
    assert tool_messages(llm.requests[1].body)[0]["content"] == (
        "Error: slow did not finish within 0.1 s"
    )


async def test_failing_tool_and_unreadable_arguments_go_back_to_the_model(
    make_agent: MakeAgent, llm: FakeLLM
) -> None:
    agent, _, _ = await make_agent([broken, calculator])
    llm.queue(
        CallTools([("broken", {}), ("calculator", '{"expression": "1+1",')]),
        Say("the sensor is down"),
    )
    assert await turn(agent, "read it") == "the sensor is down"
    failed, unreadable = tool_messages(llm.requests[1].body)
    assert failed["content"] == "Error: the sensor is not answering"
    assert "the call to calculator could not be read" in unreadable["content"]
    assert "not valid JSON" in unreadable["content"]


async def test_xml_dispatch_runs_tools_from_text(make_agent: MakeAgent, llm: FakeLLM) -> None:
    agent, _, _ = await make_agent(mode="xml")
    llm.queue(
        Say(
            "Let me check.\n"
            '<tool_call>{"name": "calculator", "arguments": {"expression": "2+3"}}</tool_call>'
        ),
        Say("Five."),
    )
    assert await turn(agent, "2+3?") == "Five."
    first, second = llm.requests[0].body, llm.requests[1].body
    assert "tools" not in first
    assert "<tool_call>" in first["messages"][0]["content"]
    assert "calculator" in first["messages"][0]["content"]
    assert all(m["role"] != "tool" for m in second["messages"])
    assert "2+3 = 5" in second["messages"][-1]["content"]
    assert "<tool_result" in second["messages"][-1]["content"]


async def test_auto_switches_to_xml_when_the_server_refuses_tools(
    make_agent: MakeAgent, llm: FakeLLM
) -> None:
    agent, _, dispatch = await make_agent(mode="auto")
    llm.queue(
        Fail(400, "registry/tinyllama does not support tools"),
        Say('<tool_call>{"name": "calculator", "arguments": {"expression": "1+1"}}</tool_call>'),
        Say("Two."),
    )
    assert await turn(agent, "1+1?") == "Two."
    assert dispatch.mode == "xml"
    assert "tools" in llm.requests[0].body
    assert "tools" not in llm.requests[1].body


async def test_other_request_errors_do_not_switch_to_xml(
    make_agent: MakeAgent, llm: FakeLLM
) -> None:
    agent, _, dispatch = await make_agent(mode="auto")
    llm.queue(Fail(400, "context length exceeded"))
    with pytest.raises(Exception, match="context length exceeded"):
        await turn(agent, "hi")
    assert dispatch.mode == "auto"


async def test_fallback_provider_answers_when_the_first_fails(
    make_agent: MakeAgent, llm: FakeLLM
) -> None:
    provider = {
        "kind": "openai",
        "model": "primary",
        "base_url": f"{llm.url}/v1",
        "max_retries": 0,
        "fallbacks": [
            {"kind": "anthropic", "model": "backup", "base_url": llm.url, "api_key": "k"}
        ],
    }
    agent, _, _ = await make_agent(provider=provider)
    llm.queue(Fail(500, "overloaded"), Say("from the backup"))
    assert await turn(agent, "hi") == "from the backup"
    assert [r.wire for r in llm.requests] == ["openai", "anthropic"]


async def test_provider_failure_propagates_and_the_turn_is_recorded(
    make_agent: MakeAgent, llm: FakeLLM
) -> None:
    provider = {"kind": "openai", "model": "m", "base_url": f"{llm.url}/v1", "max_retries": 0}
    agent, history, _ = await make_agent(provider=provider)
    llm.queue(Fail(503, "maintenance"))
    with pytest.raises(ProviderUnavailable, match="maintenance"):
        await turn(agent, "hi")
    db = history._db.conn
    async with db.execute("SELECT status, rounds FROM turns") as cursor:
        assert [tuple(row) for row in await cursor.fetchall()] == [("failed", 1)]


async def test_history_carries_over_and_new_session_forgets(
    make_agent: MakeAgent, llm: FakeLLM
) -> None:
    agent, _, _ = await make_agent()
    llm.queue(Say("Noted."), Say("Your name is Ana."), Say("I don't know."))
    await turn(agent, "my name is Ana")
    await turn(agent, "what is my name?")
    contents = [m["content"] for m in llm.requests[1].body["messages"][1:]]
    assert contents == ["my name is Ana", "Noted.", "what is my name?"]
    await agent.new_session(msg("x"))
    await turn(agent, "what is my name?")
    assert len(llm.requests[2].body["messages"]) == 2
    await turn(agent, "other chat", chat="2")
    assert len(llm.requests[3].body["messages"]) == 2


async def test_streaming_sends_pieces_as_they_arrive(make_agent: MakeAgent, llm: FakeLLM) -> None:
    agent, _, _ = await make_agent()
    llm.queue(Say("a reply long enough to arrive in several pieces"))
    pieces: list[str] = []
    result = await agent.run_turn(msg("hi"), channel_context="", on_text=pieces.append)
    assert len(pieces) > 1
    assert "".join(pieces) == result.text
    assert llm.requests[0].body["stream"] is True
