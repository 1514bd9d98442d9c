"""One short line saying what the agent is doing while tools run, for the reply's draft.

The line names the tool in words a person understands and, where it helps, its main
argument: the start of a command, a file's path, a sensor's name, a web address's
host (never its path or query, where keys travel). The argument passes through the
config's secret redactor first, and is left out when there is no redactor, which is
how group chats get their lines: a group sees what kind of thing runs, not its
arguments (as with ``approvals_in_dm``). Tools not listed here are named as they are.

The line follows each call of a round as the policy gate reports it
(``ProgressLine``): the calls that run are described as running; a call that waits
for a person reads "waiting for your approval: …", never "running"; a refused call
is never shown as running, and once a round's calls are settled the line names
what ran (or says "working…" when nothing did) until the model writes again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

from bot.core.conversation import ToolCall
from bot.core.tool_api import CallState

ProgressSink = Callable[[str], None]
"""Receives a progress line while the tools of a round run."""

Redact = Callable[[str], str]

MAX_ARGUMENT_CHARS = 40

# tool name -> (what it does, the argument worth showing or None)
LABELS: dict[str, tuple[str, str | None]] = {
    "shell": ("running shell", "command"),
    "web_fetch": ("reading a web page from", "url"),
    "browser_open": ("opening a web page from", "url"),
    "browser_screenshot": ("taking a screenshot of", "url"),
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
    "notify": ("sending a message to", "to"),
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
    label, key = LABELS.get(call.name, (f"using {_name(call)}", None))
    shown = _shown_argument(call, key, redact)
    return f"{label}: `{shown}`…" if shown else f"{label}…"


def describe_waiting(calls: Sequence[ToolCall], redact: Redact | None) -> str:
    """The line while calls wait for a person: "waiting for your approval: shell
    `mkdir build`" (the first call, and how many more), never worded as running."""
    first = calls[0]
    shown = _shown_argument(first, LABELS.get(first.name, ("", None))[1], redact)
    what = f"{_name(first)} `{shown}`" if shown else _name(first)
    more = len(calls) - 1
    return f"waiting for your approval: {what}" + (f" (and {more} more)" if more else "")


_Seen = Literal["waiting", "running", "ran", "refused"] | None
"""What a round's call did so far (None: not reported yet)."""


class ProgressLine:
    """The progress line of one turn, following the calls of its current round.

    It is the turn's ``ToolContext.on_call``: ``begin`` starts a round, the policy gate
    reports each call (``line(call, state)``), ``settle`` ends the round (calls nobody
    reported count as done without running). A line goes to ``sink`` only when it
    changes.
    """

    def __init__(self, sink: ProgressSink, redact: Redact | None) -> None:
        self._sink = sink
        self._redact = redact
        self._calls: list[ToolCall] = []
        self._states: dict[int, _Seen] = {}  # by id(): the gate reports the very same call
        self._line = ""

    def begin(self, calls: Sequence[ToolCall]) -> None:
        """A new round of ``calls``: none has been reported yet (the model's text since the
        last round replaced the line, so the next one is shown even if it reads the same)."""
        self._calls, self._states, self._line = list(calls), {}, ""

    def settle(self) -> None:
        """The round is over: every call is done."""
        for call in self._calls:
            if self._states.get(id(call)) != "ran":
                self._states[id(call)] = "refused"
        self._show()

    def __call__(self, call: ToolCall, state: CallState) -> None:
        """``call`` is now ``state``: show what that changes."""
        key = id(call)
        if not any(c is call for c in self._calls):
            return  # not one of this round's calls
        before = self._states.get(key)
        if state == "done":
            self._states[key] = "ran" if before in ("running", "ran") else "refused"
        else:
            self._states[key] = state
        self._show()

    def _show(self) -> None:
        line = self._describe()
        if not line or line == self._line:
            return
        self._line = line
        self._sink(line)

    def _describe(self) -> str:
        def having(*states: _Seen) -> list[ToolCall]:
            return [c for c in self._calls if self._states.get(id(c)) in states]

        if running := having("running"):
            return describe_calls(running, self._redact)
        if waiting := having("waiting"):
            return describe_waiting(waiting, self._redact)
        if not self._states or having(None):  # calls still on their way to the gate
            return ""
        ran = having("ran")
        return describe_calls(ran, self._redact)  # "working…" when none ran


def _name(call: ToolCall) -> str:
    return _NAME.sub("", call.name)[:MAX_ARGUMENT_CHARS] or "a tool"


def _shown_argument(call: ToolCall, key: str | None, redact: Redact | None) -> str:
    if redact is None or not key or call.error:
        return ""
    return _argument(key, call.arguments.get(key), redact)


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
