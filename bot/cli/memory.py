"""``pinclaw memory list | search | add | forget | export``: memory, from the shell.

The command line is the owner's: it sees everyone's memories (each line says
whose) and may write for anyone, or for everyone (shared). Only argparse is
imported at the top: the parser is built for every ``pinclaw`` command.
"""

from __future__ import annotations

import argparse
from typing import Any

Subparsers = argparse._SubParsersAction  # the type argparse gives add_subparsers


def add_memory_commands(
    sub: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Register ``pinclaw memory`` and its actions."""
    memory = sub.add_parser("memory", parents=[common], help="long-term memory")
    actions = memory.add_subparsers(dest="memory_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", parents=[common], help="entries, newest first")
    listing.add_argument("--category", help="only this category (core, daily, conversation, ...)")
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--person", help="only this person's (#ID, name, account) or 'shared'")
    search = actions.add_parser("search", parents=[common], help="entries matching QUERY")
    search.add_argument("query")
    search.add_argument("--limit", type=int, default=10)
    search.add_argument("--person", help="only this person's (#ID, name, account) or 'shared'")
    add = actions.add_parser("add", parents=[common], help="remember TEXT (for the owner)")
    add.add_argument("text")
    add.add_argument("--key", help="a short stable name (default: the first words)")
    add.add_argument("--category", default="core", help="core (default), daily, or a name")
    whose = add.add_mutually_exclusive_group()
    whose.add_argument("--person", help="whose memory: #ID, name or account (default: owner)")
    whose.add_argument("--shared", action="store_true", help="for everyone (household)")
    forget = actions.add_parser("forget", parents=[common], help="remove entry ID (or KEY)")
    forget.add_argument("entry", metavar="ID|KEY")
    export = actions.add_parser("export", parents=[common], help="write the core entries")
    export.add_argument(
        "path", nargs="?", help="where (default: MEMORY_SNAPSHOT.md in the workspace; - = stdout)"
    )
    memory.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    import asyncio
    import os

    from bot.config import load_config

    if getattr(args, "path", None) not in (None, "-"):
        args.path = os.path.expanduser(args.path)
    return asyncio.run(run_memory(load_config(getattr(args, "config", None)), args))


async def run_memory(loaded: Any, args: argparse.Namespace) -> int:
    """Carry out one ``pinclaw memory`` action; print the result; return the exit code."""
    from bot.cli.memory_actions import memory_action

    return await memory_action(loaded, args)
