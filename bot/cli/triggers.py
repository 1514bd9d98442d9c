"""``pinclaw triggers list | add | remove | history | test``.

These work on the database whether or not the daemon runs; a running daemon
notices a change within seconds (it polls the triggers' version number), so no
restart is needed, and ``test`` is delivered by it. Only argparse is imported at
the top: the parser is built for every ``pinclaw`` command.
"""

from __future__ import annotations

import argparse
from typing import Any

Subparsers = argparse._SubParsersAction  # the type argparse gives add_subparsers


def add_triggers_commands(
    sub: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Register ``pinclaw triggers`` and its actions."""
    triggers = sub.add_parser(
        "triggers", parents=[common], help="events that make PinClaw speak first"
    )
    actions = triggers.add_subparsers(dest="triggers_command", required=True, metavar="ACTION")
    actions.add_parser(
        "list", parents=[common], help="every trigger, where it is defined, its last firing"
    )
    _add_parser(actions, common)
    remove = actions.add_parser(
        "remove", parents=[common], help="delete trigger NAME (one not in the config file)"
    )
    remove.add_argument("name", metavar="NAME")
    history = actions.add_parser("history", parents=[common], help="the latest firings")
    history.add_argument("name", nargs="?", metavar="NAME", help="only this trigger")
    history.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    test = actions.add_parser(
        "test", parents=[common], help="fire NAME once with a sample event (the daemon sends it)"
    )
    test.add_argument("name", metavar="NAME")
    triggers.set_defaults(handler=_handle)


def _add_parser(actions: Subparsers[argparse.ArgumentParser], common: Any) -> None:
    add = actions.add_parser("add", parents=[common], help="make a new trigger")
    add.add_argument("name", metavar="NAME", help="lower-case letters, digits, _ and -")
    add.add_argument(
        "--on",
        required=True,
        metavar="SOURCE",
        help="webhook, gpio:DEVICE, sensor:NAME.QUANTITY, ha:ENTITY_ID or serial:PORT",
    )
    what = add.add_mutually_exclusive_group(required=True)
    what.add_argument("--say", metavar="TEXT", help="a message sent as it is, with {placeholders}")
    what.add_argument("--ask", metavar="TEXT", help="what the agent is asked when it fires")
    add.add_argument(
        "--to",
        default="owner",
        metavar="TARGET",
        help="owner (default), terminal:owner, log, file:PATH, none, or CHANNEL:CHAT_ID[:THREAD]",
    )
    for option, text in (
        ("--when", "gpio: on, off or change; sensor: 'below 5' or 'above 30'; ha: a state"),
        ("--for", "fire only if the condition holds this long, e.g. 3m"),
        ("--cooldown", "after firing, stay quiet this long, e.g. 10m"),
        ("--quiet-hours", "do not fire in these hours, e.g. 22:00-07:00"),
        ("--active-hours", "fire only in these hours, e.g. 08:00-18:00"),
        ("--rate-limit", "at most N messages in a time, e.g. 10/10m (0: no limit)"),
        ("--pattern", "serial: a regular expression a line must match"),
        ("--every", "sensor: how often to look at the readings, e.g. 30s"),
        ("--secret", "webhook: the secret callers send (default: a new random one)"),
        ("--signature-header", "webhook: a header with the body's HMAC-SHA256 instead"),
    ):
        add.add_argument(option, metavar="VALUE", help=text)
    add.add_argument("--hysteresis", type=float, metavar="NUMBER", help="sensor: default 0.5")
    add.add_argument("--max-bytes", type=int, metavar="N", help="webhook: the body's cap")
    add.add_argument("--disabled", action="store_true", help="store it, but do not watch yet")


def _handle(args: argparse.Namespace) -> int:
    import asyncio

    from bot.config import load_config

    return asyncio.run(run_triggers(load_config(getattr(args, "config", None)), args))


async def run_triggers(loaded: Any, args: argparse.Namespace) -> int:
    """Carry out one ``pinclaw triggers`` action; print the result; return the exit code."""
    from bot.cli.triggers_actions import TriggerActions

    async with TriggerActions.open(loaded) as actions:
        return await actions.do(args)
