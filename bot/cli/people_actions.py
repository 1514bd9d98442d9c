"""What ``pinclaw people`` does: read and change the people tables while the daemon runs."""

from __future__ import annotations

import argparse
import time

from bot.config import LoadedConfig
from bot.core.errors import UsageError
from bot.memory.store import MemoryStore
from bot.store.db import Database
from bot.store.people import LINK_TTL_S, OWNER_ACCOUNTS, TERMINAL, PeopleStore, Person

_HOW = {"owner": "the terminal", "seen": "wrote", "paired": "paired", "linked": "linked"}


async def people_action(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    """Open the database, run the action, print the outcome."""
    db = Database(loaded.database)
    await db.open()
    try:
        memory = MemoryStore(db)
        await memory.setup()  # people first, and memories kept by chat move to people
        people = memory.people
        action = args.people_command
        if action == "list":
            counts = await memory.count_by_scope()
            for person in await people.all():
                print(_describe(person, counts.get(person.scope, 0)))
        elif action == "link":
            await _link(people, args.person)
        elif action == "unlink":
            await _unlink(people, args.account)
        else:
            await _rename(people, args.person, " ".join(args.name))
    finally:
        await db.close()
    return 0


async def find(people: PeopleStore, ref: str) -> Person:
    """The one person ``ref`` names, or a ``UsageError`` saying why not."""
    found = await people.find(ref)
    if isinstance(found, list):
        numbers = ", ".join(f"#{p.id}" for p in found)
        raise UsageError(f"several people are called {ref!r} ({numbers}); use the number")
    if found is None:
        raise UsageError(f"nobody is known as {ref!r} (see `pinclaw people list`)")
    return found


def _describe(person: Person, memories: int) -> str:
    title = f"#{person.id}  {person.name}" + ("  (owner)" if person.is_owner else "")
    lines = [f"{title}  ·  {memories} private memor{'y' if memories == 1 else 'ies'}"]
    for account in person.identities:
        when = time.strftime("%Y-%m-%d", time.localtime(account.linked_at))
        label = f"  {account.label}" if account.label and account.label != person.name else ""
        lines.append(
            f"    {account.identity}{label}  ({_HOW.get(account.how, account.how)} {when})"
        )
    if not person.identities:
        lines.append("    no accounts (link one with `pinclaw people link`)")
    return "\n".join(lines)


async def _link(people: PeopleStore, ref: str) -> None:
    person = await find(people, ref)
    code, _ = await people.new_link(person.id)
    minutes = int(LINK_TTL_S // 60)
    whom = f"{person.name} (#{person.id}{', the owner' if person.is_owner else ''})"
    print(
        f"Link code for {whom}: {code}\n"
        f"Send it within {minutes} minutes from the account to link, in a private chat "
        "with the bot:\n"
        f"  /link {code}            on Telegram or Discord\n"
        f"  /pinclaw link {code}    on Slack\n"
        "The code works once. What that account's person remembered moves to "
        f"{person.name} if it has no other account."
    )


async def _unlink(people: PeopleStore, account: str) -> None:
    if account in OWNER_ACCOUNTS:
        what = "the terminal" if account == TERMINAL else f"{account} (the web chat)"
        raise UsageError(f"{what} always belongs to the owner")
    person = await people.unlink(account)
    if person is None:
        raise UsageError(f"no person has the account {account!r} (see `pinclaw people list`)")
    channel, _, user_id = account.partition(":")
    print(
        f"Unlinked {account} from {person.name}. When it writes again it is a person of its "
        "own, with nothing remembered; it may still talk to PinClaw "
        f"(`pinclaw pairing revoke {channel} {user_id}` removes that if it was paired)."
    )


async def _rename(people: PeopleStore, ref: str, name: str) -> None:
    name = " ".join(name.split())
    if not name or len(name) > 80:
        raise UsageError("a name needs 1 to 80 characters")
    person = await find(people, ref)
    await people.rename(person.id, name)
    print(f"#{person.id} {person.name} is now called {name}")
