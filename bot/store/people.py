"""People and their identities: one person, however many accounts they write from.

A person has a name and any number of identities: ``terminal`` (whoever sits at
the machine's keyboard, always the owner), ``web:owner`` (whoever logged in to the
web panel: the owner too, from its first message in the web chat), ``telegram:123``,
``discord:456``, ``slack:U1`` (the channel and the platform's user id). The owner is person #1
from the first start. Anyone PinClaw answers becomes a person with their first
message (named as the platform names them); pairing makes one too.

An account joins another person only through a one-time code (``pinclaw people
link``) sent from that account as ``/link CODE``: typing an id proves nothing.
If the account's former person had no other account, the two become one: their
memories and "always" rules move along (``bot.store.people_rows``).

Memories name their person by scope ``person:ID`` (``person_scope``).
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bot.store.db import Database
from bot.store.people_rows import (
    OWNER_ACCOUNTS,
    TERMINAL,
    How,
    add_identity,
    claim_identity,
    identities_of,
    identity_of,
    import_paired,
    is_owner,
    merge,
    person_of,
    person_scope,
    scope_person,
)
from bot.store.schema import Step

LINK_TTL_S = 900.0
OWNER_NAME = "owner"

MIGRATIONS: list[Step] = [
    """
    CREATE TABLE people (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        is_owner INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    );
    CREATE UNIQUE INDEX people_one_owner ON people (is_owner) WHERE is_owner = 1;
    CREATE TABLE identities (
        identity TEXT PRIMARY KEY,
        person_id INTEGER NOT NULL REFERENCES people (id) ON DELETE CASCADE,
        label TEXT NOT NULL DEFAULT '',
        how TEXT NOT NULL,
        linked_at REAL NOT NULL
    );
    CREATE INDEX identities_by_person ON identities (person_id);
    CREATE TABLE link_codes (
        code TEXT PRIMARY KEY,
        person_id INTEGER NOT NULL REFERENCES people (id) ON DELETE CASCADE,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL
    );
    INSERT INTO people (id, name, is_owner, created_at)
        VALUES (1, 'owner', 1, CAST(strftime('%s', 'now') AS REAL));
    INSERT INTO identities (identity, person_id, label, how, linked_at)
        VALUES ('terminal', 1, '', 'owner', CAST(strftime('%s', 'now') AS REAL));
    """,
    import_paired,
]


@dataclass(frozen=True, slots=True)
class Identity:
    """One account of a person; ``label`` is what the platform called them."""

    identity: str
    label: str
    how: str
    linked_at: float

    @property
    def channel(self) -> str:
        """The channel of this identity (``terminal`` for the terminal)."""
        return self.identity.partition(":")[0]

    @property
    def user_id(self) -> str:
        """The platform's user id ("" for the terminal)."""
        return self.identity.partition(":")[2]


@dataclass(frozen=True, slots=True)
class Person:
    """Someone PinClaw knows, with every account linked to them."""

    id: int
    name: str
    is_owner: bool
    created_at: float
    identities: tuple[Identity, ...] = ()

    @property
    def scope(self) -> str:
        """The scope of this person's private memories."""
        return person_scope(self.id)


@dataclass(frozen=True, slots=True)
class LinkOutcome:
    """What ``/link CODE`` did: ``linked`` (``merged`` names the person folded in),
    ``already`` (the account was that person's), ``invalid`` (no such code, or
    expired), or ``owner_account`` (the owner's account cannot be given away)."""

    kind: Literal["linked", "already", "invalid", "owner_account"]
    person: Person | None = None
    merged: int | None = None


def new_link_code() -> str:
    """A random link code, in the pairing codes' alphabet (no look-alikes)."""
    from bot.store.pairing import ALPHABET, CODE_LENGTH  # pairing, loaded when it is used

    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


