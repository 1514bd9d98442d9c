"""Checking a trigger against what is configured, the same way for the config file, the
agent's ``trigger_add`` and ``pinclaw triggers add``.

Default deny: a trigger may only watch what the config already names (a GPIO
input of ``[hardware.gpio]``, a sensor of ``[hardware.sensors]`` and one of its
quantities, a port of ``[hardware.serial]``, a Home Assistant entity the agent
may read), and deliver to a target a cron job could use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Literal

from pydantic import ValidationError

from bot.config import Config
from bot.config.triggers import (
    TRIGGER_NAME,
    TriggerConfig,
    check_hours,
    parse_condition,
    parse_rate,
)
from bot.core.errors import UserError
from bot.cron.jobs import parse_target
from bot.triggers.spec import Trigger, from_config


def check_trigger(trigger: Trigger, config: Config) -> None:
    """``UserError`` with one plain sentence when ``trigger`` could not work here."""
    if not TRIGGER_NAME.match(trigger.name):
        raise UserError(
            f"{trigger.name!r} is not a trigger name: use lower-case letters, digits, _ and - "
            "(like garage-door)"
        )
    kind, what = trigger.kind, trigger.subject  # parse_source raises for a bad ``on``
    if bool(trigger.say.strip()) == bool(trigger.ask.strip()):
        raise UserError("give say (a text sent as it is) or ask (a turn of the agent), one")
    target = parse_target(trigger.to)
    if target.kind == "chat" and target.channel not in config.enabled_channels():
        raise UserError(f"to: the channel {target.channel!r} is not enabled in the config")
    parse_rate(trigger.rate_limit)
    check_hours(trigger.quiet_hours)
    check_hours(trigger.active_hours)
    if kind == "webhook" and not trigger.secret:
        raise UserError("a webhook trigger needs a secret")
    _check_source(trigger, kind, what, config)


def _check_source(trigger: Trigger, kind: str, what: str, config: Config) -> None:
    hardware = config.hardware
    if kind == "gpio":
        device = hardware.gpio.get(what)
        if device is None:
            known = ", ".join(n for n, d in hardware.gpio.items() if d.kind == "input") or "none"
            raise UserError(f"there is no GPIO device {what!r} in [hardware.gpio]; inputs: {known}")
        if device.kind != "input":
            raise UserError(f"gpio.{what} is an {device.kind}; a trigger watches an input")
        if trigger.when not in ("", "on", "off", "change"):
            raise UserError(
                f"a GPIO trigger fires on 'on', 'off' or 'change', not {trigger.when!r}"
            )
    elif kind == "sensor":
        name, _, quantity = what.partition(".")
        sensor = hardware.sensors.get(name)
        if sensor is None:
            known = ", ".join(hardware.sensors) or "none"
            raise UserError(f"there is no sensor {name!r} in [hardware.sensors]; sensors: {known}")
        from bot.hardware.sensors import QUANTITIES  # loaded only where sensors are named

        if quantity not in QUANTITIES[sensor.driver]:
            measured = ", ".join(QUANTITIES[sensor.driver])
            raise UserError(f"{name} measures {measured}, not {quantity!r}")
        parse_condition(trigger.when)
    elif kind == "serial":
        if what not in hardware.serial:
            known = ", ".join(hardware.serial) or "none"
            raise UserError(
                f"there is no serial port {what!r} in [hardware.serial]; ports: {known}"
            )
        try:
            re.compile(trigger.pattern)
        except re.error as exc:
            raise UserError(f"pattern: not a regular expression ({exc})") from None
        if not trigger.pattern:
            raise UserError("a serial trigger needs the pattern a line must match")
    elif kind == "ha":
        ha = config.home_assistant
        if not ha.url:
            raise UserError("Home Assistant is not configured ([home_assistant] url and token)")
        entries = {e.strip().lower() for e in ha.allow if e.strip()}
        if entries and what not in entries and what.split(".", 1)[0] not in entries:
            raise UserError(
                f"{what} is not among the Home Assistant entities PinClaw may read "
                "([home_assistant] allow)"
            )


def config_problems(triggers: list[Trigger], config: Config) -> list[str]:
    """One line per config trigger that could not work, naming its table."""
    problems = []
    for index, trigger in enumerate(triggers):
        try:
            check_trigger(trigger, config)
        except UserError as exc:
            problems.append(f"triggers[{index}] ({trigger.name}): {exc}")
    return problems


def trigger_from(
    keys: Mapping[str, object],
    *,
    made_by: Literal["chat", "cli"],
    creator_id: str,
    creator_name: str,
) -> Trigger:
    """A trigger from the keys a ``[[triggers]]`` table would have (``on``, ``say``, ``for``...),
    given by the agent or on the command line; ``UserError`` naming the first wrong key."""
    try:
        table = TriggerConfig.model_validate(dict(keys))
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        raise UserError(f"{where}: {message}" if where else message) from None
    return replace(
        from_config(table), made_by=made_by, creator_id=creator_id, creator_name=creator_name
    )
