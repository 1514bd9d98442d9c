"""Memory end to end: the real daemon, PTB and the fake Telegram, the fake embeddings
endpoint, and ``pinclaw memory`` as a new user runs it.

Ana (7001) and Ben (7002) each talk to the bot in private. What Ana says is
remembered for Ana: recalled after ``/new`` and after a restart, found by
``pinclaw memory search``, never shown to Ben.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bot.config.memory import MemoryConfig
from bot.memory.models import CONVERSATION, CORE, NewMemory
from bot.memory.service import MemoryService
from bot.memory.store import MemoryStore
from bot.store.db import Database
from tests.cli_helpers import run, write_config
from tests.daemon_harness import daemon_from
from tests.fake_embeddings import FakeEmbeddings
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.fake_telegram import FakeTelegram

ANA, BEN = 7001, 7002
USERS = {ANA: FakeTelegram.user(ANA, "Ana", "ana"), BEN: FakeTelegram.user(BEN, "Ben", "ben")}
COFFEE = "I take my coffee without sugar"


def home_config(home: Path, llm: FakeLLM, telegram: FakeTelegram, memory: str = "") -> Path:
    """A config file a new user could have written, state under ``home/state``."""
    return write_config(
        home,
        f'[general]\ndata_dir = "{home / "state"}"\n'
        f'[provider]\nkind = "openai"\nmodel = "fake"\nbase_url = "{llm.url}/v1"\n'
        f'[heartbeat]\ninterval = "0"\n'
        f"[memory]\n{memory}\n"
        f'[channels.telegram]\ntoken = "{telegram.token}"\napi_base_url = "{telegram.url}"\n'
        f"allowed_users = [{ANA}, {BEN}]\npoll_timeout_s = 1\n",
    )


async def ask(telegram: FakeTelegram, user: int, text: str) -> str:
    """Send ``text`` as ``user``; wait for and return the bot's next reply in that chat."""
    before = len(telegram.sent(user))
    telegram.user_sends(user, USERS[user], text)
    reply = await telegram.await_until(lambda: telegram.sent(user)[before:] or None)
    return reply[0].text


