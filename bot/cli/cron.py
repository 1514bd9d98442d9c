"""``pinclaw cron list | add | remove | run | history | pause | resume``.

These work on the database whether or not the daemon runs; a running daemon
notices the change within seconds (it polls the jobs' version number), so no
restart is needed. ``run`` asks the daemon to run a job now. Only argparse is
imported at the top: the parser is built for every ``pinclaw`` command.
"""

from __future__ import annotations

import argparse
from typing import Any

Subparsers = argparse._SubParsersAction  # the type argparse gives add_subparsers


def add_cron_commands(
    sub: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Register ``pinclaw cron`` and its actions."""
    cron = sub.add_parser("cron", parents=[common], help="scheduled jobs and their history")
    actions = cron.add_subparsers(dest="cron_command", required=True, metavar="ACTION")
    actions.add_parser("list", parents=[common], help="every job, its next run and last result")
    add = actions.add_parser("add", parents=[common], help="schedule a new job")
    add.add_argument("name", help="a short name, e.g. 'water plants'")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", metavar="EXPR", help="5 cron fields, e.g. '0 9 * * mon-fri'")
    when.add_argument("--every", metavar="DURATION", help="repeat, e.g. 30m, 2h, 1d")
    when.add_argument("--at", metavar="TIME", help="once, e.g. '2026-12-24 18:00' or '19:00'")
    when.add_argument("--after", metavar="DURATION", help="once, after a delay, e.g. 20m")
    what = add.add_mutually_exclusive_group(required=True)
    what.add_argument("--prompt", help="what the agent is asked to do when the job runs")
    what.add_argument("--command", help="a shell command to run (checked by the policy)")
    add.add_argument(
        "--to",
        default="owner",
        metavar="TARGET",
        help="where output goes: owner (default; their private chat, else `pinclaw inbox`), "
        "terminal:owner (`pinclaw inbox`), log, file:PATH (in the workspace), none, or "
        "CHANNEL:CHAT_ID[:THREAD]",
    )
    add.add_argument("--session", choices=("isolated", "chat"), default="isolated")
    add.add_argument("--misfire", choices=("skip", "run_once"), help="default: cron.misfire")
    add.add_argument("--tz", metavar="ZONE", help="IANA timezone (default: cron.timezone)")
    for action, text in (
        ("remove", "delete job ID and its history"),
        ("run", "run job ID now (in the running daemon)"),
        ("pause", "stop job ID from running until resumed"),
        ("resume", "let paused job ID run again"),
    ):
        parser = actions.add_parser(action, parents=[common], help=text)
        parser.add_argument("job_id", type=int, metavar="ID")
    history = actions.add_parser("history", parents=[common], help="the latest runs")
    history.add_argument("job_id", type=int, nargs="?", metavar="ID", help="only this job")
    history.add_argument("--limit", type=int, default=20)
    cron.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    import asyncio

    from bot.config import load_config

    return asyncio.run(run_cron(load_config(getattr(args, "config", None)), args))


async def run_cron(loaded: Any, args: argparse.Namespace) -> int:
    """Carry out one ``pinclaw cron`` action; print the result; return the exit code."""
    from bot.cli.cron_actions import CronActions

    async with CronActions.open(loaded) as actions:
        return await actions.do(args)
