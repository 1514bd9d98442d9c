"""What ``pinclaw memory`` does, through the same service the agent uses."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from bot.config import LoadedConfig
from bot.core.errors import UserError
from bot.daemon.app import open_app
from bot.memory import snapshot
from bot.memory.models import CORE, Memory
from bot.memory.service import MemoryService


async def memory_action(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    """Open the core, run the action, print the outcome."""
    async with open_app(loaded) as app:
        if app.memory is None:
            raise UserError("memory is turned off ([memory] enabled = false)")
        memory = app.memory
        action = args.memory_command
        if action == "list":
            entries = await memory.store.list(args.category, None, limit=args.limit)
            total = await memory.store.count(args.category)
            for entry in entries:
                print(_line(entry))
            print(f"({len(entries)} of {total} entries)" if entries else "No memories yet.")
        elif action == "search":
            scopes = await _all_scopes(memory)
            found = await memory.recall(args.query, scopes, args.limit)
            for hit in found:
                print(f"{hit.score:.2f}  {_line(hit.memory)}")
            if not found:
                print(f"Nothing remembered about {args.query!r}.")
        elif action == "forget":
            await _forget(memory, args.entry)
        else:
            await _export(memory, loaded, args.path)
    return 0


async def _all_scopes(memory: MemoryService) -> list[str]:
    rows = await memory.store.list(None, None, limit=1_000_000)
    return sorted({m.scope for m in rows})


async def _forget(memory: MemoryService, entry: str) -> None:
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
        ids = ", ".join(f"#{m.id} ({m.scope})" for m in matches)
        raise UserError(f"several chats have a memory {entry!r}: {ids}; forget one by its ID")
    await memory.forget_id(matches[0].id)
    print(f"Forgot #{matches[0].id} {entry!r}.")


async def _export(memory: MemoryService, loaded: LoadedConfig, where: str | None) -> None:
    if where == "-":
        core = await memory.store.list(CORE, None, limit=1_000_000)
        sys.stdout.write(snapshot.render(core))
        return
    default = loaded.workspace / loaded.config.memory.snapshot_file
    path = Path(where) if where else default  # expanded before the loop started
    count = await memory.export_snapshot(path)
    print(f"Wrote {count} core entries to {path}.")


def _line(memory: Memory) -> str:
    when = datetime.fromtimestamp(memory.updated_at).strftime("%Y-%m-%d %H:%M")
    text = " ".join(memory.content.split())
    if len(text) > 120:
        text = text[:119] + "…"
    return f"#{memory.id} [{memory.category}] {memory.key}: {text}  ({memory.scope}, {when})"
