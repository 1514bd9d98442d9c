"""``pinclaw sessions list | show | clear``: the stored conversations, from the shell.

A TARGET is a session id (``12`` or ``#12``), a key (``telegram:7001``, which
means that chat's current conversation), or a bare name for a terminal
conversation (``work`` is ``terminal:work``, as in ``pinclaw chat --session work``).
Clearing deletes messages only: sessions and turns stay, so the token usage
counted towards each person's daily budget is not reset. Everything works while
the daemon runs (SQLite in WAL mode: open, act, close). Only argparse is
imported at the top: the parser is built for every ``pinclaw`` command.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.agent.history import HistoryStore, SessionInfo, StoredMessage
    from bot.config import LoadedConfig

Subparsers = argparse._SubParsersAction  # the type argparse gives add_subparsers

TARGET_HELP = "a session id (12 or #12), a key (telegram:7001) or a terminal session name (work)"
LINE_LIMIT = 200  # characters of a tool call or result shown on its one line


def add_sessions_commands(
    sub: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Register ``pinclaw sessions`` and its actions."""
    sessions = sub.add_parser(
        "sessions", parents=[common], help="stored conversations: list, show, clear"
    )
    actions = sessions.add_subparsers(dest="sessions_command", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list", parents=[common], help="conversations, the most recently active first"
    )
    listing.add_argument("--channel", metavar="NAME", help="only this channel (e.g. telegram)")
    listing.add_argument("--limit", type=_positive, default=50, metavar="N", help="default 50")
    show = actions.add_parser("show", parents=[common], help="the messages of one conversation")
    show.add_argument("target", metavar="TARGET", help=TARGET_HELP)
    show.add_argument(
        "--limit", type=_positive, default=50, metavar="N", help="the last N messages (default 50)"
    )
    clear = actions.add_parser(
        "clear", parents=[common], help="delete a conversation's messages (usage records stay)"
    )
    clear.add_argument("target", metavar="TARGET", help=TARGET_HELP)
    clear.add_argument(
        "--all-sessions",
        action="store_true",
        help="also the earlier conversations of that key (those before each /new)",
    )
    sessions.set_defaults(handler=_handle)


