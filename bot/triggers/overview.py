"""Each trigger beside the state of what its source watches, for ``pinclaw status``,
``/status`` and the panel.

Sources report per watched thing (``webhook doorbell``, ``gpio:door_sensor``,
``ha:cover.garage_door``); ``trigger_states`` finds the line of each trigger. A
trigger whose source reports nothing was not taken up by its source (it failed to
start, and the log says why): that counts as down.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.triggers.sources import SourceState
from bot.triggers.spec import Trigger

NOT_WATCHED = "not watched: its source did not start (the daemon's log says why)"


@dataclass(frozen=True, slots=True)
class TriggerState:
    """One trigger and how its source is doing."""

    name: str
    on: str
    enabled: bool
    ok: bool
    detail: str  # "POST /hooks/doorbell", "reconnecting (connection refused)", "disabled"

    def as_dict(self) -> dict[str, Any]:
        """The JSON form, as ``/status`` reports it."""
        return {
            "name": self.name,
            "on": self.on,
            "enabled": self.enabled,
            "ok": self.ok,
            "detail": self.detail,
        }


def trigger_states(
    triggers: Mapping[str, Trigger], states: Iterable[SourceState]
) -> list[TriggerState]:
    """Every trigger by name with the state of what it watches."""
    by_what = {state.what: state for state in states}
    found = []
    for name in sorted(triggers):
        trigger = triggers[name]
        if not trigger.enabled:
            found.append(TriggerState(name, trigger.on, False, True, "disabled"))
            continue
        state = next((by_what[w] for w in _names(trigger) if w in by_what), None)
        if state is None:
            found.append(TriggerState(name, trigger.on, True, False, NOT_WATCHED))
        else:
            found.append(TriggerState(name, trigger.on, True, state.ok, state.detail))
    return found


def _names(trigger: Trigger) -> tuple[str, ...]:
    """How a source may name what this trigger watches."""
    return (f"{trigger.kind} {trigger.name}", trigger.on, f"{trigger.kind}:{trigger.subject}")
