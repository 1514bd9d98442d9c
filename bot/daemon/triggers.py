"""Wiring the triggers into ``pinclaw run``: the service, its store, its tools.

The config's ``[[triggers]]`` are checked against what is configured (a trigger
on a device that does not exist stops the start with one line naming the
table); the stored ones are checked when they are made.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from bot.config import LoadedConfig, resolve_timezone
from bot.core.channel import Channel
from bot.core.errors import ConfigError
from bot.cron.outbox import Outbox
from bot.daemon.app import App
from bot.triggers.actions import Actions
from bot.triggers.making import config_problems
from bot.triggers.service import TriggerService, configured_triggers
from bot.triggers.sources import SourceDeps
from bot.triggers.store import TriggerStore

if TYPE_CHECKING:
    from bot.daemon.router import Router

log = logging.getLogger(__name__)


async def trigger_service(
    app: App,
    loaded: LoadedConfig,
    router: Router,
    channels: Mapping[str, Channel],
    outbox: Outbox,
) -> TriggerService:
    """The trigger service with the config's triggers and the stored ones, and its tools."""
    config = loaded.config
    configured = configured_triggers(config.triggers)
    if problems := config_problems(configured, config):
        raise ConfigError("\n".join(f"{loaded.path}: {problem}" for problem in problems))
    store = TriggerStore(app.db)
    await store.setup()
    zone = resolve_timezone(config.general.timezone)
    actions = Actions(outbox=outbox, router=router, channels=channels, zone=zone)
    service = TriggerService(
        store=store,
        configured=configured,
        actions=actions,
        deps=SourceDeps(app),
        zone=zone,
    )
    _add_tools(app, loaded, service)
    return service


def _add_tools(app: App, loaded: LoadedConfig, service: TriggerService) -> None:
    """``trigger_add`` / ``trigger_list`` / ``trigger_remove``, unless disabled."""
    from tools.triggers import trigger_tools

    disabled = set(loaded.config.tools.disabled)
    for tool in trigger_tools(service, loaded.config):
        if tool.name not in disabled:
            app.tools.add(tool)
