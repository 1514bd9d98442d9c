"""``pinclaw inbox [--all] [--json]`` and ``pinclaw inbox clear``: the owner's inbox.

Messages land there from jobs that deliver to ``terminal:owner``, and from
anything meant for the owner that no chat could take (no chat channel, no
private chat with the owner, a failed send). Showing them marks them read. Only
argparse is imported at the top: the parser is built for every ``pinclaw`` command.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

    from bot.store.owner_inbox import InboxMessage, OwnerInbox

Subparsers = argparse._SubParsersAction  # the type argparse gives add_subparsers


def add_inbox_commands(
    sub: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Register ``pinclaw inbox`` and ``pinclaw inbox clear``."""
    inbox = sub.add_parser(
        "inbox",
        parents=[common],
        help="messages for you that no chat received: job results, heartbeat, alerts",
        description="Shows the unread messages in your inbox, oldest first, and marks them "
        "read. Jobs that deliver to terminal:owner put their results here, and so does "
        "anything meant for you that no chat could take.",
    )
    inbox.add_argument(
        "--all", action="store_true", help="also show messages already read (the latest N)"
    )
    inbox.add_argument(
        "-n", "--limit", type=int, default=20, metavar="N", help="with --all: how many (20)"
    )
    inbox.add_argument("--json", action="store_true", help="print JSON, for scripts")
    actions = inbox.add_subparsers(dest="inbox_command", metavar="ACTION")
    actions.add_parser("clear", parents=[common], help="delete every message, read or not")
    inbox.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    import asyncio

    from bot.config import load_config

    return asyncio.run(run_inbox(load_config(getattr(args, "config", None)), args))


async def run_inbox(loaded: Any, args: argparse.Namespace) -> int:
    """Carry out one ``pinclaw inbox`` action; print the result; return the exit code."""
    from bot.store.db import Database
    from bot.store.owner_inbox import OwnerInbox

    db = Database(loaded.database)
    await db.open()
    try:
        inbox = OwnerInbox(db)
        await inbox.setup()
        if getattr(args, "inbox_command", None) == "clear":
            removed = await inbox.clear()
            print(f"Removed {removed} message{'' if removed == 1 else 's'} from the inbox.")
            return 0
        await _show(inbox, args, loaded.timezone())
    finally:
        await db.close()
    return 0


async def _show(inbox: OwnerInbox, args: argparse.Namespace, zone: ZoneInfo) -> None:
    import json

    messages = await inbox.latest(max(1, args.limit)) if args.all else await inbox.unread()
    await inbox.mark_read([m.id for m in messages if m.read_at is None])
    if args.json:
        print(json.dumps([_record(m, zone) for m in messages], ensure_ascii=False, indent=2))
        return
    if not messages:
        print(
            "The inbox is empty."
            if args.all
            else "No unread messages (`pinclaw inbox --all` shows the ones already read)."
        )
        return
    for number, message in enumerate(messages):
        if number:
            print()
        print(_heading(message, zone))
        for line in message.text.splitlines() or [""]:
            print(f"  {line}")


def _heading(message: InboxMessage, zone: ZoneInfo) -> str:
    from datetime import datetime

    when = datetime.fromtimestamp(message.created_at, zone).strftime("%Y-%m-%d %H:%M")
    seen = "" if message.read_at is None else "  (read)"
    return f"{when}  {message.source}{seen}"


def _record(message: InboxMessage, zone: ZoneInfo) -> dict[str, object]:
    from datetime import datetime

    return {
        "id": message.id,
        "time": datetime.fromtimestamp(message.created_at, zone).isoformat(timespec="seconds"),
        "source": message.source,
        "text": message.text,
        "read": message.read_at is not None,
    }
