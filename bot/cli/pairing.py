"""``pinclaw pairing list | approve CODE | revoke CHANNEL USER``: works while the daemon runs.

The daemon checks the pairing tables on every message from someone not listed
in the config, so an approval takes effect with the person's next message.
"""

from __future__ import annotations

import time

from bot.config import LoadedConfig
from bot.core.errors import UserError
from bot.store.db import Database
from bot.store.pairing import PairedUser, PairingRequest, PairingStore
from bot.store.people import PeopleStore


async def run_pairing(
    loaded: LoadedConfig, action: str, *, code: str = "", channel: str = "", user_id: str = ""
) -> int:
    """Run one pairing action and print its result; return the exit code."""
    db = Database(loaded.database)
    await db.open()
    try:
        store, people = PairingStore(db), PeopleStore(db)
        await store.setup()
        await people.setup()
        if action == "approve":
            user = await store.approve(code)
            if user is None:
                raise UserError(f"no pairing code {code!r} is waiting (codes expire after 1 hour)")
            person = await people.person_for(user.channel, user.user_id, user.user_name, "paired")
            print(
                f"Admitted {user.user_name or user.user_id} (id {user.user_id}) on {user.channel}"
                f" as person #{person.id} {person.name}."
            )
        elif action == "revoke":
            if not await store.revoke(channel, user_id):
                raise UserError(f"{user_id} on {channel} was not admitted by pairing")
            print(f"Removed {user_id} on {channel}.")
        else:
            _print_list(await store.pending(), await store.paired())
    finally:
        await db.close()
    return 0


def _print_list(pending: list[PairingRequest], paired: list[PairedUser]) -> None:
    now = time.time()
    if pending:
        print("Waiting for approval:")
        for request in pending:
            minutes = max(0, int((request.expires_at - now) // 60))
            who = request.user_name or request.user_id
            print(
                f"  {request.code}  {request.channel}  {who} (id {request.user_id})"
                f"  expires in {minutes} min"
            )
    else:
        print("No pairing codes are waiting.")
    if paired:
        print("Admitted by pairing:")
        for user in paired:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(user.approved_at))
            who = user.user_name or user.user_id
            print(f"  {user.channel}  {who} (id {user.user_id})  since {when}")
