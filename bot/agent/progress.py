"""One short line saying what the agent is doing while tools run, for the reply's draft.

The line names the tool in words a person understands and, where it helps, its main
argument: the start of a command, a file's path, a sensor's name, a web address's
host (never its path or query, where keys travel). The argument passes through the
config's secret redactor first, and is left out when there is no redactor, which is
how group chats get their lines: a group sees what kind of thing runs, not its
arguments (as with ``approvals_in_dm``). Tools not listed here are named as they are.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from bot.core.conversation import ToolCall

ProgressSink = Callable[[str], None]
"""Receives a progress line while the tools of a round run."""

Redact = Callable[[str], str]

MAX_ARGUMENT_CHARS = 40

# tool name -> (what it does, the argument worth showing or None)
LABELS: dict[str, tuple[str, str | None]] = {
    "shell": ("running shell", "command"),
    "web_fetch": ("reading a web page from", "url"),
    "http_request": ("calling", "url"),
    "sensor_read": ("reading sensor", "sensor"),
    "file_read": ("reading", "path"),
    "file_write": ("writing", "path"),
    "file_edit": ("editing", "path"),
    "file_list": ("listing", "path"),
    "glob_search": ("looking for files", "pattern"),
    "content_search": ("searching files for", "pattern"),
    "send_file": ("sending", "path"),
    "memory_recall": ("searching memory", None),
    "memory_store": ("remembering", None),
    "memory_forget": ("forgetting", None),
    "ha_states": ("checking Home Assistant", "entity_id"),
    "ha_call_service": ("switching", "entity_id"),
    "gpio_list": ("listing GPIO devices", None),
    "gpio_read": ("reading", "device"),
    "gpio_write": ("switching", "device"),
    "gpio_pwm": ("setting", "device"),
    "gpio_pulse": ("pulsing", "device"),
    "i2c_scan": ("scanning I2C bus", "bus"),
    "i2c_read": ("reading I2C device", "address"),
    "i2c_write": ("writing to I2C device", "address"),
    "serial_list": ("listing serial ports", None),
    "serial_send": ("talking to", "port"),
    "system_info": ("checking the system", None),
    "clock": ("checking the time", None),
    "calculator": ("calculating", "expression"),
    "cron_add": ("scheduling", "name"),
    "cron_list": ("listing scheduled jobs", None),
    "cron_remove": ("removing a scheduled job", None),
    "cron_run": ("running a scheduled job", None),
    "trigger_add": ("setting up the trigger", "name"),
    "trigger_list": ("listing triggers", None),
    "trigger_remove": ("removing a trigger", None),
    "delegate": ("handing the task to", "agent"),
}
_NAME = re.compile(r"[^\w.-]")


def describe_calls(calls: Sequence[ToolCall], redact: Redact | None) -> str:
    """The progress line for the calls of one round (the first, and how many more)."""
    if not calls:
        return "working…"
    line = describe_call(calls[0], redact)
    more = len(calls) - 1
    return f"{line} (and {more} more)" if more else line


def describe_call(call: ToolCall, redact: Redact | None) -> str:
    """``running shell: `ls -la`…``; the argument only with a redactor to pass it through."""
    name = _NAME.sub("", call.name)[:MAX_ARGUMENT_CHARS] or "a tool"
    label, key = LABELS.get(call.name, (f"using {name}", None))
    value = call.arguments.get(key) if key and not call.error else None
    shown = _argument(key or "", value, redact) if redact is not None else ""
    return f"{label}: `{shown}`…" if shown else f"{label}…"


def _argument(key: str, value: Any, redact: Redact) -> str:
    if value is None or isinstance(value, dict | list):
        return ""
    text = f"0x{value:02x}" if key == "address" and isinstance(value, int) else str(value)
    if key == "url":
        text = urlsplit(text.strip()).hostname or ""
    text = redact(" ".join(text.split())).replace("`", "'")
    if len(text) > MAX_ARGUMENT_CHARS:
        text = text[: MAX_ARGUMENT_CHARS - 1].rstrip() + "…"
    return text
