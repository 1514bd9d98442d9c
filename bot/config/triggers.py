"""``[[triggers]]``: events that make PinClaw speak first (a webhook, a GPIO edge, a
sensor threshold, a Home Assistant state, a serial line).

Each table names one trigger. ``on`` says what it listens to; ``say`` (a fixed
text with ``{placeholders}``, no model call) or ``ask`` (a turn of the agent)
says what it does; ``to`` is any cron target. The source-specific keys are
checked here against ``on``, so a key that would be silently ignored is an
error instead.
"""

from __future__ import annotations

import re
from typing import Literal, cast

from pydantic import Field, SecretStr, field_validator, model_validator

from bot.config.base import Section, empty_is_none, is_hours
from bot.core.durations import ScheduleError, parse_duration
from bot.core.errors import UserError

TRIGGER_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
Kind = Literal["webhook", "gpio", "sensor", "ha", "serial"]
SOURCES: tuple[Kind, ...] = ("webhook", "gpio", "sensor", "ha", "serial")
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(.+)$")
_CONDITION = re.compile(r"^\s*(below|above|<|>)\s*(-?\d+(?:\.\d+)?)\s*$")
_ONLY_FOR: dict[str, tuple[str, ...]] = {
    "secret": ("webhook",),
    "signature_header": ("webhook",),
    "max_bytes": ("webhook",),
    "hysteresis": ("sensor",),
    "every": ("sensor",),
    "pattern": ("serial",),
}
DEFAULT_RATE = "10/10m"


def seconds(text: str) -> float:
    """A duration key's seconds; "0" and "" mean none (0.0)."""
    text = text.strip()
    return 0.0 if text in ("", "0") else parse_duration(text).total_seconds()


def parse_source(on: str) -> tuple[Kind, str]:
    """``on`` split into its kind and what it names: ``("gpio", "door_sensor")``."""
    kind, _, what = on.strip().partition(":")
    kind = kind.strip()
    what = what.strip()
    if kind not in SOURCES:
        raise UserError(
            f"'{on}' is not an event source; use webhook, gpio:DEVICE, sensor:NAME.QUANTITY, "
            "ha:ENTITY_ID or serial:PORT"
        )
    if kind == "webhook":
        if what:
            raise UserError('a webhook trigger is written on = "webhook" (its path is its name)')
        return "webhook", ""
    if not what:
        raise UserError(f"'{on}' names no {kind} source; write {kind}:NAME")
    if kind == "sensor" and not re.fullmatch(r"[a-z][a-z0-9_]*\.[a-z]+", what):
        raise UserError(f"'{on}': name a sensor and a quantity, like sensor:greenhouse.temperature")
    if kind == "ha" and not re.fullmatch(r"[a-z_]+\.[a-z0-9_]+", what):
        raise UserError(f"'{on}': name an entity id, like ha:cover.garage_door")
    return cast(Kind, kind), what


def parse_condition(text: str) -> tuple[str, float]:
    """A sensor's ``when``: ``below 5`` or ``above 30`` (``<`` and ``>`` too)."""
    match = _CONDITION.match(text)
    if match is None:
        raise UserError(f"'{text}' is not a threshold; write it like 'below 5' or 'above 30'")
    word = {"<": "below", ">": "above"}.get(match[1], match[1])
    return word, float(match[2])


def parse_rate(text: str) -> tuple[int, float]:
    """``rate_limit``: ``"10/10m"`` is at most 10 messages in any 10 minutes; ``"0"`` none."""
    if text.strip() in ("", "0"):
        return 0, 0.0
    match = _RATE.match(text)
    if match is None or int(match[1]) < 1:
        raise UserError(f"'{text}' is not a rate limit; write it like '10/10m' (or '0' for none)")
    return int(match[1]), parse_duration(match[2]).total_seconds()


def check_hours(text: str) -> str:
    """``quiet_hours`` / ``active_hours``: ``"22:00-07:00"`` or empty."""
    if text and not is_hours(text):
        raise UserError(f"expected a range like '22:00-07:00', got {text!r}")
    return text


class TriggerConfig(Section):
    """One ``[[triggers]]`` table."""

    name: str
    on: str
    to: str = "owner"
    say: str = ""
    ask: str = ""
    when: str = ""
    for_: str = Field(default="0", alias="for")
    cooldown: str = "0"
    quiet_hours: str = ""
    active_hours: str = ""
    rate_limit: str = DEFAULT_RATE
    enabled: bool = True
    # webhook
    secret: SecretStr | None = None
    signature_header: str = ""
    max_bytes: int = Field(default=65536, ge=64, le=10 * 1024 * 1024)
    # sensor
    hysteresis: float = Field(default=0.5, ge=0)
    every: str = ""
    # serial
    pattern: str = ""

    _empty_secret_is_none = field_validator("secret", mode="before")(empty_is_none)

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not TRIGGER_NAME.match(value):
            raise ValueError(
                f"{value!r}: use lower-case letters, digits, _ and - (like doorbell or garage-door)"
            )
        return value

    @field_validator("for_", "cooldown", "every")
    @classmethod
    def _check_duration(cls, value: str) -> str:
        try:
            seconds(value)
        except ScheduleError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("quiet_hours", "active_hours")
    @classmethod
    def _check_hours(cls, value: str) -> str:
        try:
            return check_hours(value)
        except UserError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("rate_limit")
    @classmethod
    def _check_rate(cls, value: str) -> str:
        try:
            parse_rate(value)
        except UserError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("pattern")
    @classmethod
    def _check_pattern(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> TriggerConfig:
        try:
            kind, _ = parse_source(self.on)
        except UserError as exc:
            raise ValueError(f"on: {exc}") from None
        if bool(self.say.strip()) == bool(self.ask.strip()):
            raise ValueError("give say (a text sent as it is) or ask (a turn of the agent), one")
        for key, kinds in _ONLY_FOR.items():
            if key in self.model_fields_set and kind not in kinds:
                raise ValueError(f"{key}: only a {' or '.join(kinds)} trigger has it")
        if kind == "webhook" and self.secret is None:
            raise ValueError(
                'secret: a webhook needs one (callers send "Authorization: Bearer SECRET"), '
                'e.g. secret = "${DOORBELL_SECRET}"'
            )
        if kind == "sensor":
            try:
                parse_condition(self.when)
            except UserError as exc:
                raise ValueError(f"when: {exc}") from None
        if kind == "serial" and not self.pattern:
            raise ValueError("pattern: a serial trigger needs the pattern a line must match")
        if kind == "gpio" and self.when not in ("", "on", "off", "change"):
            raise ValueError(
                f"when: a GPIO trigger fires on 'on', 'off' or 'change', got {self.when!r}"
            )
        return self
