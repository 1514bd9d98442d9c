"""``pinclaw web token [--rotate]``: the web panel's login token.

Only the token's hash is kept, so it cannot be shown again: each run makes a
new one, and the previous token (if there was one: the first run says nothing
of it) stops working. ``--rotate`` also logs every
browser out. Works while the daemon runs (it reads the token and the sessions
from the database on each login and request). Only argparse is imported at
the top: the parser is built for every ``pinclaw`` command.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.config import LoadedConfig

Subparsers = argparse._SubParsersAction  # the type argparse gives add_subparsers


def add_web_commands(sub: Subparsers[argparse.ArgumentParser], common: Any) -> None:
    """Register ``pinclaw web token``."""
    web = sub.add_parser("web", parents=[common], help="the web panel: its login token")
    actions = web.add_subparsers(dest="web_command", required=True, metavar="ACTION")
    token = actions.add_parser(
        "token",
        parents=[common],
        help="print a new login token for the web panel (the previous one stops working)",
        description="Prints a new login token for the web panel; paste it into the login "
        "page. Only its hash is stored, so the token cannot be shown again: run this again "
        "for a new one. Browsers already logged in stay logged in unless --rotate.",
    )
    token.add_argument(
        "--rotate", action="store_true", help="also log out every browser (end all sessions)"
    )
    token.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    import asyncio

    from bot.config import load_config

    loaded = load_config(getattr(args, "config", None))
    return asyncio.run(issue_token(loaded, rotate=args.rotate))


async def issue_token(loaded: LoadedConfig, *, rotate: bool = False) -> int:
    """Make and print a new login token; with ``rotate``, end every session too."""
    from bot.panel.auth import new_login_token
    from bot.store.db import Database

    db = Database(loaded.database)
    await db.open()
    try:
        made = await new_login_token(db, end_sessions=rotate)
    finally:
        await db.close()
    web = loaded.config.web
    print(made.token)
    where = f"{web.url}/login" if web.url and web.panel else ""
    notes = [f"Open {where} and paste the token above." if where else _off(loaded)]
    if made.replaced:
        notes.append("The previous token no longer works.")
    if rotate:
        notes.append(f"Logged out {made.ended} browser session(s).")
    for note in notes:
        print(note, file=sys.stderr)
    return 0


def _off(loaded: LoadedConfig) -> str:
    web = loaded.config.web
    if not web.url:
        return f'The web endpoint is off ([web] listen = "off" in {loaded.path}).'
    return f"The panel is off ([web] panel = false in {loaded.path})."
