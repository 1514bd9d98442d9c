"""What the per-command rules see: the call being rated, and the walker they report to.

``shell.risk.Walker`` walks a command line and calls a rule (``shell.rules``,
``shell.code_rules``, ``shell.git``, ``shell.network``) for each command; the
rules know the walker only through the ``Walker`` protocol here, so no rule
module imports the walker's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from bot.core.tool_api import Risk
from bot.security.shell.lexer import Word
from bot.security.shell.paths import Findings, Use

Stdin = Literal["none", "pipe", "file", "text"]


@dataclass(frozen=True, slots=True)
class Call:
    """One command ready to be rated: name, arguments, and what feeds its stdin."""

    name: str
    args: list[Word]
    stdin: Stdin = "none"
    stdin_text: str = ""  # a here-document or here-string
    stdin_file: Word | None = None  # the target of `< file`
    upstream: tuple[str, ...] = ()

    def but(self, **changes: Any) -> Call:
        """This call with some fields changed."""
        return replace(self, **changes)


class Walker(Protocol):
    """What a rule may do: record findings, judge paths and hosts, rate nested code."""

    findings: Findings
    generating: int
    home: Path

    def add(self, risk: Risk, reason: str) -> None:
        """Record that something in the line is at least ``risk``, because of ``reason``."""
        ...

    def note(self, reason: str) -> None:
        """Something a person asked to approve the line should know (shown if it asks)."""
        ...

    def folder(self) -> Path | None:
        """The folder the command runs in; None when it is only known at run time."""
        ...

    def inside(self, path: Path) -> bool:
        """Whether ``path`` lies in the workspace or an extra root."""
        ...

    def contact(self, host: str, port: int, label: str, resolve: bool = True) -> None:
        """A host the line connects to."""
        ...

    def judge(self, word: Word, use: Use) -> None:
        """Judge one word that may be a path."""
        ...

    def judge_args(self, args: Sequence[Word], use: Use) -> None:
        """Judge every argument that may be a path."""
        ...

    def change_directory(self, word: Word | None) -> None:
        """Follow a ``cd`` for the rest of the line."""
        ...

    def line(self, text: str, at_least: str | None = None) -> None:
        """Classify a nested command line."""
        ...

    def run_words(self, words: Sequence[Word], *, generated: bool = False) -> None:
        """Rate ``words`` as a command of their own."""
        ...

    def assign(self, word: Word) -> None:
        """A ``NAME=value`` word."""
        ...

    def name_variable(self, word: Word) -> None:
        """A word naming a variable a builtin sets, removes or hides (``export -n NAME``)."""
        ...

    def rate(self, call: Call, use: Use | None = None) -> None:
        """The default rating: the tables for the name, then every argument judged."""
        ...
