"""A model per chat (``/model``) and the usage footer, end to end.

The real daemon runs against the fake platforms and the fake model, which speaks
every wire format, so each request shows which model (and which API) a turn
asked. The config offers the main model, one more name in ``[provider] choices``,
an Anthropic fallback and a sub-agent's Ollama model. Ada (Telegram 7001) is the
approver; Bob (7002) may chat but not switch. The footer is checked against the
tokens the fake model reported and the ``model_calls`` rows of the turn.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from bot.daemon.main import Daemon
from bot.store.usage import money
from tests.browser import Panel, free_port
from tests.channel_tables import discord_table, slack_table, telegram_table
from tests.chat_harness import ask
from tests.daemon_harness import running_daemon
from tests.fake_discord import FakeDiscord
from tests.fake_discord.payloads import FLAG_LOADING
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.fake_slack import ALICE, ALICE_DM, FakeSlack
from tests.fake_telegram import FakeTelegram, SentMessage
from tests.test_web_chat import EventReader, client_for, open_chat

OWNER, BOB_ID = 7001, 7002
ADA = FakeTelegram.user(OWNER, "Ada", "ada")
BOB = FakeTelegram.user(BOB_ID, "Bob", "bob")
Json = dict[str, Any]

LISTING = [
    "Models this chat can use:",
    "• gpt-4o-mini (openai) — the default, in use here",
    "• gpt-4o (openai)",
    "• claude-haiku-4-5 (anthropic) — a fallback",
    "• qwen3 (ollama) — agent coder's model",
    "/model NAME switches this chat; /model default goes back.",
]
SWITCHED = "This chat now uses gpt-4o. /model default goes back."
OPTION = re.compile(r'<option value="([^"]*)"( selected)?>([^<]*)</option>')


def model_tables(llm: FakeLLM, *, choices: tuple[str, ...] = ("gpt-4o",), **extra: Any) -> Json:
    """The provider with its choices, fallback and sub-agent model (all on the fake)."""
    fallback = {"kind": "anthropic", "model": "claude-haiku-4-5", "base_url": llm.url}
    return {
        "provider": {
            "kind": "openai",
            "model": "gpt-4o-mini",
            "base_url": f"{llm.url}/v1",
            "api_key": "test",
            "max_retries": 0,
            "choices": list(choices),
            "fallbacks": [{**fallback, "api_key": "test", "max_retries": 0, "max_tokens": 777}],
        },
        "agents": {
            "coder": {
                "description": "writes code",
                "provider": {"kind": "ollama", "model": "qwen3", "base_url": llm.url},
            }
        },
        **extra,
    }


@asynccontextmanager
async def telegram_daemon(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, **tables: Any
) -> AsyncIterator[Daemon]:
    """The daemon on Telegram: Ada (the approver) and Bob allowed."""
    channels = {"telegram": telegram_table(telegram, allowed_users=[OWNER, BOB_ID])}
    given = {**model_tables(llm), **tables}
    async with running_daemon(tmp_path, llm, channels, tables=given) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


def rows(tmp_path: Path, query: str) -> list[tuple[Any, ...]]:
    """Rows of a query on the daemon's database."""
    with contextlib.closing(sqlite3.connect(tmp_path / "state" / "pinclaw.db")) as db:
        return db.execute(query).fetchall()


