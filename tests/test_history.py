"""History: SQLite round trip, sessions, trimming to a budget, repairing interrupted turns."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.agent.history import HistoryStore, TurnRecord
from bot.agent.history_trim import estimate_tokens, repair_history, trim_history
from bot.core.conversation import ChatMessage, ToolCall, Usage
from bot.core.messages import SessionKey
from bot.store.db import Database


def user(text: str) -> ChatMessage:
    return ChatMessage("user", text)


def assistant(text: str, *calls: ToolCall) -> ChatMessage:
    return ChatMessage("assistant", text, calls)


def result(call_id: str, text: str = "ok") -> ChatMessage:
    return ChatMessage("tool", text, tool_call_id=call_id, tool_name="clock")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[HistoryStore]:
    db = Database(tmp_path / "state" / "pinclaw.db")
    await db.open()
    history = HistoryStore(db)
    await history.setup()
    await history.setup()  # migrations are idempotent
    yield history
    await db.close()


async def test_round_trip_and_sessions(store: HistoryStore) -> None:
    key = SessionKey("telegram", "42", "7")
    first = await store.session_for(key)
    assert await store.session_for(key) == first
    call = ToolCall("c1", "clock", {"timezone": "UTC"})
    bad = ToolCall("c2", "calculator", {}, error="not JSON")
    messages = [user("hi"), assistant("", call, bad), result("c1"), result("c2", "Error: x")]
    turn = await store.begin_turn(first, None, messages[:1])
    await store.append(first, messages[1:], turn)
    final = assistant("done")
    await store.end_turn(first, turn, TurnRecord("done", Usage(10, 5), "openai:m", 2, 2), [final])
    assert await store.load(first) == [*messages, final]
    fresh = await store.new_session(key)
    assert fresh != first
    assert await store.session_for(key) == fresh
    assert await store.load(fresh) == []
    assert await store.session_for(SessionKey("telegram", "42")) not in (first, fresh)


async def test_load_limit_keeps_the_newest(store: HistoryStore) -> None:
    session = await store.session_for(SessionKey("t", "1"))
    await store.append(session, [user(str(i)) for i in range(10)])
    assert [m.content for m in await store.load(session, limit=3)] == ["7", "8", "9"]


def test_trim_drops_oldest_units_and_never_splits_a_tool_call() -> None:
    call = ToolCall("c1", "clock", {})
    old = [
        user("a" * 400),
        assistant("b" * 400),
        user("c" * 40),
        assistant("", call),
        result("c1", "d" * 400),
    ]
    recent = [assistant("e"), user("now")]
    messages = old + recent
    everything = trim_history(messages, budget_tokens=10_000, protected=1)
    assert everything == messages
    trimmed = trim_history(messages, budget_tokens=250, protected=1)
    assert trimmed[0] == user("c" * 40)
    assert trimmed[1].tool_calls == (call,)
    assert trimmed[2] == result("c1", "d" * 400)
    tight = trim_history(messages, budget_tokens=20, protected=1)
    assert tight == [user("now")]


def test_trim_keeps_the_current_turn_even_over_budget() -> None:
    call = ToolCall("c1", "clock", {})
    turn = [user("q"), assistant("", call), result("c1", "x" * 10_000)]
    assert trim_history([user("old"), *turn], budget_tokens=100, protected=3) == turn


def test_trimmed_history_starts_with_a_user_message() -> None:
    messages = [result("orphan"), assistant("hello"), user("hi"), assistant("yo"), user("now")]
    assert trim_history(messages, 10_000, protected=1)[0] == user("hi")


def test_estimate_counts_tool_arguments() -> None:
    plain = estimate_tokens(assistant(""))
    with_call = estimate_tokens(
        assistant("", ToolCall("1", "calculator", {"expression": "1+1" * 40}))
    )
    assert with_call > plain + 20


def test_repair_answers_calls_left_without_results() -> None:
    c1, c2 = ToolCall("c1", "clock", {}), ToolCall("c2", "clock", {})
    interrupted = [user("q"), assistant("", c1, c2), result("c1"), user("again")]
    repaired = repair_history(interrupted)
    assert [m.role for m in repaired] == ["user", "assistant", "tool", "tool", "user"]
    assert repaired[3].tool_call_id == "c2"
    assert repaired[3].is_error
    at_end = repair_history([user("q"), assistant("", c1)])
    assert at_end[-1].tool_call_id == "c1"
    complete = [user("q"), assistant("", c1), result("c1"), assistant("done")]
    assert repair_history(complete) == complete