class PeopleStore:
    """Reads and writes people, identities and link codes."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def setup(self) -> None:
        """Create or upgrade the tables (the owner exists from here on)."""
        await self._db.migrate("people", MIGRATIONS)

    async def owner(self) -> Person:
        """The owner."""
        rows = await self._db.conn.execute_fetchall("SELECT id FROM people WHERE is_owner = 1")
        person = await self.get(int(next(iter(rows))[0]))
        assert person is not None
        return person

    async def get(self, person_id: int) -> Person | None:
        """One person with their identities, or None."""
        found = await self._people("WHERE p.id = ?", (person_id,))
        return found[0] if found else None

    async def all(self) -> list[Person]:
        """Everyone, the owner first, then in the order they became known."""
        return await self._people("", ())

    async def of_identity(self, identity: str) -> Person | None:
        """The person an identity belongs to, if it is known."""
        found = await self._people(
            "WHERE p.id = (SELECT person_id FROM identities WHERE identity = ?)", (identity,)
        )
        return found[0] if found else None

    async def person_for(
        self, channel: str, user_id: str, label: str = "", how: How = "seen"
    ) -> Person:
        """The person behind a sender, made (named ``label``) on first sight."""
        identity = identity_of(channel, user_id)

        def claim(conn: sqlite3.Connection) -> list[Person]:  # one trip, known or new
            person_id = claim_identity(conn, identity, label, how)
            return _people_of(conn.execute(_people_query("WHERE p.id = ?"), (person_id,)))

        (person,) = await self._db.transaction(claim)
        return person

    async def speaker(
        self, channel: str, user_id: str, label: str = "", origin: str = "chat"
    ) -> Person | None:
        """Whose turn this is: the sender of a chat message (made on first sight), the
        owner for the heartbeat and for jobs set up at the command line, the creator
        of any other job if known. None: nobody's (a job of someone since forgotten)."""
        scheduled = origin.startswith(("cron", "trigger"))
        if origin == "heartbeat" or (scheduled and user_id == OWNER_NAME):
            return await self.owner()
        if origin == "chat" or channel == TERMINAL:
            return await self.person_for(channel, user_id, label)
        return await self.of_identity(identity_of(channel, user_id))

    async def find(self, ref: str) -> Person | list[Person] | None:
        """A person by ``#ID``/``ID``, ``owner``, an identity, or a name.

        A name two people share gives both (the caller asks for an id).
        """
        ref = ref.strip()
        number = ref.removeprefix("#")
        if number.isdigit():
            return await self.get(int(number))
        if ref.lower() == OWNER_NAME:
            return await self.owner()
        if ref == TERMINAL or ":" in ref:
            return await self.of_identity(ref)
        named = [p for p in await self.all() if p.name.casefold() == ref.casefold()]
        return named[0] if len(named) == 1 else (named or None)

    async def rename(self, person_id: int, name: str) -> bool:
        """Give a person a new name; False if there is no such person."""
        async with self._db.write() as conn:
            cursor = await conn.execute(
                "UPDATE people SET name = ? WHERE id = ?", (name, person_id)
            )
        return cursor.rowcount == 1

    async def new_link(self, person_id: int, now: float | None = None) -> tuple[str, float]:
        """A one-time code that links the account sending it to ``person_id``; (code, expiry)."""
        now = time.time() if now is None else now
        code, expires = new_link_code(), now + LINK_TTL_S
        async with self._db.write() as conn:
            await conn.execute("DELETE FROM link_codes WHERE expires_at <= ?", (now,))
            await conn.execute(
                "INSERT INTO link_codes (code, person_id, created_at, expires_at) "
                "VALUES (?, ?, ?, ?)",
                (code, person_id, now, expires),
            )
        return code, expires

    async def void_link(self, code: str) -> bool:
        """Cancel a code (it was shown where others could read it); True if it existed."""
        from bot.store.pairing import normalize_code

        async with self._db.write() as conn:
            cursor = await conn.execute(
                "DELETE FROM link_codes WHERE code = ?", (normalize_code(code),)
            )
        return cursor.rowcount == 1

    async def redeem(
        self, code: str, channel: str, user_id: str, label: str = "", now: float | None = None
    ) -> LinkOutcome:
        """Link the account that sent ``code`` to the code's person, in one transaction.

        The code is used up whatever happens. An account that was a person of its
        own (and nothing else) is merged into the code's person.
        """
        from bot.store.pairing import normalize_code

        now = time.time() if now is None else now
        identity = identity_of(channel, user_id)
        async with self._db.write() as conn:
            rows = await conn.execute_fetchall(
                "SELECT person_id FROM link_codes WHERE code = ? AND expires_at > ?",
                (normalize_code(code), now),
            )
            await conn.execute("DELETE FROM link_codes WHERE code = ?", (normalize_code(code),))
            target = next((int(row[0]) for row in rows), None)
            if target is None or identity in OWNER_ACCOUNTS:
                return LinkOutcome("invalid")
            current = await person_of(conn, identity)
            merged: int | None = None
            if current == target:
                kind: Literal["linked", "already"] = "already"
            elif current is not None and await is_owner(conn, current):
                return LinkOutcome("owner_account")
            else:
                kind = "linked"
                if current is None:
                    await add_identity(conn, identity, target, label, "linked", now)
                else:
                    await conn.execute(
                        "UPDATE identities SET person_id = ?, how = 'linked', linked_at = ? "
                        "WHERE identity = ?",
                        (target, now, identity),
                    )
                    if not await identities_of(conn, current):
                        await merge(conn, current, target, tag=identity)
                        merged = current
        return LinkOutcome(kind, await self.get(target), merged)

    async def unlink(self, identity: str) -> Person | None:
        """Take an account from its person (it becomes a new person when it writes next).

        Returns the person it was taken from, or None if nobody had it. The
        terminal and the web chat are always the owner's and cannot be unlinked.
        """
        person = await self.of_identity(identity)
        if person is None or identity in OWNER_ACCOUNTS:
            return None
        async with self._db.write() as conn:
            await conn.execute("DELETE FROM identities WHERE identity = ?", (identity,))
        return person

    async def _people(self, where: str, params: Sequence[object]) -> list[Person]:
        return _people_of(await self._db.conn.execute_fetchall(_people_query(where), params))


def _people_query(where: str) -> str:
    """The people ``where`` selects, one row per identity, in ``_people_of``'s order."""
    return (
        "SELECT p.id, p.name, p.is_owner, p.created_at, i.identity, i.label, i.how, "
        f"i.linked_at FROM people AS p LEFT JOIN identities AS i ON i.person_id = p.id {where} "
        "ORDER BY p.is_owner DESC, p.id, i.identity = 'terminal' DESC, i.linked_at, i.identity"
    )


def _people_of(rows: Iterable[Sequence[Any]]) -> list[Person]:
    """The people in the rows of a ``_people_query``."""
    people: dict[int, Person] = {}
    accounts: dict[int, list[Identity]] = {}
    for row in rows:
        person_id = int(row[0])
        if person_id not in people:
            people[person_id] = Person(person_id, str(row[1]), bool(row[2]), float(row[3]))
            accounts[person_id] = []
        if row[4] is not None:
            accounts[person_id].append(
                Identity(str(row[4]), str(row[5]), str(row[6]), float(row[7]))
            )
    return [
        Person(p.id, p.name, p.is_owner, p.created_at, tuple(accounts[p.id]))
        for p in people.values()
    ]


__all__ = ["OWNER_ACCOUNTS", "TERMINAL", "identity_of", "person_scope", "scope_person"]
