"""People as rows, inside a caller's transaction; merging two people; the chat-scope upgrade.

Two tables outside ``people`` name a person: ``memories`` (scope ``person:ID``)
and ``approval_rules`` (``person_id``, 0 for everyone). When two people become
one, both move in the same transaction as the identities, so nothing points at
a person who no longer exists. A memory key the surviving person already uses
is kept under a suffixed key ("car (telegram:7001)"): nothing is overwritten.

Before people existed, memories were scoped by chat (``CHANNEL:CHAT_ID``).
``person_behind_chat`` finds who that was: the terminal is the owner; another
chat is the one person who ever wrote there (from the stored inbound messages
and turns); a chat several people wrote in (a group) goes to the owner, who can
read and move its entries with ``pinclaw memory``.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from typing import Literal

import aiosqlite

from bot.store.db import on_thread

log = logging.getLogger(__name__)

TERMINAL = "terminal"
PANEL_OWNER = "web:owner"
"""The web chat's sender: whoever logged in to the web panel, which only the owner can."""
OWNER_ACCOUNTS = frozenset({TERMINAL, PANEL_OWNER})
"""Accounts that are the owner's by where they are used; never linked to anyone else."""

How = Literal["owner", "seen", "paired", "linked"]
"""How an identity came to its person: the owner's terminal, a first message,
the owner's pairing approval, or a link code."""


def scope_person(scope: str) -> int | None:
    """The person a memory scope belongs to, or None (shared, or not a person's)."""
    kind, _, number = scope.partition(":")
    return int(number) if kind == "person" and number.isdigit() else None


def person_scope(person_id: int) -> str:
    """The memory scope of one person's private memories."""
    return f"person:{person_id}"


def identity_of(channel: str, user_id: str) -> str:
    """The identity of a sender: ``terminal``, or ``CHANNEL:USER_ID``."""
    return TERMINAL if channel == TERMINAL else f"{channel}:{user_id}"


async def person_for_identity(
    conn: aiosqlite.Connection, identity: str, label: str, how: How, now: float | None = None
) -> int:
    """The id of the person behind ``identity``, made on first sight (inside a write)."""
    return await on_thread(conn, lambda raw: claim_identity(raw, identity, label, how, now))


def claim_identity(
    conn: sqlite3.Connection, identity: str, label: str, how: How, now: float | None = None
) -> int:
    """``person_for_identity`` on the plain connection (on its thread, inside a write)."""
    current = conn.execute(_PERSON_OF, (identity,)).fetchone()
    if current is not None:
        return int(current[0])
    now = time.time() if now is None else now
    if identity in OWNER_ACCOUNTS:  # the web chat's, on its first message
        person_id = int(conn.execute(_OWNER).fetchone()[0])
        conn.execute(_ADD_IDENTITY, _identity_row(identity, person_id, label, "owner", now))
        return person_id
    name = " ".join(label.split())[:80] or identity
    cursor = conn.execute(
        "INSERT INTO people (name, is_owner, created_at) VALUES (?, 0, ?)", (name, now)
    )
    assert cursor.lastrowid is not None
    person_id = cursor.lastrowid
    conn.execute(_ADD_IDENTITY, _identity_row(identity, person_id, label, how, now))
    return person_id


async def owner_id(conn: aiosqlite.Connection) -> int:
    """The owner's person id."""
    rows = await conn.execute_fetchall(_OWNER)
    return int(next(iter(rows))[0])


async def person_of(conn: aiosqlite.Connection, identity: str) -> int | None:
    rows = await conn.execute_fetchall(_PERSON_OF, (identity,))
    return next((int(row[0]) for row in rows), None)


async def is_owner(conn: aiosqlite.Connection, person_id: int) -> bool:
    rows = await conn.execute_fetchall("SELECT is_owner FROM people WHERE id = ?", (person_id,))
    return any(bool(row[0]) for row in rows)


async def identities_of(conn: aiosqlite.Connection, person_id: int) -> list[str]:
    rows = await conn.execute_fetchall(
        "SELECT identity FROM identities WHERE person_id = ?", (person_id,)
    )
    return [str(row[0]) for row in rows]


_OWNER = "SELECT id FROM people WHERE is_owner = 1"
_PERSON_OF = "SELECT person_id FROM identities WHERE identity = ?"
_ADD_IDENTITY = (
    "INSERT INTO identities (identity, person_id, label, how, linked_at) VALUES (?, ?, ?, ?, ?)"
)


def _identity_row(
    identity: str, person_id: int, label: str, how: str, now: float
) -> tuple[object, ...]:
    return (identity, person_id, " ".join(label.split())[:80], how, now)


async def add_identity(
    conn: aiosqlite.Connection, identity: str, person_id: int, label: str, how: str, now: float
) -> None:
    await conn.execute(_ADD_IDENTITY, _identity_row(identity, person_id, label, how, now))


