"""``pinclaw approvals list | revoke ID``: the "always allow" rules, readable and removable.

Each rule says whom it is for: one person (they tapped "Always for NAME") or everyone.
"""

from __future__ import annotations

import time

from bot.approvals.store import EVERYONE, ApprovalStore
from bot.config import LoadedConfig
from bot.core.errors import UserError
from bot.store.db import Database
from bot.store.people import PeopleStore


async def run_approvals(loaded: LoadedConfig, action: str, rule_id: int = 0) -> int:
    """List the rules, or remove one; print the result; return the exit code."""
    db = Database(loaded.database)
    await db.open()
    try:
        store, people = ApprovalStore(db), PeopleStore(db)
        await store.setup()
        await people.setup()
        if action == "revoke":
            if not await store.revoke_rule(rule_id):
                raise UserError(f"there is no rule #{rule_id} (see `pinclaw approvals list`)")
            print(f"Removed rule #{rule_id}; that call will ask again.")
            return 0
        rules = await store.rules()
        if not rules:
            print("No always-allow rules.")
        names = {p.id: p.name for p in await people.all()}
        for rule in rules:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(rule.created_at))
            pattern = rule.summary.replace("\n", "\\n")  # what the approver saw, on one line
            whom = (
                "everyone"
                if rule.person_id == EVERYONE
                else f"{names.get(rule.person_id, 'someone forgotten')} #{rule.person_id}"
            )
            print(f"#{rule.id}  {rule.tool}  {pattern}  for {whom}  (by {rule.created_by}, {when})")
    finally:
        await db.close()
    return 0
