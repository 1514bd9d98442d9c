"""``pinclaw people list | link | unlink | rename``: who PinClaw knows, and their accounts.

Only argparse is imported at the top: the parser is built for every command.
"""

from __future__ import annotations

import argparse
from typing import Any

Subparsers = argparse._SubParsersAction  # the type argparse gives add_subparsers


def add_people_commands(
    sub: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Register ``pinclaw people`` and its actions."""
    people = sub.add_parser("people", parents=[common], help="people and their linked accounts")
    actions = people.add_subparsers(dest="people_command", required=True, metavar="ACTION")
    actions.add_parser("list", parents=[common], help="everyone, with their accounts")
    link = actions.add_parser(
        "link", parents=[common], help="a one-time code that links a chat account to PERSON"
    )
    link.add_argument(
        "person", nargs="?", default="owner", help="#ID, name or account (default: owner)"
    )
    unlink = actions.add_parser("unlink", parents=[common], help="take ACCOUNT from its person")
    unlink.add_argument("account", metavar="ACCOUNT", help="e.g. telegram:123456")
    rename = actions.add_parser("rename", parents=[common], help="give PERSON a new name")
    rename.add_argument("person", help="#ID, name or account")
    rename.add_argument("name", nargs="+")
    people.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    import asyncio

    from bot.config import load_config

    return asyncio.run(run_people(load_config(getattr(args, "config", None)), args))


async def run_people(loaded: Any, args: argparse.Namespace) -> int:
    """Carry out one ``pinclaw people`` action; print the result; return the exit code."""
    from bot.cli.people_actions import people_action

    return await people_action(loaded, args)
