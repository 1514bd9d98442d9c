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
ONLY_FOR: dict[str, tuple[str, ...]] = {
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
    """A trigger: an event that makes PinClaw speak first (a webhook call, a GPIO input, a
    sensor threshold, a Home Assistant state, a serial line), and what it then says or asks."""

    name: str = Field(
        description=(
            "The trigger's name: lower-case letters, digits, `_` and `-`, up to 40 "
            "characters (like `garage-door`). A webhook is called at `/hooks/NAME`."
        ),
    )
    on: str = Field(
        description=(
            "What it listens to: `webhook`, `gpio:DEVICE` (an input of `[hardware.gpio]`), "
            "`sensor:NAME.QUANTITY` (like `sensor:greenhouse.temperature`), `ha:ENTITY_ID` "
            "(like `ha:cover.garage_door`) or `serial:PORT` (a port of `[hardware.serial]`)."
        ),
    )
    to: str = Field(
        default="owner",
        description=(
            "Where its message goes, as for scheduled jobs: `owner` (the owner's private "
            "chat, else their inbox), `CHANNEL:CHAT_ID` (like `telegram:123456789`), "
            "`terminal:owner`, `log`, `file:PATH` or `none`."
        ),
    )
    say: str = Field(
        default="",
        description=(
            "A fixed text sent when it fires, with `{placeholders}` filled from the event "
            "(like `{time}` or `{body}`), without asking the model. Give `say` or `ask`, "
            "not both."
        ),
    )
    ask: str = Field(
        default="",
        description=(
            "A prompt for a turn of the agent, with the event as context, under the same "
            "policy and approvals as a chat turn of the person who made the trigger. Give "
            "`say` or `ask`, not both."
        ),
    )
    when: str = Field(
        default="",
        description=(
            "Which change fires it. GPIO: `on` (also when empty), `off` or `change`; "
            "sensor: `below N` or `above N` (required); Home Assistant: the new state, like "
            "`open` (empty: any change). Webhooks and serial lines do not use it."
        ),
    )
    for_: str = Field(
        default="0",
        alias="for",
        description=(
            "Fire only once the condition has lasted this long, as a duration like `5s` or "
            "`3m` (GPIO, sensor and Home Assistant triggers). `0`: at once."
        ),
    )
    cooldown: str = Field(
        default="0",
        description=(
            "After a message is sent, further events are held back this long (a duration "
            "like `1m`) and summed up in one message afterwards. `0`: no cooldown."
        ),
    )
    quiet_hours: str = Field(
        default="",
        description=(
            "Hours when events are recorded but not sent, like `23:00-07:00` (in "
            "`[general] timezone`; a range may cross midnight). Empty: none."
        ),
    )
    active_hours: str = Field(
        default="",
        description=(
            "The only hours when it fires, like `22:00-06:00` (in `[general] timezone`); "
            "events outside them are recorded but not sent. Empty: always."
        ),
    )
    rate_limit: str = Field(
        default=DEFAULT_RATE,
        description=(
            "At most this many messages in a window, written `COUNT/DURATION`: `10/10m` is "
            "at most 10 in any 10 minutes, and what is held back is summed up in one "
            "message afterwards. `0`: no limit."
        ),
    )
    enabled: bool = Field(
        default=True, description="Whether it fires; `false` keeps it but ignores its events."
    )
    secret: SecretStr | None = Field(
        default=None,
        description=(
            "Webhooks (required): the secret callers prove they know, by sending "
            "`Authorization: Bearer SECRET` or by signing the body (`signature_header`). "
            'Make it long, and keep it out of the file: `secret = "${DOORBELL_SECRET}"`.'
        ),
    )
    signature_header: str = Field(
        default="",
        description=(
            "Webhooks: the header that carries an HMAC-SHA256 of the body keyed with "
            "`secret`, in hex (a `sha256=` prefix is fine), like GitHub's "
            "`X-Hub-Signature-256`; then a bearer token is not accepted. Empty: callers send "
            "`Authorization: Bearer SECRET`."
        ),
    )
    max_bytes: int = Field(
        default=65536,
        ge=64,
        le=10 * 1024 * 1024,
        description=("Webhooks: the largest body accepted, in bytes; a larger one gets HTTP 413."),
    )
    hysteresis: float = Field(
        default=0.5,
        ge=0,
        description=(
            "Sensors: how far back past the threshold (in the sensor's unit) a value must "
            "come before the trigger can fire again, so a value hovering at it fires once: "
            "`below 5` with `0.5` is armed again at 5.5."
        ),
    )
    every: str = Field(
        default="",
        description=(
            "Sensors: how often the sensor is read, as a duration like `1m`. Empty or `0`: "
            "`[hardware] sample_every`, or every minute when that is `0`."
        ),
    )
    pattern: str = Field(
        default="",
        description=(
            "Serial lines (required): a regular expression a line must match, anywhere in "
            "it; named groups like `(?P<watts>\\d+)` become placeholders."
        ),
    )

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
        for key, kinds in ONLY_FOR.items():
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
