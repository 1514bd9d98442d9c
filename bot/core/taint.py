"""What a turn has read from the outside world: the labels of untrusted content in its context.

A turn is tainted once its context holds content that someone other than the
people in the chat could have written: a web page, an API's answer, an MCP
server's result, serial input, a file PinClaw knows came from elsewhere, a
message forwarded or quoted from someone else, or such content still in the
conversation's history. The policy gate then asks before any call with side
effects (``[security] after_untrusted``), whatever rules would have let it run.

Tool output that tainted a turn is marked in the transcript
(``<untrusted source="web_fetch" from="example.org">``), so a later turn that
still has it in its history starts tainted too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

MAX_LABELS = 20
_FROM = re.compile(r'<untrusted source="[^"]*" from="([^"]*)">')


@dataclass(slots=True)
class Taint:
    """The labels of what a turn has read from outside, in the order first read."""

    labels: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.labels)

    def add(self, label: str) -> None:
        """Note that the turn read ``label`` (a host, a server, a port, a file ...)."""
        label = " ".join(label.split())
        if label and label not in self.labels and len(self.labels) < MAX_LABELS:
            self.labels.append(label)

    def extend(self, labels: Iterable[str]) -> None:
        """Add several labels."""
        for label in labels:
            self.add(label)

    def describe(self, limit: int = 3) -> str:
        """The labels for a sentence: "example.org", "a, b and 2 more"."""
        return listed(self.labels, limit)


def listed(items: Iterable[str], limit: int = 3) -> str:
    """``items`` (duplicates dropped) for a sentence: "a", "a and b", "a, b, c and 2 more"."""
    names = list(dict.fromkeys(items))
    shown, rest = names[:limit], len(names) - limit
    if rest > 0:
        return f"{', '.join(shown)} and {rest} more"
    if len(shown) > 1:
        return f"{', '.join(shown[:-1])} and {shown[-1]}"
    return shown[0] if shown else ""


def marked_sources(texts: Iterable[str]) -> list[str]:
    """The labels that earlier tool results in ``texts`` were marked with."""
    found: list[str] = []
    for text in texts:
        if '" from="' in text:
            found.extend(unescape(label) for label in _FROM.findall(text))
    return found


def escape(label: str) -> str:
    """``label`` safe inside the ``from="..."`` attribute of the untrusted marker."""
    return label.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def unescape(label: str) -> str:
    """The reverse of ``escape``."""
    return label.replace("&lt;", "<").replace("&quot;", '"').replace("&amp;", "&")
