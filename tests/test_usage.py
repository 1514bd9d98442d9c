"""Usage end to end: every model request recorded and priced, `pinclaw usage`, budgets.

The fake model answers with token counts each test chooses (raw OpenAI and
Ollama bodies), so the recorded numbers are the ones the wire reported. Turns
run through the real core (``open_app``) or the real ``pinclaw`` command.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.agent.prompt import describe_chat
from bot.config import LoadedConfig, parse_config
from bot.core.messages import InboundMessage
from bot.daemon.app import open_app
from bot.store.db import Database
from bot.store.usage import ModelCall, UsageStore
from tests.cli_helpers import local_config, one_line, run, write_config
from tests.fake_llm import Fail, FakeLLM, Raw

PRICE = '[usage.prices."openai:local-model"]\ninput_per_million = 0.15\noutput_per_million = 0.60\n'


def openai_answer(
    text: str = "", calls: Sequence[tuple[str, dict[str, Any]]] = (), *, tokens: tuple[int, int]
) -> Raw:
    """A chat.completion body reporting ``tokens`` (prompt, completion)."""
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{name}_{i}_{tokens[0]}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(calls)
        ]
    body = {
        "id": "chatcmpl-usage",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "whatever",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {
            "prompt_tokens": tokens[0],
            "completion_tokens": tokens[1],
            "total_tokens": sum(tokens),
        },
    }
    return Raw(body=json.dumps(body))


def ollama_answer(text: str, *, tokens: tuple[int, int]) -> Raw:
    """A non-streamed /api/chat body reporting ``tokens`` (prompt, eval)."""
    body = {
        "model": "small",
        "created_at": "2024-01-01T00:00:00Z",
        "message": {"role": "assistant", "content": text},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": tokens[0],
        "eval_count": tokens[1],
    }
    return Raw(body=json.dumps(body))


def loaded(tmp_path: Path, **sections: Any) -> LoadedConfig:
    return LoadedConfig(parse_config(sections, {}), tmp_path / "c.toml", tmp_path / "state")


async def rows(db: Database) -> list[tuple[Any, ...]]:
    found = await db.conn.execute_fetchall(
        "SELECT provider, model, input_tokens, output_tokens, cost, chat, sender, origin, turn_id "
        "FROM model_calls ORDER BY id"
    )
    return [tuple(row) for row in found]


def insert_calls(data_dir: Path, calls: Sequence[ModelCall]) -> None:
    """Add model calls to the database of ``data_dir`` (as a daemon would have)."""

    async def insert() -> None:
        db = Database(data_dir / "pinclaw.db")
        await db.open()
        try:
            store = UsageStore(db)
            await store.setup()
            for call in calls:
                await store.record(call)
        finally:
            await db.close()

    asyncio.run(insert())


def call(model: str, tokens: tuple[int, int], at: float, **extra: Any) -> ModelCall:
    kind, _, name = model.partition(":")
    values: dict[str, Any] = {"cost": None, "chat": "telegram:42", "sender": "42", "origin": "chat"}
    values.update(extra)
    return ModelCall(kind, name, tokens[0], tokens[1], at=at, **values)


async def test_each_model_request_of_a_turn_is_recorded_with_its_tokens_and_cost(
    llm: FakeLLM, tmp_path: Path
) -> None:
    config = loaded(
        tmp_path,
        provider={"kind": "openai", "model": "main-model", "base_url": f"{llm.url}/v1"},
        agents={
            "helper": {
                "description": "works things out",
                "tools": ["calculator"],
                "provider": {"kind": "ollama", "model": "small", "base_url": llm.url},
            }
        },
        usage={
            "currency": "EUR",
            "prices": {
                "openai:main-model": {"input_per_million": 2.0, "output_per_million": 8.0},
                "small": {"input_per_million": 0.5, "output_per_million": 1},
            },
        },
    )
    llm.queue(
        openai_answer(calls=[("calculator", {"expression": "2+2"})], tokens=(1000, 20)),
        openai_answer(
            calls=[("delegate", {"agent": "helper", "task": "what is 6*7?"})], tokens=(1100, 30)
        ),
        ollama_answer("It is 42.", tokens=(300, 7)),
        openai_answer("4, and 42.", tokens=(1300, 10)),
        openai_answer("Watered.", tokens=(50, 5)),
    )
    async with open_app(config) as app:
        message = InboundMessage("terminal", "chat", "ana", "add things up")
        result = await app.agent.run_turn(message, channel_context=describe_chat(message))
        assert result.text == "4, and 42."
        reminder = InboundMessage("telegram", "42", "ana", "water the plants")
        await app.agent.run_turn(reminder, channel_context="A reminder.", origin="cron:plants")
        recorded = await rows(app.db)
        assert app.usage is not None
        today = await app.usage.tokens_today()
    assert len(llm.requests) == 5
    main = ("openai", "main-model")
    assert [r[:4] for r in recorded] == [
        (*main, 1000, 20),
        (*main, 1100, 30),
        ("ollama", "small", 300, 7),  # the sub-agent's round, on its own provider
        (*main, 1300, 10),
        (*main, 50, 5),
    ]
    assert [r[4] for r in recorded] == pytest.approx(
        [
            (1000 * 2 + 20 * 8) / 1e6,
            (1100 * 2 + 30 * 8) / 1e6,
            (300 * 0.5 + 7 * 1) / 1e6,  # priced by the bare model name
            (1300 * 2 + 10 * 8) / 1e6,
            (50 * 2 + 5 * 8) / 1e6,
        ]
    )
    assert [r[5:8] for r in recorded] == [("terminal:chat", "ana", "chat")] * 4 + [
        ("telegram:42", "ana", "cron:plants")
    ]
    turns = [r[8] for r in recorded]
    assert turns[0] == turns[1] == turns[3] != turns[2]  # the sub-agent ran a turn of its own
    assert today == 1000 + 20 + 1100 + 30 + 300 + 7 + 1300 + 10 + 50 + 5


async def test_a_fallback_is_recorded_as_the_provider_that_answered(
    llm: FakeLLM, tmp_path: Path
) -> None:
    config = loaded(
        tmp_path,
        provider={
            "kind": "openai",
            "model": "primary",
            "base_url": f"{llm.url}/v1",
            "max_retries": 0,
            "fallbacks": [{"kind": "ollama", "model": "small", "base_url": llm.url}],
        },
        usage={"prices": {"openai:primary": {"input_per_million": 1, "output_per_million": 1}}},
    )
    llm.queue(Fail(500, "overloaded"), ollama_answer("from the backup", tokens=(40, 4)))
    async with open_app(config) as app:
        message = InboundMessage("terminal", "chat", "ana", "hi")
        result = await app.agent.run_turn(message, channel_context="A test chat.")
        recorded = await rows(app.db)
    assert result.text == "from the backup"
    assert [r[:5] for r in recorded] == [("ollama", "small", 40, 4, None)]  # no price for it


def test_usage_by_model_and_by_chat_through_the_cli(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url, PRICE))
    llm.queue(
        openai_answer(calls=[("calculator", {"expression": "2+2"})], tokens=(1200, 20)),
        openai_answer("It is 4.", tokens=(1500, 12)),
        openai_answer("Hello!", tokens=(800, 8)),
    )
    assert run(home, "agent", "-m", "what is 2+2?", "--session", "work").returncode == 0
    assert run(home, "agent", "-m", "hi", "--session", "home").returncode == 0
    insert_calls(
        home / ".pinclaw", [call("ollama:llama3.2", (100, 10), datetime.now().timestamp())]
    )

    by_model = run(home, "usage")
    assert by_model.returncode == 0, by_model.stderr
    first, *table = by_model.stdout.splitlines()
    assert first.startswith("Model calls since ") and first.endswith(" (UTC), by model:")
    assert table == [
        "",
        "MODEL               CALLS  INPUT  OUTPUT  TOTAL  COST (USD)",
        "openai:local-model      3  3,500      40  3,540    0.000549",
        "ollama:llama3.2         1    100      10    110           -",
        "Total                   4  3,600      50  3,650   0.000549*",
        "",
        "* 1 call of a model without a price in [usage.prices]; the cost shown leaves them out.",
    ]

    by_chat = run(home, "usage", "--by", "chat", "--since", "7d")
    assert by_chat.stdout.splitlines()[2:6] == [
        "CHAT           CALLS  INPUT  OUTPUT  TOTAL  COST (USD)",
        "terminal:work      2  2,700      32  2,732    0.000424",
        "terminal:home      1    800       8    808    0.000125",
        "telegram:42        1    100      10    110           -",
    ]

    as_json = json.loads(run(home, "usage", "--by", "chat", "--json").stdout)
    assert as_json["by"] == "chat" and as_json["currency"] == "USD"
    work = as_json["rows"][0]
    assert (work["chat"], work["calls"], work["input_tokens"], work["output_tokens"]) == (
        "terminal:work",
        2,
        2700,
        32,
    )
    assert work["cost"] == pytest.approx((2700 * 0.15 + 32 * 0.60) / 1e6)
    assert as_json["total"]["total_tokens"] == 3650
    assert as_json["total"]["unpriced_calls"] == 1


def test_usage_by_day_follows_the_configured_timezone(home: Path) -> None:
    write_config(home, local_config("http://127.0.0.1:9", '[general]\ntimezone = "Asia/Kolkata"\n'))
    utc = datetime(2024, 3, 9, 18, 30, tzinfo=UTC)  # midnight starting 10 March in Kolkata
    insert_calls(
        home / ".pinclaw",
        [
            call("openai:a", (1000, 100), (utc - timedelta(days=2)).timestamp()),  # too early
            call("openai:a", (100, 10), (utc - timedelta(seconds=1)).timestamp(), cost=0.5),
            call("openai:a", (200, 20), utc.timestamp(), cost=0.25),
            call("openai:b", (300, 30), (utc + timedelta(hours=23)).timestamp(), cost=12.5),
        ],
    )
    done = run(home, "usage", "--since", "2024-03-09", "--by", "day")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Model calls since 2024-03-09 00:00 (Asia/Kolkata), by day:",
        "",
        "DAY         CALLS  INPUT  OUTPUT  TOTAL  COST (USD)",
        "2024-03-09      1    100      10    110      0.5000",
        "2024-03-10      2    500      50    550       12.75",
        "Total           3    600      60    660       13.25",
    ]
    recent = run(home, "usage", "--since", "1d")
    assert recent.stdout.startswith("No model calls since ")
    bad = run(home, "usage", "--since", "7 fortnights")
    assert bad.returncode == 2
    assert one_line(bad.stderr).startswith("pinclaw: --since: the duration '7 fortnights' uses")


def test_the_daily_budget_stops_new_turns_without_asking_the_model(
    llm: FakeLLM, home: Path
) -> None:
    write_config(home, local_config(llm.url, "[usage]\ndaily_tokens = 1000\n"))
    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    yesterday = (midnight - timedelta(seconds=1)).timestamp()
    insert_calls(home / ".pinclaw", [call("openai:local-model", (50_000, 0), yesterday)])
    llm.queue(openai_answer("Hello!", tokens=(900, 150)))
    first = run(home, "agent", "-m", "hi")
    assert first.stdout == "Hello!\n"  # yesterday's tokens do not count today

    refused = run(home, "agent", "-m", "hi again")
    assert refused.returncode == 0, refused.stderr
    text = one_line(refused.stdout)
    assert text.startswith(
        "Sorry, I can't answer right now: the model budget for today is used up "
        "(1,050 of 1,000 tokens since midnight, UTC time). It resets at midnight, in "
    )
    assert text.endswith("The owner can raise it with [usage] daily_tokens in the config file.")
    assert len(llm.requests) == 1


async def test_the_monthly_budget_counts_from_the_first_of_the_month(
    llm: FakeLLM, tmp_path: Path
) -> None:
    zone = ZoneInfo("America/New_York")
    config = loaded(
        tmp_path,
        general={"timezone": "America/New_York"},
        provider={"kind": "openai", "model": "m", "base_url": f"{llm.url}/v1"},
        usage={"monthly_tokens": 1000},
    )
    now = datetime.now(zone)
    first = datetime(now.year, now.month, 1, tzinfo=zone)
    following = (first + timedelta(days=32)).replace(day=1)
    llm.queue(openai_answer("Fine.", tokens=(450, 100)))
    async with open_app(config) as app:
        assert app.usage is not None
        for earlier in (
            call("openai:m", (5000, 0), first.timestamp() - 1),  # last month
            call("openai:m", (400, 100), first.timestamp()),
        ):
            await app.usage.record(earlier)
        message = InboundMessage("telegram", "42", "42", "how are you?")
        answered = await app.agent.run_turn(message, channel_context="A test chat.")
        refused = await app.agent.run_turn(message, channel_context="A test chat.")
    assert (answered.status, answered.text) == ("done", "Fine.")
    assert refused.status == "budget"
    assert refused.text == (
        "Sorry, I can't answer right now: the model budget for this month is used up "
        f"(1,050 of 1,000 tokens since 1 {first:%B}, America/New_York time). "
        f"It resets on 1 {following:%B}. "
        "The owner can raise it with [usage] monthly_tokens in the config file."
    )
    assert len(llm.requests) == 1


async def test_the_per_person_daily_cap_still_applies_under_a_shared_budget(
    llm: FakeLLM, tmp_path: Path
) -> None:
    config = loaded(
        tmp_path,
        provider={"kind": "openai", "model": "m", "base_url": f"{llm.url}/v1"},
        security={"max_tokens_per_day": 500},
        usage={"daily_tokens": 1_000_000},
    )
    llm.queue(openai_answer("One.", tokens=(450, 100)), openai_answer("Two.", tokens=(10, 1)))
    async with open_app(config) as app:
        ana = InboundMessage("telegram", "1", "ana", "hi")
        bob = InboundMessage("telegram", "2", "bob", "hi")
        assert (await app.agent.run_turn(ana, channel_context="A chat.")).text == "One."
        refused = await app.agent.run_turn(ana, channel_context="A chat.")
        assert (await app.agent.run_turn(bob, channel_context="A chat.")).text == "Two."
    assert refused.status == "budget"
    assert refused.text.startswith("You have reached today's limit for the model (550 of 500")
    assert len(llm.requests) == 2


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        (
            '[usage.prices."openai:gpt-4o-mini"]\ninput_per_million = -1\n'
            "output_per_million = 0.6\n",
            'usage.prices."openai:gpt-4o-mini".input_per_million: input should be greater '
            "than or equal to 0, got integer -1",
        ),
        (
            '[usage.prices."openai:gpt-4o-mini"]\ninput_per_million = "0.15"\n'
            "output_per_million = 0.6\n",
            'usage.prices."openai:gpt-4o-mini".input_per_million: expected a number, '
            "got string '0.15'",
        ),
        (
            "[usage.prices.gpt-4o-mini]\ninput_per_million = 0.15\n",
            "usage.prices.gpt-4o-mini.output_per_million: missing required key",
        ),
        (
            "[usage.prices.gpt-4o-mini]\ninput_per_1k = 0.15\noutput_per_million = 0.6\n",
            "usage.prices.gpt-4o-mini.input_per_1k: unknown key; "
            "did you mean 'input_per_million'?",  # which is why that one is missing
        ),
        (
            "[usage]\ndaily_tokens = 1.5\n",
            "usage.daily_tokens: expected an integer, got number 1.5",
        ),
    ],
)
def test_a_bad_usage_entry_is_one_line_naming_the_key(home: Path, table: str, problem: str) -> None:
    path = write_config(home, local_config("http://127.0.0.1:9", table))
    done = run(home, "config", "check")
    assert done.returncode == 2
    assert one_line(done.stderr) == f"pinclaw: {path}: {problem}"
