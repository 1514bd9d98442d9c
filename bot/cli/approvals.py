"""``pinclaw approvals list | revoke ID``: the "always allow" rules, readable and removable."""

from __future__ import annotations

import time

from bot.approvals.store import ApprovalStore
from bot.config import LoadedConfig
from bot.core.errors import UserError
from bot.store.db import Database


async def run_approvals(loaded: LoadedConfig, action: str, rule_id: int = 0) -> int:
    """List the rules, or remove one; print the result; return the exit code."""
    db = Database(loaded.database)
    await db.open()
    try:
        store = ApprovalStore(db)
        await store.setup()
        if action == "revoke":
            if not await store.revoke_rule(rule_id):
                raise UserError(f"there is no rule #{rule_id} (see `pinclaw approvals list`)")
            print(f"Removed rule #{rule_id}; that call will ask again.")
            return 0
        rules = await store.rules()
        if not rules:
            print("No always-allow rules.")
        for rule in rules:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(rule.created_at))
            pattern = rule.summary.replace("\n", "\\n")  # what the approver saw, on one line
            print(f"#{rule.id}  {rule.tool}  {pattern}  (by {rule.created_by}, {when})")
    finally:
        await db.close()
    return 0
