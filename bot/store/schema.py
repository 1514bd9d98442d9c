"""Every component's migrations: where each list lives, how long it is, and the upgrade order.

A component (history, people, cron...) keeps its own ``MIGRATIONS`` in its
module and applies them when it is first used. This table lets opening the
database see that an older PinClaw left it, without importing every store:
then all components are upgraded at once (``Database.open``). The counts are
checked against the lists by ``tests/test_upgrade.py``: a new migration means
raising its count here. Components that read another's tables come after it
(people reads pairing's, memory moves its rows to people).
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import aiosqlite

Step = str | Callable[[aiosqlite.Connection], Awaitable[None]]
"""A migration: an SQL script, or a function that changes rows with Python's help."""


@dataclass(frozen=True, slots=True)
class Component:
    """One component's name in ``schema_versions``, its module, and its number of migrations."""

    name: str
    module: str
    version: int

    def steps(self) -> Sequence[Step]:
        """The component's migrations (imports its module)."""
        steps: Sequence[Step] = importlib.import_module(self.module).MIGRATIONS
        return steps


COMPONENTS = (
    Component("kv", "bot.store.kv", 1),
    Component("history", "bot.agent.history", 3),
    Component("inbound", "bot.store.inbound", 1),
    Component("pairing", "bot.store.pairing", 1),
    Component("people", "bot.store.people", 2),
    Component("memory", "bot.memory.store", 2),
    Component("embedding_cache", "bot.memory.embed_cache", 1),
    Component("approvals", "bot.approvals.store", 2),
    Component("usage", "bot.store.usage", 1),
    Component("cron", "bot.cron.store", 2),
    Component("owner_inbox", "bot.store.owner_inbox", 1),
    Component("sensor_readings", "bot.store.readings", 1),
    Component("panel_sessions", "bot.panel.auth", 1),
    Component("untrusted_files", "bot.security.files.provenance", 1),
    Component("triggers", "bot.triggers.store", 1),
)


def behind(versions: Mapping[str, int]) -> list[str]:
    """The components a database holds (version above 0) at an older version than this PinClaw's."""
    return [c.name for c in COMPONENTS if 0 < versions.get(c.name, 0) < c.version]


def newer(versions: Mapping[str, int]) -> list[str]:
    """The components a database holds at a version this PinClaw does not know (a newer one's)."""
    known = {c.name: c.version for c in COMPONENTS}
    return [name for name, version in versions.items() if version > known.get(name, version)]