def _positive(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {text!r}")
    return int(text)


def _handle(args: argparse.Namespace) -> int:
    import asyncio

    from bot.config import load_config

    return asyncio.run(run_sessions(load_config(getattr(args, "config", None)), args))


async def run_sessions(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    """Carry out one ``pinclaw sessions`` action; print the result; return the exit code."""
    from bot.agent.history import HistoryStore
    from bot.store.db import Database

    db = Database(loaded.database)
    await db.open()
    try:
        history = HistoryStore(db)
        await history.setup()
        action = args.sessions_command
        if action == "list":
            await _list(history, args.channel, args.limit)
        elif action == "show":
            await _show(history, args.target, args.limit)
        else:
            await _clear(history, args.target, every=args.all_sessions)
    finally:
        await db.close()
    return 0


async def _list(history: HistoryStore, channel: str | None, limit: int) -> None:
    found = await history.list_sessions(channel, limit)
    if not found:
        print(f"No conversations on {channel} yet." if channel else "No conversations yet.")
        return
    ids = max(len(str(s.id)) for s in found) + 1
    keys = max(len(s.key) for s in found)
    counts = max(len(_messages(s.messages)) for s in found)
    for info in found:
        mark = "  (current)" if info.current else ""
        print(
            f"{f'#{info.id}':<{ids}}  {info.key:<{keys}}  {_messages(info.messages):>{counts}}"
            f"  {_when(info.last_activity)}{mark}"
        )
    total = await history.count_sessions(channel)
    if total > len(found):
        print(f"({len(found)} of {total} conversations; --limit N shows more)")


async def _show(history: HistoryStore, target: str, limit: int) -> None:
    info = await _resolve(history, target)
    shown = await history.transcript(info.id, limit)
    mark = " (current)" if info.current else ""
    part = f", the last {len(shown)} shown" if len(shown) < info.messages else ""
    print(
        f"#{info.id} {info.key}{mark}: {_messages(info.messages)}{part}, "
        f"started {_when(info.created_at)}"
    )
    if not shown:
        print("No messages in this conversation.")
    day = ""
    for stored in shown:
        if (today := _when(stored.created_at, "%Y-%m-%d")) != day:
            day = today
            print(f"-- {day} --")
        for line in _message_lines(stored):
            print(line)


async def _clear(history: HistoryStore, target: str, *, every: bool) -> None:
    from bot.core.errors import UsageError

    if every and _parse(target)[0] is not None:
        raise UsageError(
            f"--all-sessions goes with a key (e.g. telegram:7001), not a session id like {target}"
        )
    info = await _resolve(history, target)
    if every:
        cleared = await history.clear(info.key)
        sessions = await history.count_sessions(key=info.key)
        where = f"{info.key} ({sessions} session{'' if sessions == 1 else 's'})"
    else:
        cleared = await history.clear(session_id=info.id)
        where = info.key if info.current else f"{info.key} (session #{info.id})"
    print(f"Cleared {_messages(cleared)} of {where}.")


def _parse(target: str) -> tuple[int | None, str]:
    """A session id, or else the key ``target`` names."""
    text = target.strip()
    digits = text.removeprefix("#")
    if digits.isascii() and digits.isdigit():
        return int(digits), ""
    return None, text if ":" in text else f"terminal:{text}"


async def _resolve(history: HistoryStore, target: str) -> SessionInfo:
    from bot.core.errors import UsageError

    session_id, key = _parse(target)
    if session_id is not None:
        found = await history.session_info(session_id)
        if found is None:
            raise UsageError(f"there is no session #{session_id}; see `pinclaw sessions list`")
        return found
    current = await history.current_session(key) if key.split(":", 1)[1] else None
    if current is None:
        named = f"{target!r}" if key == target.strip() else f"called {target!r} ({key})"
        raise UsageError(f"there is no conversation {named}; see `pinclaw sessions list`")
    return current


def _message_lines(stored: StoredMessage) -> list[str]:
    """One message as ``HH:MM role: text``; each tool call and each result on one line."""
    import json

    message, at = stored.message, _when(stored.created_at, "%H:%M")
    lines: list[str] = []
    if message.role == "tool":
        failed = " (failed)" if message.is_error else ""
        name = message.tool_name or "?"
        lines.append(_one_line(f"{at} tool {name}{failed}: {message.content}"))
    elif message.content or not message.tool_calls:
        text = _printable(message.content).replace("\n", "\n      ")  # under the text, not HH:MM
        lines.append(f"{at} {message.role}: {text}")
    for call in message.tool_calls:
        args = ", ".join(
            f"{name}={json.dumps(value, ensure_ascii=False)}"
            for name, value in call.arguments.items()
        )
        unread = f" [unreadable arguments: {call.error}]" if call.error else ""
        lines.append(_one_line(f"{at} {message.role} → {call.name}({args}){unread}"))
    return lines


def _one_line(text: str) -> str:
    flat = " ".join(_printable(text).split())
    return flat if len(flat) <= LINE_LIMIT else flat[: LINE_LIMIT - 1] + "…"


def _printable(text: str) -> str:
    # Chat text is other people's: no escape sequence of theirs reaches the terminal.
    return "".join(
        c if c.isprintable() or c in "\n\t" else c.encode("unicode_escape").decode("ascii")
        for c in text
    )


def _messages(count: int) -> str:
    return f"{count} message{'' if count == 1 else 's'}"


def _when(timestamp: float, pattern: str = "%Y-%m-%d %H:%M") -> str:
    import time

    return time.strftime(pattern, time.localtime(timestamp))
