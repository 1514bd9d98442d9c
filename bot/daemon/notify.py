"""Wiring ``notify`` into ``pinclaw run``: it needs the daemon's outbox, channels and
access rules, so ``pinclaw agent -m`` has no such tool."""

from __future__ import annotations

from collections.abc import Mapping

from bot.core.channel import Channel, StateStore
from bot.cron.outbox import Outbox
from bot.daemon.access import AccessControl
from bot.daemon.app import App
from bot.store.inbound import InboundStore


def add_notify(
    app: App,
    channels: Mapping[str, Channel],
    access: AccessControl,
    inbound: InboundStore,
    outbox: Outbox,
    state: StateStore | None = None,
) -> None:
    """Offer ``notify`` (its code loaded only then), unless ``[tools] disabled`` names it."""
    if "notify" in app.loaded.config.tools.disabled:
        return
    from tools.notify import Recipients, notify_tool

    recipients = Recipients(
        people=app.people, channels=channels, admission=access, inbound=inbound, outbox=outbox
    )
    app.tools.add(notify_tool(recipients, outbox, app.people, state))