async def test_a_preference_is_recalled_after_new_and_a_restart_but_not_for_others(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    home = tmp_path / "home"
    config = home_config(home, llm, telegram)
    llm.queue(Say("Noted."))
    async with daemon_from(config):
        assert await ask(telegram, ANA, COFFEE) == "Noted."
        assert await ask(telegram, ANA, "/new") == "Started a fresh conversation."
    llm.queue(Say("Without sugar."), Say("I don't know yet."))
    async with daemon_from(config):
        assert await ask(telegram, ANA, "how do I like my coffee?") == "Without sugar."
        assert await ask(telegram, BEN, "how do I like my coffee?") == "I don't know yet."
    anas, bens = llm.requests[1].view, llm.requests[2].view
    assert "## What you remember" in anas.system and COFFEE in anas.system
    conversation = [m for m in llm.requests[1].body["messages"] if m["role"] != "system"]
    assert COFFEE not in str(conversation)  # a fresh session: it came from memory, not history
    assert COFFEE not in bens.system and "What you remember" not in bens.system
    found = await asyncio.to_thread(run, home, "memory", "search", "coffee")
    assert found.returncode == 0, found.stderr
    assert COFFEE in found.stdout and "(Ana #" in found.stdout


async def test_with_embeddings_a_paraphrase_finds_what_the_model_stored(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, embedder_server: FakeEmbeddings
) -> None:
    home = tmp_path / "home"
    memory = (
        f'embedding_provider = "openai"\nembedding_base_url = "{embedder_server.url}/v1"\n'
        'embedding_model = "fake-embed"\nstore_conversation = false\n'
    )
    config = home_config(home, llm, telegram, memory)
    store = CallTools([("memory_store", {"content": "Ana drinks her coffee black, no sugar",
                                         "key": "coffee"})])  # fmt: skip
    llm.queue(store, Say("I'll remember that."), Say("Black, no sugar."))
    async with daemon_from(config):
        assert await ask(telegram, ANA, "remember: black coffee for me") == "I'll remember that."
        await ask(telegram, ANA, "/new")
        assert await ask(telegram, ANA, "do I like sweet espresso?") == "Black, no sugar."
    assert llm.tool_results()[0] == "Remembered for Ana under 'coffee' (core)."
    assert "[core] coffee: Ana drinks her coffee black, no sugar" in llm.requests[2].view.system
    listed = await asyncio.to_thread(run, home, "memory", "list")
    assert "[core] coffee: Ana drinks her coffee black, no sugar" in listed.stdout
    exported = await asyncio.to_thread(run, home, "memory", "export")
    assert exported.stdout.startswith("Wrote 1 core entries to ")
    for lost in (home / "state").glob("pinclaw.db*"):
        lost.unlink()  # the database is gone; the snapshot in the workspace is not
    restored = await asyncio.to_thread(run, home, "memory", "search", "coffee")
    assert "Ana drinks her coffee black, no sugar" in restored.stdout


async def test_the_snapshot_restores_core_memories_when_the_database_is_lost(
    tmp_path: Path,
) -> None:
    settings = MemoryConfig()
    snapshot = tmp_path / "MEMORY_SNAPSHOT.md"
    async with opened(tmp_path / "a.db", settings) as memory:
        await memory.people.person_for("telegram", "7002", "Ben")  # person ids differ later
        ana = await memory.people.person_for("telegram", "7001", "Ana")
        owner = await memory.people.owner()
        await memory.remember(NewMemory("coffee", COFFEE, CORE, ana.scope))
        await memory.remember(NewMemory("car", "The car is a blue Golf", CORE, owner.scope))
        await memory.remember(NewMemory("wifi", "The guest wifi is 'garden'", CORE, "shared"))
        await memory.remember(NewMemory("msg:1", "hello there", CONVERSATION, ana.scope))
        assert await memory.export_snapshot(snapshot) == 3
    text = snapshot.read_text()
    assert "### coffee" in text and COFFEE in text and "hello there" not in text
    assert "scope=account:telegram:7001 " in text and "scope=owner " in text
    async with opened(tmp_path / "b.db", settings) as memory:
        assert await memory.restore_snapshot(snapshot) == 3
        ana = await memory.people.person_for("telegram", "7001", "Ana")
        owner = await memory.people.owner()
        back = await memory.store.get("coffee", [ana.scope])
        found = await memory.recall("coffee", [ana.scope, "shared"], 5)
        car = await memory.store.get("car", [owner.scope])
        not_owners = await memory.store.get("coffee", [owner.scope])
    assert back is not None and back.content == COFFEE and back.category == CORE
    assert [hit.memory.key for hit in found] == ["coffee"]
    assert car is not None and not_owners is None


async def test_hygiene_drops_old_conversation_and_keeps_core(tmp_path: Path) -> None:
    old = time.time() - 31 * 86400
    async with opened(tmp_path / "m.db", MemoryConfig()) as memory:
        await memory.remember(NewMemory("msg:old", "old chatter", CONVERSATION, "t:1"), now=old)
        await memory.remember(NewMemory("msg:new", "new chatter", CONVERSATION, "t:1"))
        await memory.remember(NewMemory("fact", "an old fact", CORE, "t:1"), now=old)
        outcome = await memory.hygiene(tmp_path / "MEMORY_SNAPSHOT.md")
        keys = sorted(m.key for m in await memory.store.list(None, None))
    assert keys == ["fact", "msg:new"]
    assert outcome.startswith("removed 1 conversation entries older than 30 days")


@asynccontextmanager
async def opened(path: Path, settings: MemoryConfig) -> AsyncIterator[MemoryService]:
    """A keyword-only memory service on a fresh database file."""
    db = Database(path)
    await db.open()
    try:
        store = MemoryStore(db)
        await store.setup()
        service = MemoryService(store=store, settings=settings)
        await service.start()
        yield service
        await service.stop()
    finally:
        await db.close()
