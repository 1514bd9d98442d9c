"""What a trigger is, what an event is, and how a ``say`` text is filled in.

A ``Trigger`` is the same whether it came from ``[[triggers]]`` in the config
(``made_by = "config"``) or was made from a chat or ``pinclaw triggers add``
(stored in SQLite). Sources hand the service an ``Event``: a one-line summary
for people and the model, the values ``{placeholders}`` may use, whether those
values hold text from outside (a webhook body, a serial line, a Home Assistant
state), and an optional idempotency key.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.config.triggers import (
    Kind,
    TriggerConfig,
    parse_condition,
    parse_rate,
    parse_source,
    seconds,
)

Outcome = Literal[
    "fired", "duplicate", "cooldown", "limited", "quiet", "inactive", "disabled", "unknown"
]
"""What became of an event: ``fired`` (recorded, to be delivered) or why it did not fire."""

MAX_FIELD_CHARS = 1500
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)\}")


@dataclass(frozen=True, slots=True)
class Trigger:
    """One trigger, from the config or the store."""

    name: str
    on: str
    to: str = "owner"
    say: str = ""
    ask: str = ""
    when: str = ""
    for_s: float = 0.0
    cooldown_s: float = 0.0
    quiet_hours: str = ""
    active_hours: str = ""
    rate_limit: str = "10/10m"
    enabled: bool = True
    secret: str = ""
    signature_header: str = ""
    max_bytes: int = 65536
    hysteresis: float = 0.5
    every_s: float = 0.0
    pattern: str = ""
    made_by: Literal["config", "chat", "cli"] = "config"
    creator_id: str = "owner"
    creator_name: str = "the owner (config)"
    id: int = 0  # the store's row id; 0 for a trigger from the config

    @property
    def kind(self) -> Kind:
        """The source kind: webhook, gpio, sensor, ha or serial."""
        return parse_source(self.on)[0]

    @property
    def subject(self) -> str:
        """What the source watches: a device, ``sensor.quantity``, an entity, a port."""
        return parse_source(self.on)[1]

    @property
    def action(self) -> Literal["say", "ask"]:
        """``say`` (a fixed text) or ``ask`` (an agent turn)."""
        return "ask" if self.ask.strip() else "say"

    @property
    def rate(self) -> tuple[int, float]:
        """At most this many messages in this many seconds; (0, 0) for no limit."""
        return parse_rate(self.rate_limit)

    def threshold(self) -> tuple[str, float]:
        """A sensor trigger's condition: ``("below", 5.0)``."""
        return parse_condition(self.when)

    def describe(self) -> str:
        """The whole trigger in one line, as the approval card and ``list`` show it."""
        parts = [f"on {self.on}"]
        if self.when:
            parts.append(f"when {self.when}")
        if self.for_s:
            parts.append(f"for {_short(self.for_s)}")
        if self.pattern:
            parts.append(f"matching /{self.pattern}/")
        parts.append(f"say {self.say!r}" if self.action == "say" else f"ask {self.ask!r}")
        parts.append(f"to {self.to}")
        if self.cooldown_s:
            parts.append(f"cooldown {_short(self.cooldown_s)}")
        if self.quiet_hours:
            parts.append(f"quiet {self.quiet_hours}")
        if self.active_hours:
            parts.append(f"only {self.active_hours}")
        if not self.enabled:
            parts.append("disabled")
        return f"{self.name}: " + ", ".join(parts)


def from_config(table: TriggerConfig) -> Trigger:
    """The trigger a ``[[triggers]]`` table describes."""
    return Trigger(
        name=table.name,
        on=table.on.strip(),
        to=table.to.strip(),
        say=table.say,
        ask=table.ask,
        when=table.when.strip(),
        for_s=seconds(table.for_),
        cooldown_s=seconds(table.cooldown),
        quiet_hours=table.quiet_hours,
        active_hours=table.active_hours,
        rate_limit=table.rate_limit,
        enabled=table.enabled,
        secret=table.secret.get_secret_value() if table.secret else "",
        signature_header=table.signature_header.strip(),
        max_bytes=table.max_bytes,
        hysteresis=table.hysteresis,
        every_s=seconds(table.every),
        pattern=table.pattern,
    )


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened to a source, handed to the service for one trigger."""

    summary: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    untrusted: bool = False
    key: str = ""
    at: float = field(default_factory=time.time)

    def to_json(self) -> str:
        """The event as stored with its firing."""
        return json.dumps(
            {"summary": self.summary, "fields": self.fields, "untrusted": self.untrusted,
             "key": self.key, "at": self.at},
            ensure_ascii=False, default=str,
        )  # fmt: skip

    @classmethod
    def from_json(cls, text: str) -> Event:
        """The event back from its stored form."""
        data = json.loads(text)
        return cls(
            str(data.get("summary", "")),
            dict(data.get("fields") or {}),
            bool(data.get("untrusted")),
            str(data.get("key", "")),
            float(data.get("at", 0.0)),
        )


def fill(template: str, values: Mapping[str, Any], *, untrusted: bool = False) -> str:
    """``template`` with each ``{name}`` or ``{name.key}`` replaced by its value.

    Only plain names and dotted keys are looked up (no attribute access, no format
    specs); an unknown placeholder stays as written, so a typo shows in the message
    rather than failing the delivery. Each value is cut to ``MAX_FIELD_CHARS``. An
    ``untrusted`` value (a webhook body...) cannot make a link whose text hides its
    address: ``](`` in it is broken up, so the chat shows the address as written.
    """

    def one(match: re.Match[str]) -> str:
        found = lookup(values, match[1])
        if found is None:
            return match[0]
        text = found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)
        if untrusted:
            text = text.replace("](", "]\u200b(")
        return text if len(text) <= MAX_FIELD_CHARS else text[: MAX_FIELD_CHARS - 1] + "…"

    return _PLACEHOLDER.sub(one, template)


def lookup(values: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` in nested mappings (and lists by index); None if absent."""
    current: Any = values
    for part in path.split("."):
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return None
    if isinstance(current, bool):
        return "true" if current else "false"
    if isinstance(current, float):
        return f"{current:g}"
    if isinstance(current, int):
        return str(current)
    return current


def _short(value: float) -> str:
    from bot.core.durations import format_duration

    return format_duration(value)