async def test_the_owner_lists_switches_and_goes_back_on_telegram(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with telegram_daemon(tmp_path, llm, telegram):
        assert (await ask(telegram, OWNER, ADA, "/model")).split("\n") == LISTING
        assert await ask(telegram, OWNER, ADA, "/model GPT-4o") == SWITCHED
        await ask(telegram, OWNER, ADA, "hello")
        assert llm.requests[-1].body["model"] == "gpt-4o"
        status = await ask(telegram, OWNER, ADA, "/status")
        chosen = "Model: openai:gpt-4o (chosen for this chat; the default is openai:gpt-4o-mini)"
        assert chosen in status.split("\n")
        unknown = await ask(telegram, OWNER, ADA, "/model gpt-5")
        assert unknown.split("\n")[0] == 'There is no model called "gpt-5" here.'
        assert "• gpt-4o (openai) — in use here" in unknown.split("\n")
        # A label picks the fallback, asked alone over its own API with its own settings.
        switched = await ask(telegram, OWNER, ADA, "/model anthropic:Claude-Haiku-4-5")
        assert switched == "This chat now uses claude-haiku-4-5. /model default goes back."
        await ask(telegram, OWNER, ADA, "and now?")
        request = llm.requests[-1]
        assert request.wire == "anthropic" and request.body["model"] == "claude-haiku-4-5"
        assert request.body["max_tokens"] == 777
        back = await ask(telegram, OWNER, ADA, "/model default")
        assert back == "This chat now uses the default model, gpt-4o-mini."
        await ask(telegram, OWNER, ADA, "and back")
        assert llm.requests[-1].body["model"] == "gpt-4o-mini"
    assert [r.body["model"] for r in llm.requests] == ["gpt-4o", "claude-haiku-4-5", "gpt-4o-mini"]
    calls = rows(tmp_path, "SELECT provider, model FROM model_calls ORDER BY id")
    assert calls == [
        ("openai", "gpt-4o"),
        ("anthropic", "claude-haiku-4-5"),
        ("openai", "gpt-4o-mini"),
    ]
    turns = rows(tmp_path, "SELECT provider FROM turns ORDER BY id")
    assert turns == [("openai:gpt-4o",), ("anthropic:claude-haiku-4-5",), ("openai:gpt-4o-mini",)]


async def test_someone_who_may_not_approve_sees_the_list_but_cannot_switch(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with telegram_daemon(tmp_path, llm, telegram):
        assert (await ask(telegram, BOB_ID, BOB, "/model")).split("\n") == LISTING
        refused = await ask(telegram, BOB_ID, BOB, "/model gpt-4o")
        assert refused == (
            "Only the people who approve requests here can switch the model. "
            "/model shows the models."
        )
        await ask(telegram, BOB_ID, BOB, "hello")
        assert llm.requests[-1].body["model"] == "gpt-4o-mini"
    assert rows(tmp_path, "SELECT * FROM kv WHERE namespace = 'chat_model'") == []


async def test_the_choice_survives_new_and_a_restart_and_a_removed_one_falls_back(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    async with telegram_daemon(tmp_path, llm, telegram):
        assert await ask(telegram, OWNER, ADA, "/model gpt-4o") == SWITCHED
    async with telegram_daemon(tmp_path, llm, telegram):
        assert await ask(telegram, OWNER, ADA, "/new") == "Started a fresh conversation."
        await ask(telegram, OWNER, ADA, "still there?")
        assert llm.requests[-1].body["model"] == "gpt-4o"
    caplog.set_level(logging.WARNING, logger="bot.daemon.models")
    async with telegram_daemon(tmp_path, llm, telegram, **model_tables(llm, choices=())):
        await ask(telegram, OWNER, ADA, "one")
        await ask(telegram, OWNER, ADA, "two")
        listing = await ask(telegram, OWNER, ADA, "/model")
    assert [r.body["model"] for r in llm.requests[-2:]] == ["gpt-4o-mini", "gpt-4o-mini"]
    assert "• gpt-4o-mini (openai) — the default, in use here" in listing.split("\n")
    told = [r.getMessage() for r in caplog.records if r.name == "bot.daemon.models"]
    assert told == [
        "telegram:7001 chose the model openai:gpt-4o, which is no longer configured; "
        "it uses the default openai:gpt-4o-mini"
    ]


async def test_discord_slash_command_switches_with_its_name_option(
    tmp_path: Path, llm: FakeLLM
) -> None:
    with FakeDiscord.running(heartbeat_interval=1.0) as fake:
        channels = {"discord": discord_table(fake)}
        async with running_daemon(tmp_path, llm, channels, tables=model_tables(llm)) as daemon:
            assert await daemon.channels["discord"].status.wait_connected(10)
            await fake.await_call("PUT", r"^/applications/\d+/commands$")
            (model,) = [c for c in fake.commands() if c["name"] == "model"]
            (option,) = model["options"]
            assert (option["name"], option["type"], option.get("required", False)) == (
                "name",
                3,
                False,
            )
            dm = fake.dm_channel(fake.owner)["id"]
            run = fake.user_runs_command(
                "model", {"name": "gpt-4o"}, channel_id=dm, user=fake.owner
            )

            def answered() -> bool:
                record = fake.world.interactions[run["token"]]
                if record.original_id is None:
                    return False
                return not fake.world.messages[record.original_id]["flags"] & FLAG_LOADING

            await fake.await_until(answered)
            answer = fake.message(str(fake.interaction(run).original_id))
            assert answer["content"] == SWITCHED
            fake.user_sends(dm, fake.owner, "hello")
            await fake.await_until(lambda: len(fake.sent(dm)) >= 2)
    assert [r.body["model"] for r in llm.requests] == ["gpt-4o"]


async def test_slack_pinclaw_model_switches(tmp_path: Path, llm: FakeLLM) -> None:
    with FakeSlack.running() as slack:
        channels = {"slack": slack_table(slack)}
        async with running_daemon(tmp_path, llm, channels, tables=model_tables(llm)) as daemon:
            assert await daemon.channels["slack"].status.wait_connected(10)
            slack.user_runs_command(ALICE_DM, ALICE, "model gpt-4o")
            await slack.await_call("response_url")
            slack.user_sends(ALICE_DM, ALICE, "hello")
            await slack.await_until(lambda: len(slack.sent(ALICE_DM)) >= 1, what="a reply")
    (answer,) = slack.ephemerals()
    assert answer["text"] == SWITCHED
    assert [r.body["model"] for r in llm.requests] == ["gpt-4o"]


@asynccontextmanager
async def web_daemon(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Panel]:
    """The daemon with the web chat and the panel on a free port; a config file naming the
    same data folder and address, for ``pinclaw web token``."""
    port = free_port()
    config = tmp_path / "config.toml"
    config.write_text(
        f'[general]\ndata_dir = "state"\n[provider]\nkind = "openai"\nmodel = "fake"\n'
        f'base_url = "{llm.url}/v1"\n[web]\nlisten = "127.0.0.1:{port}"\n'
    )
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    tables = {**model_tables(llm), "web": {"listen": f"127.0.0.1:{port}"}}
    async with running_daemon(tmp_path, llm, {"web": {}}, tables=tables) as daemon:
        yield Panel(daemon, daemon.web.url, config, home)


async def test_the_web_chat_lists_and_switches_by_typing_and_by_its_model_form(
    tmp_path: Path, llm: FakeLLM
) -> None:
    async with web_daemon(tmp_path, llm) as panel, client_for(panel.url) as client:
        await panel.logged_in(client)
        page = await open_chat(client)
        options = OPTION.findall(page.html)
        assert options == [
            ("/model default", " selected", "gpt-4o-mini (openai), the default"),
            ("/model openai:gpt-4o", "", "gpt-4o (openai)"),
            ("/model anthropic:claude-haiku-4-5", "", "claude-haiku-4-5 (anthropic)"),
            ("/model ollama:qwen3", "", "qwen3 (ollama)"),
        ]
        async with EventReader(client, page) as events:
            # Typed, then chosen in the form (posted as the browser posts it), then a turn.
            for count, text in enumerate(("/model", options[1][0], "hello"), start=1):
                form = {"text": text, "nonce": f"nonce{count:04}", "csrf": page.csrf}
                sent = await client.post("/chat/send", data=form)
                assert sent.status_code == 303 and sent.headers["location"] == "/chat"
                await events.wait_for(partial(has_entries, events, count))
            listing, switched, _ = (e["text"] for e in events.entries("bot"))
        again = await open_chat(client)
        assert [o[:2] for o in OPTION.findall(again.html)][:2] == [
            ("/model default", ""),
            ("/model openai:gpt-4o", " selected"),
        ]
    assert listing.split("\n") == [line.replace("•", "-") for line in LISTING]
    assert switched == SWITCHED
    assert [r.body["model"] for r in llm.requests] == ["gpt-4o"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_the_usage_footer_shows_the_turns_recorded_tokens_and_cost(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, stream: bool
) -> None:
    llm.queue(CallTools([("clock", {})]), Say("It is about noon."))
    prices = {"gpt-4o-mini": {"input_per_million": 150, "output_per_million": 600}}
    tables = {"agent": {"stream": stream, "usage_footer": True}, "usage": {"prices": prices}}
    async with telegram_daemon(tmp_path, llm, telegram, **tables):
        telegram.user_sends(OWNER, ADA, "what time is it?")

        def footed() -> list[SentMessage] | None:
            found = telegram.sent(OWNER)
            return found if found and "tokens in" in found[0].text else None

        (reply,) = await telegram.await_until(footed)
        assert await ask(telegram, OWNER, ADA, "/status") != ""
    # What the fake model reported: a quarter of each request's JSON in, a quarter of what
    # it wrote out (at least 1).
    tokens_in = sum(len(json.dumps(r.body)) // 4 for r in llm.requests)
    tokens_out = max(1, len("clock{}") // 4) + max(1, len("It is about noon.") // 4)
    cost = (tokens_in * 150 + tokens_out * 600) / 1_000_000
    line = f"— {tokens_in:,} tokens in · {tokens_out:,} out · ${money(cost)}"
    assert reply.text.split("\n") == ["It is about noon.", "", line]
    assert reply.raw_text.endswith(f"<i>{line}</i>")
    [(turn,)] = rows(tmp_path, "SELECT id FROM turns")
    recorded = rows(
        tmp_path,
        f"SELECT SUM(input_tokens), SUM(output_tokens), COUNT(*) FROM model_calls "
        f"WHERE turn_id = {turn}",
    )
    assert recorded == [(tokens_in, tokens_out, 2)]
    status = telegram.sent(OWNER)[-1].text
    assert "tokens in" not in status  # command answers carry no footer


async def test_the_footer_leaves_out_the_cost_of_a_model_without_a_price(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(Say("Hi."))
    tables = {"agent": {"stream": False, "usage_footer": True}}
    async with telegram_daemon(tmp_path, llm, telegram, **tables):
        reply = await ask(telegram, OWNER, ADA, "hello")
    tokens_in = len(json.dumps(llm.requests[0].body)) // 4
    assert reply.split("\n")[-1] == f"— {tokens_in:,} tokens in · 1 out"


def has_entries(events: EventReader, count: int) -> bool:
    """Whether the chat page shows at least ``count`` of the bot's entries."""
    return len(events.entries("bot")) >= count
