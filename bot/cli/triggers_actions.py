"""What ``pinclaw triggers`` does, on the same store and checks the daemon and tools use.

``test`` records a firing with a sample event for the trigger's kind
(``bot.triggers.samples``, as the panel's Test button); the
running daemon's poll sees the store's version change and delivers it within
seconds (or it is delivered when the daemon next starts).
"""

from __future__ import annotations

import argparse
import secrets
import shlex
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from bot.config import LoadedConfig, resolve_timezone
from bot.core.errors import UserError
from bot.cron.jobs import when as local_time
from bot.store.db import Database
from bot.triggers.making import check_trigger, trigger_from
from bot.triggers.samples import sample_event
from bot.triggers.spec import Trigger, fill, from_config
from bot.triggers.store import Firing, TriggerStore

_OPTIONS = ("to", "say", "ask", "when", "for", "cooldown", "quiet_hours", "active_hours",
            "rate_limit", "pattern", "every", "secret", "signature_header", "hysteresis",
            "max_bytes")  # fmt: skip


class TriggerActions:
    """One ``pinclaw triggers`` action against the database."""

    def __init__(self, loaded: LoadedConfig, store: TriggerStore) -> None:
        self._loaded = loaded
        self._store = store
        self._zone = resolve_timezone(loaded.config.general.timezone)
        self._configured = {t.name: from_config(t) for t in loaded.config.triggers}

    @classmethod
    @asynccontextmanager
    async def open(cls, loaded: LoadedConfig) -> AsyncIterator[TriggerActions]:
        """The trigger store in PinClaw's database."""
        db = Database(loaded.database)
        await db.open()
        try:
            store = TriggerStore(db)
            await store.setup()
            yield cls(loaded, store)
        finally:
            await db.close()

    async def do(self, args: argparse.Namespace) -> int:
        """Carry out ``args.triggers_command``."""
        action = args.triggers_command
        if action == "list":
            await self._list()
        elif action == "add":
            await self._add(args)
        elif action == "remove":
            await self._remove(args.name)
        elif action == "history":
            await self._history(args.name, args.limit)
        else:
            await self._test(args.name)
        return 0

    async def _all(self) -> dict[str, Trigger]:
        stored = {t.name: t for t in await self._store.triggers()}
        return {**stored, **self._configured}

    async def _named(self, name: str) -> Trigger:
        trigger = (await self._all()).get(name)
        if trigger is None:
            raise UserError(f"there is no trigger called {name!r} (see `pinclaw triggers list`)")
        return trigger

    async def _list(self) -> None:
        triggers = await self._all()
        if not triggers:
            print("No triggers. Add one to the config file, with `pinclaw triggers add`, "
                  "or ask the bot.")  # fmt: skip
        for name in sorted(triggers):
            trigger = triggers[name]
            print(f"{trigger.describe()}  [{self._where(trigger)}]")
            for firing in await self._store.history(name, 1):
                print("    last: " + self._firing_line(firing))

    def _where(self, trigger: Trigger) -> str:
        if trigger.made_by == "config":
            return f"config file {self._loaded.path}"
        if trigger.made_by == "cli":
            return "added with pinclaw triggers add"
        return f"made in a chat by {trigger.creator_name or trigger.creator_id}"

    async def _add(self, args: argparse.Namespace) -> None:
        keys: dict[str, Any] = {"name": args.name, "on": args.on}
        for key in _OPTIONS:
            value = getattr(args, key)
            if value is not None:
                keys[key] = value
        if args.disabled:
            keys["enabled"] = False
        made_secret = False
        if args.on.strip() == "webhook" and not keys.get("secret"):
            keys["secret"] = secrets.token_urlsafe(24)
            made_secret = True
        trigger = trigger_from(
            keys, made_by="cli", creator_id="owner", creator_name="the owner (command line)"
        )
        check_trigger(trigger, self._loaded.config)
        if trigger.name in self._configured:
            raise UserError(f"{trigger.name!r} is already a trigger of the config file")
        if trigger.name in await self._all():
            raise UserError(f"there is already a trigger called {trigger.name!r}")
        await self._store.add(trigger)
        print(f"Added the trigger {trigger.describe()}.")
        if trigger.kind == "webhook":
            self._show_hook(trigger, made_secret)
        print("A running PinClaw watches it within seconds; otherwise from its next start.")

    def _show_hook(self, trigger: Trigger, made_secret: bool) -> None:
        web = self._loaded.config.web
        url = f"{web.url or 'http://HOST:PORT'}/hooks/{trigger.name}"
        if made_secret:
            print(f"Its secret (shown only now): {trigger.secret}")
        if trigger.signature_header:
            print(f"Callers sign the body with HMAC-SHA256 keyed with the secret, in hex, in "
                  f"the {trigger.signature_header} header, and POST it to {url}")  # fmt: skip
        else:
            header = shlex.quote(f"Authorization: Bearer {trigger.secret}")
            print(f"Try it: curl -X POST -H {header} -d 'hello' {url}")
        if not web.url:
            print('Note: the HTTP endpoint is off ([web] listen = "off"); webhooks need it on.')

    async def _remove(self, name: str) -> None:
        if name in self._configured:
            raise UserError(
                f"{name!r} is defined in the config file {self._loaded.path}; "
                "remove its [[triggers]] table there"
            )
        if not await self._store.remove(name):
            raise UserError(f"there is no trigger called {name!r} (see `pinclaw triggers list`)")
        print(f"Removed the trigger {name}.")

    async def _history(self, name: str | None, limit: int) -> None:
        firings = await self._store.history(name, limit)
        if not firings:
            print(f"No firings{f' of {name}' if name else ''} yet.")
        for firing in firings:
            print(self._firing_line(firing))

    def _firing_line(self, firing: Firing) -> str:
        at = local_time(firing.at, self._zone)
        if firing.status == "skipped":
            what = f"not sent ({firing.outcome})"
        elif firing.status == "sent":
            what = f"sent to {firing.delivered_to or 'nowhere'}"
        elif firing.status == "failed":
            what = f"failed: {firing.error or 'unknown reason'}"
        else:
            waiting = f" ({firing.error})" if firing.error else ""
            what = f"{firing.status}{waiting}"
        return f"{at}  {firing.trigger}  {firing.kind}  {what}  - {firing.event.summary}"

    async def _test(self, name: str) -> None:
        trigger = await self._named(name)
        event = sample_event(trigger, self._loaded.config.hardware, "pinclaw triggers test")
        await self._store.record(name, event, "fired", kind="test", notify=True)
        print(f"Test firing of {name} recorded: {event.summary}")
        if trigger.action == "say":
            stamp = datetime.fromtimestamp(event.at, self._zone).strftime("%H:%M")
            values = {**event.fields, "trigger": name, "time": stamp, "summary": event.summary}
            text = fill(trigger.say, values).strip() or event.summary
            print(f"It says: {text}")
        else:
            print(f"The agent is asked: {trigger.ask}")
        print(f"To: {trigger.to}. A running PinClaw sends it within seconds; otherwise "
              "it is sent when PinClaw next starts.")  # fmt: skip
