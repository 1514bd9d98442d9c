"""Upgrading a database made by PinClaw 0.1.0 (memories kept per chat) to people.

``fixtures/release-0.1.0.db`` was written through that release's own stores by
``fixtures/make_release_db.py``: Ana's and Ben's private chats, a group both
wrote in, two one-off ``pinclaw agent -m`` runs that each stored a "car", a
named terminal session, a shared entry, a pairing and an "always" rule. The
installed command upgrades it on first use; every memory and history row must
still be there, each memory with the person behind its chat.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path

from tests.cli_helpers import run, write_config
from tests.fake_llm import FakeLLM, Say

FIXTURE = Path(__file__).parent / "fixtures" / "release-0.1.0.db"
COUNTED = ("memories", "messages", "sessions", "turns", "inbound", "paired_users", "approvals")


def snapshot(database: Path) -> dict[str, object]:
    """Row counts, memory contents and history text, read with plain sqlite3."""
    with sqlite3.connect(database) as conn:
        counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in COUNTED}
        counts["approval_rules"] = conn.execute("SELECT count(*) FROM approval_rules").fetchone()[0]
        contents = sorted(conn.execute("SELECT content, category FROM memories").fetchall())
        history = conn.execute("SELECT session_id, role, content FROM messages ORDER BY id")
        return {"counts": counts, "memories": contents, "history": history.fetchall()}


def owners(database: Path) -> dict[str, str]:
    """Each memory key, and whose it is now (a person's name, or "shared")."""
    with sqlite3.connect(database) as conn:
        names = dict(conn.execute("SELECT 'person:' || id, name FROM people").fetchall())
        rows = conn.execute("SELECT key, scope FROM memories").fetchall()
    return {key: names.get(scope, scope) for key, scope in rows}


async def test_a_release_database_keeps_every_row_and_memories_go_to_people(
    tmp_path: Path, llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    write_config(home, f'[provider]\nkind = "openai"\nmodel = "m"\nbase_url = "{llm.url}/v1"\n')
    database = home / ".pinclaw" / "pinclaw.db"
    shutil.copyfile(FIXTURE, database)
    before = snapshot(database)
    assert before["counts"] == {
        "memories": 8, "messages": 14, "sessions": 6, "turns": 7, "inbound": 4,
        "paired_users": 1, "approvals": 0, "approval_rules": 1,
    }  # fmt: skip

    listed = await asyncio.to_thread(run, home, "people", "list")
    assert listed.returncode == 0, listed.stderr
    assert snapshot(database) == before  # nothing lost, nothing changed but whose it is
    assert owners(database) == {
        "coffee": "Ana",
        "msg-ana": "Ana",
        "bike": "Ben",
        "dinner": "owner",  # a group both wrote in: the owner keeps it
        "car": "owner",
        "car (terminal:agent-bbbb2222)": "owner",  # two runs' "car": both kept
        "desk": "owner",
        "wifi": "shared",
    }
    assert "#2  Ben  ·  1 private memory\n    telegram:7002  (paired 2025-10-09)" in listed.stdout
    assert "Ana  ·  2 private memories\n    telegram:7001  (wrote " in listed.stdout

    rules = await asyncio.to_thread(run, home, "approvals", "list")
    assert "#1  clock  clock  for everyone  (by Ana, " in rules.stdout
    sessions = await asyncio.to_thread(run, home, "sessions", "list")
    for key in ("telegram:7001", "telegram:-1001", "terminal:work", "terminal:agent-aaaa1111"):
        assert key in sessions.stdout

    llm.queue(Say("A blue Golf, B-XY 123."))
    answer = await asyncio.to_thread(run, home, "agent", "-m", "which car do I have?")
    assert answer.returncode == 0, answer.stderr
    system = llm.requests[-1].view.system
    assert "The owner's car is a blue Golf" in system and "B-XY 123" in system
    assert "Ana takes her coffee" not in system

    again = await asyncio.to_thread(run, home, "people", "list")
    said = listed.stdout.replace("owner  (owner)  ·  4 private", "owner  (owner)  ·  5 private")
    assert again.stdout == said  # the upgrade ran once; the owner's question was kept
    after = snapshot(database)
    counts = after["counts"]
    assert isinstance(counts, dict) and counts["memories"] == 9  # + what the owner just said
