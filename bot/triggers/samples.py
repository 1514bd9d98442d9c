"""The made-up event a test firing carries (the panel's "Test" button; the same shape as
``pinclaw triggers test``): the values its kind of source fills in, so a ``say`` text
reads as it will for a real event, and a summary that says it was a test and who
asked for it.
"""

from __future__ import annotations

from typing import Any

from bot.config.hardware import HardwareConfig
from bot.triggers.spec import Event, Trigger

UNITS = {"temperature": "°C", "humidity": "%", "pressure": "hPa"}


def sample_event(trigger: Trigger, hardware: HardwareConfig, by: str) -> Event:
    """An event like the one ``trigger``'s source would hand over, marked as a test by ``by``."""
    what = trigger.subject
    fields: dict[str, Any]
    if trigger.kind == "gpio":
        state = "off" if trigger.when == "off" else "on"
        fields = {"device": what, "state": state}
        if (device := hardware.gpio.get(what)) is not None:
            fields["pin"] = device.pin
        if trigger.for_s:
            fields["held_s"] = trigger.for_s
        summary = f"{what} turned {state}"
    elif trigger.kind == "sensor":
        condition, threshold = trigger.threshold()
        sensor, _, quantity = what.partition(".")
        value = threshold - 1 if condition == "below" else threshold + 1
        unit = UNITS.get(quantity, "")
        fields = {
            "sensor": sensor,
            "quantity": quantity,
            "value": f"{value:g}",
            "unit": unit,
            "threshold": f"{threshold:g}",
            "condition": f"{condition} {threshold:g}",
        }
        summary = f"{sensor} {quantity} {value:g} {unit}, {condition} {threshold:g}"
    elif trigger.kind == "ha":
        state = trigger.when or "on"
        old = "on" if state == "off" else "off"
        fields = {"entity": what, "state": state, "old_state": old, "name": what,
                  "attributes": {}}  # fmt: skip
        summary = f"{what} changed from {old} to {state}"
    elif trigger.kind == "serial":
        line = f"a test line from {by}"
        fields = {"port": what, "line": line, "match": ""}
        summary = f"{what}: a line"
    else:
        body = f"a test from {by}"
        fields = {"body": body, "query": {}}
        summary = f"POST /hooks/{trigger.name}"
    untrusted = trigger.kind in ("webhook", "ha", "serial")
    return Event(f"{summary}, a test by {by}", fields, untrusted=untrusted)