async def import_paired(conn: aiosqlite.Connection) -> None:
    """People for everyone pairing admitted before people existed (a migration step)."""
    if not await _has_table(conn, "paired_users"):
        return
    rows = await conn.execute_fetchall(
        "SELECT channel, user_id, user_name, approved_at FROM paired_users ORDER BY approved_at"
    )
    for channel, user_id, name, approved_at in rows:
        identity = identity_of(str(channel), str(user_id))
        await person_for_identity(conn, identity, str(name), "paired", float(approved_at))


async def merge(conn: aiosqlite.Connection, source: int, into: int, *, tag: str) -> None:
    """Fold person ``source`` into ``into`` (inside a write): identities, memories, rules."""
    await conn.execute("UPDATE identities SET person_id = ? WHERE person_id = ?", (into, source))
    if await _has_table(conn, "memories"):
        await rescope(conn, person_scope(source), person_scope(into), tag=tag)
    if await _has_column(conn, "approval_rules", "person_id"):
        await conn.execute(
            "DELETE FROM approval_rules WHERE person_id = ? AND EXISTS (SELECT 1 FROM "
            "approval_rules AS kept WHERE kept.person_id = ? AND kept.tool = approval_rules.tool "
            "AND kept.rule_key = approval_rules.rule_key)",
            (source, into),
        )
        await conn.execute(
            "UPDATE approval_rules SET person_id = ? WHERE person_id = ?", (into, source)
        )
    await conn.execute("DELETE FROM people WHERE id = ?", (source,))


async def rescope(conn: aiosqlite.Connection, old: str, new: str, *, tag: str) -> int:
    """Move every memory of scope ``old`` to ``new``; a key ``new`` holds gets `` (tag)``.

    Returns how many entries moved.
    """
    clashes = await conn.execute_fetchall(
        "SELECT id, key FROM memories WHERE scope = ? AND key IN "
        "(SELECT key FROM memories WHERE scope = ?)",
        (old, new),
    )
    for memory_id, key in clashes:
        free = await _free_key(conn, str(key), tag, (old, new))
        await conn.execute("UPDATE memories SET key = ? WHERE id = ?", (free, memory_id))
    cursor = await conn.execute("UPDATE memories SET scope = ? WHERE scope = ?", (new, old))
    return cursor.rowcount


async def person_behind_chat(conn: aiosqlite.Connection, scope: str) -> int:
    """The person a chat scope of the release before people belongs to (see above)."""
    channel, _, chat_id = scope.partition(":")
    if channel == TERMINAL or not chat_id:
        return await owner_id(conn)
    senders: dict[str, str] = {}
    if await _has_table(conn, "inbound"):
        rows = await conn.execute_fetchall(
            "SELECT json_extract(payload, '$.sender_id'), json_extract(payload, '$.sender_name') "
            "FROM inbound WHERE channel = ? AND json_extract(payload, '$.chat_id') = ?",
            (channel, chat_id),
        )
        senders.update((str(row[0]), str(row[1] or "")) for row in rows if row[0] is not None)
    if await _has_column(conn, "turns", "sender"):
        rows = await conn.execute_fetchall(
            "SELECT DISTINCT t.sender FROM turns AS t JOIN sessions AS s ON s.id = t.session_id "
            "WHERE s.channel = ? AND s.chat_id = ? AND COALESCE(t.sender, '') != ''",
            (channel, chat_id),
        )
        for row in rows:
            senders.setdefault(str(row[0]), "")
    if len(senders) == 1:
        (sender, name), *_ = senders.items()
        return await person_for_identity(conn, identity_of(channel, sender), name, "seen")
    log.warning(
        "memories of chat %s went to the owner: %s",
        scope,
        "several people wrote there" if senders else "nobody is known to have written there",
    )
    return await owner_id(conn)


async def _free_key(conn: aiosqlite.Connection, key: str, tag: str, scopes: tuple[str, str]) -> str:
    number = 1
    while True:
        candidate = f"{key} ({tag})" if number == 1 else f"{key} ({tag} {number})"
        rows = await conn.execute_fetchall(
            "SELECT 1 FROM memories WHERE key = ? AND scope IN (?, ?)", (candidate, *scopes)
        )
        if not rows:
            return candidate
        number += 1


async def _has_table(conn: aiosqlite.Connection, name: str) -> bool:
    rows = await conn.execute_fetchall(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
    )
    return bool(rows)


async def _has_column(conn: aiosqlite.Connection, table: str, column: str) -> bool:
    rows = await conn.execute_fetchall(
        "SELECT 1 FROM pragma_table_info(?) WHERE name = ?", (table, column)
    )
    return bool(rows)
