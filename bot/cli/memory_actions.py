"""What ``pinclaw memory`` does, through the same service the agent uses."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from bot.cli.people_actions import find
from bot.config import LoadedConfig
from bot.core.errors import UsageError, UserError
from bot.daemon.app import open_app
from bot.memory.models import CORE, SHARED, Memory, NewMemory
from bot.memory.service import MemoryService


async def memory_action(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    """Open the core, run the action, print the outcome."""
    async with open_app(loaded) as app:
        if app.memory is None:
            raise UserError("memory is turned off ([memory] enabled = false)")
        memory = app.memory
        action = args.memory_command
        names = await _scope_names(memory)
        if action == "list":
            scopes = await _chosen_scopes(memory, getattr(args, "person", None))
            entries = await memory.store.list(args.category, scopes, limit=args.limit)
            total = await memory.store.count(args.category, scopes)
            for entry in entries:
                print(_line(entry, names))
            print(f"({len(entries)} of {total} entries)" if entries else "No memories yet.")
        elif action == "search":
            scopes = await _chosen_scopes(memory, getattr(args, "person", None))
            found = await memory.recall(args.query, scopes or await _all_scopes(memory), args.limit)
            for hit in found:
                print(f"{hit.score:.2f}  {_line(hit.memory, names)}")
            if not found:
                print(f"Nothing remembered about {args.query!r}.")
        elif action == "add":
            await _add(memory, args, names)
        elif action == "forget":
            await _forget(memory, args.entry, names)
        else:
            await _export(memory, loaded, args.path)
    return 0


async def _all_scopes(memory: MemoryService) -> list[str]:
    return sorted(await memory.store.count_by_scope())


async def _scope_names(memory: MemoryService) -> dict[str, str]:
    """How each scope is shown: the person's name and number, or "shared"."""
    names = {SHARED: "shared"}
    for person in await memory.people.all():
        names[person.scope] = f"{person.name} #{person.id}" + (", owner" if person.is_owner else "")
    return names


async def _chosen_scopes(memory: MemoryService, ref: str | None) -> list[str] | None:
    """The scopes ``--person`` picks (``shared`` for the household's), or None for all."""
    if ref is None:
        return None
    if ref.strip().lower() == SHARED:
        return [SHARED]
    return [(await find(memory.people, ref)).scope]


async def _add(memory: MemoryService, args: argparse.Namespace, names: dict[str, str]) -> None:
    text = " ".join(args.text.split())
    if not text:
        raise UsageError("say what to remember")
    scope = SHARED if args.shared else (await find(memory.people, args.person or "owner")).scope
    key = (args.key or "").strip() or " ".join(text.lower().split()[:6])
    stored = await memory.remember(NewMemory(key, text, args.category or CORE, scope, "cli"))
    whom = "everyone (shared)" if scope == SHARED else names.get(scope, scope)
    print(f"Remembered #{stored.id} {stored.key!r} for {whom}.")


async def _forget(memory: MemoryService, entry: str, names: dict[str, str]) -> None:
    if entry.isdigit():
        found = await memory.store.get_by_id(int(entry))
        if found is None or not await memory.forget_id(found.id):
            raise UserError(f"there is no memory #{entry} (see `pinclaw memory list`)")
        print(f"Forgot #{found.id} {found.key!r}.")
        return
    matches = [m for m in await memory.store.list(None, None, limit=1_000_000) if m.key == entry]
    if not matches:
        raise UserError(f"no memory has the key {entry!r} (see `pinclaw memory list`)")
    if len(matches) > 1:
        ids = ", ".join(f"#{m.id} ({names.get(m.scope, m.scope)})" for m in matches)
        raise UserError(f"several people have a memory {entry!r}: {ids}; forget one by its ID")
    await memory.forget_id(matches[0].id)
    print(f"Forgot #{matches[0].id} {entry!r}.")


async def _export(memory: MemoryService, loaded: LoadedConfig, where: str | None) -> None:
    if where == "-":
        sys.stdout.write(await memory.snapshot_text())
        return
    default = loaded.workspace / loaded.config.memory.snapshot_file
    path = Path(where) if where else default  # expanded before the loop started
    count = await memory.export_snapshot(path)
    print(f"Wrote {count} core entries to {path}.")


def _line(memory: Memory, names: dict[str, str]) -> str:
    when = datetime.fromtimestamp(memory.updated_at).strftime("%Y-%m-%d %H:%M")
    text = " ".join(memory.content.split())
    if len(text) > 120:
        text = text[:119] + "…"
    whose = names.get(memory.scope, memory.scope)
    return f"#{memory.id} [{memory.category}] {memory.key}: {text}  ({whose}, {when})"
