"""Judging the paths a command line names, and collecting what the classifier found.

``PathJudge`` takes a word that may be a path (a redirect target, an argument,
an option value), puts in what can be known before the command runs (``~``,
``$HOME``, variables assigned literally earlier in the line, ``cd`` so far,
what a glob matches now) and asks the ``PathGuard``: a forbidden place makes
the whole line forbidden; outside the workspace, a read is medium and a write
high; inside, a write is medium.
"""

from __future__ import annotations

import glob
import itertools
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from bot.core.tool_api import RISK_ORDER, Assessment, Risk
from bot.security.files.paths import PathGuard
from bot.security.shell.lexer import Word
from bot.security.shell.tables import ASSIGNMENT, BLOCK_DEVICE, REMOTE, SAFE_DEVICES, URL

Use = Literal["read", "write", "delete", "run", "name"]
"""What a command does with a path; ``name`` only mentions it (``echo /etc``)."""

MAX_GLOB_MATCHES = 200
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_VERBS = {"read": "reads", "write": "writes to", "delete": "deletes", "run": "runs"}
_DESCRIPTOR = re.compile(r"^(-|/dev/(stdin|tty|fd/.*)|/proc/[^/]+/fd(/.*)?|[<>]\(.*)$", re.S)
"""Where a program read "from a file" really comes from the command's input."""
_PROCESS = re.compile(
    r"^/proc/([0-9]+|[^/]*[*?\[][^/]*)(/|$)|^/proc/(self|thread-self)/(root|cwd|task)(/|$)"
)
"""A process's folder in /proc (its environment, command line, memory, root)."""
_SOCKET_PATH = re.compile(r"^/dev/(tcp|udp)/([^/]+)/([0-9]+)$")
_FD = re.compile(r"^/dev/fd/[0-9]+$")
_PROC_DOORS = frozenset({"fd", "stdin", "stdout", "stderr"})
"""Names in /dev that are links into /proc/self."""


class Findings:
    """What made a line risky: findings at each level, and forbidden places named."""

    def __init__(self) -> None:
        self.found: list[tuple[Risk, str]] = []
        self.forbidden: list[str] = []
        self.contacts: list[tuple[str, int, str]] = []  # host, port, as written

    def add(self, risk: Risk, reason: str) -> None:
        """Record that something in the line is at least ``risk``, because of ``reason``."""
        if risk != "low":
            self.found.append((risk, reason))

    def assessment(self) -> Assessment:
        """Forbidden if anything was; else the highest risk with (up to three) reasons."""
        if self.forbidden:
            return Assessment("high", "; ".join(dict.fromkeys(self.forbidden)), forbidden=True)
        if not self.found:
            return Assessment("low", "read-only commands")
        top = max(RISK_ORDER[risk] for risk, _ in self.found)
        risk = next(r for r, n in RISK_ORDER.items() if n == top)
        reasons = dict.fromkeys(reason for r, reason in self.found if r == risk)
        return Assessment(risk, "; ".join(list(reasons)[:3]))


class PathJudge:
    """Judges path-like words for one command line, following its ``cd`` and variables."""

    def __init__(
        self, guard: PathGuard, cwd: Path | None, findings: Findings, *, sandboxed: bool = False
    ) -> None:
        self.guard = guard
        self.base = cwd
        self.findings = findings
        self.sandboxed = sandboxed
        self.prefix = ""  # where `cd` earlier in the line went, relative to ``base``
        self.prefix_known = True
        self.variables: dict[str, str] = {"HOME": str(guard.home)}

    def judge_args(self, args: Sequence[Word], use: Use) -> None:
        """Judge every argument that may be a path; option values after ``=`` too."""
        for word in args:
            text = word.text
            if text.startswith("-"):
                if "=" in text:
                    text = text.split("=", 1)[1]
                elif "/" in text:
                    text = text[text.index("/") :]  # -I/usr/include
                else:
                    continue
            elif ASSIGNMENT.match(text):
                text = text.split("=", 1)[1]
            self.judge(Word(text, word.expands, word.glob, word.quoted), use)

    def judge(self, word: Word, use: Use) -> None:
        """Judge one word that may be a path: forbidden, outside or inside the workspace."""
        text = word.text.removeprefix("@")  # curl -d @file
        if text.startswith("file://"):
            text = text.removeprefix("file://")
        elif not text or URL.match(text):
            return
        if REMOTE.match(text) and not text.startswith(("/", ".", "~")):
            return  # host:path is on another machine
        label = shown(word.text)
        if use == "run" and _DESCRIPTOR.match(text):
            self.findings.add(
                "high", f"it runs code fed through its input or a descriptor ({label}), unchecked"
            )
            return
        if word.expands:
            text = _VARIABLE.sub(lambda m: self.variables.get(m[1] or m[2], m[0]), text)
            if "$" in text or "`" in text or word.subs:
                self._known_part(text, label)
                self._unknown(label, use)
                return
        if socket := _SOCKET_PATH.match(text):
            self.findings.contacts.append((socket[2], int(socket[3]), label))
            self.findings.add("medium", f"it opens a network connection through {label}")
        if text in SAFE_DEVICES or _FD.match(text) or text == "-":
            return  # a device that holds nothing, a descriptor, or "-": standard input or output
        if use in ("write", "delete") and BLOCK_DEVICE.match(text):
            self.findings.add("high", f"it writes to the disk device {label}")
        for candidate in self._expand_glob(text) if word.glob else [text]:
            self._verdict(candidate, label, use)

    def _known_part(self, text: str, label: str) -> None:
        """Judge the folder a partly unknown path starts in (``/proc/$PPID/environ``)."""
        cut = min((i for i in (text.find("$"), text.find("`")) if i >= 0), default=len(text))
        folder = text[:cut].rpartition("/")[0]
        if folder or text.startswith("/"):
            self._verdict(folder or "/", label, "name", exact=False)

    def _unknown(self, label: str, use: Use) -> None:
        if use in ("write", "delete", "run"):
            self.findings.add("high", f"it {_VERBS[use]} {label}, a path only known when it runs")
        elif use == "read":
            self.findings.add("medium", f"it uses {label}, a value only known when it runs")

    def _verdict(self, text: str, label: str, use: Use, *, exact: bool = True) -> None:
        if not self.prefix_known and not os.path.isabs(text) and not text.startswith("~"):
            if use != "name":
                risk: Risk = "medium" if use == "read" else "high"
                where = "in a folder only known when it runs"
                self.findings.add(risk, f"it {_VERBS[use]} {label} {where}")
            return
        lexical = self.guard.absolute(text, self.cwd()) if "\0" not in text else ""
        if _through_proc(text, self.cwd(), self.guard.workspace):
            self.findings.forbidden.append(
                f"{label} goes through /dev/fd or /dev/stdin into a process's /proc folder"
            )
            return
        if _PROCESS.match(lexical) or (not exact and _in_proc(lexical)):
            self.findings.forbidden.append(f"{label} reads other processes' environment or memory")
            return
        verdict = self.guard.verdict(text, self.cwd())
        if verdict == "forbidden":
            self.findings.forbidden.append(f"{label} is in a forbidden location")
        elif use == "name":
            return
        elif verdict == "outside":
            risk = "medium" if use == "read" else "high"
            self.findings.add(risk, f"it {_VERBS[use]} {label}, outside the workspace")
        elif use == "run" and self.sandboxed:
            return  # inside the sandbox a program from the workspace can only change the workspace
        elif use != "read":
            self.findings.add("medium", f"it {_VERBS[use]} {label}")

    def inside(self, word: Word) -> bool:
        """Whether ``word`` is a plain path that lies inside the workspace or an extra root."""
        if word.expands or word.glob or not self.prefix_known or "\0" in word.text:
            return False
        return self.guard.verdict(word.text, self.cwd()) == "inside"

    def cwd(self) -> Path | None:
        """The folder relative paths start from: ``cwd`` plus any ``cd`` so far."""
        if not self.prefix:
            return self.base
        return Path(os.path.join(self.base or "", self.prefix))

    def change_directory(self, word: Word | None) -> None:
        """Follow a ``cd``: later relative paths start from there."""
        if word is None or word.text == "~":
            self.prefix = str(self.guard.home)
        elif word.expands or word.text == "-" or "\0" in word.text:
            self.prefix_known = False
        else:
            text = word.text
            if text == "~" or text.startswith("~/"):
                text = str(self.guard.home) + text[1:]
            self.prefix = os.path.join(self.prefix, text)

    def remember(self, name: str, value: str) -> None:
        """A variable assigned a literal value earlier in the line."""
        self.variables[name] = value

    def _expand_glob(self, pattern: str) -> list[str]:
        """What an unquoted pattern matches now (judged as written when nothing matches)."""
        folder = self.cwd()
        root = self.guard.workspace if folder is None else self.guard.workspace / folder
        try:
            expanded = self.guard.absolute(pattern, folder) if pattern[:1] == "~" else pattern
            full = expanded if os.path.isabs(expanded) else os.path.join(root, expanded)
            matches = list(itertools.islice(glob.iglob(full), MAX_GLOB_MATCHES))
        except (OSError, ValueError):  # a NUL byte, an unreadable folder
            return [pattern]
        return matches or [pattern]


def _through_proc(text: str, cwd: Path | None, workspace: Path) -> bool:
    """Whether ``text`` walks on from ``/dev/fd`` or ``/dev/std*``, which are links into
    ``/proc/self``: ``/dev/fd/../cwd``, ``/dev/stdin/../../1/environ`` (only ``/dev/fd/N``
    itself and the bare ``/dev/stdin`` are a descriptor)."""
    start = os.path.join(workspace, cwd or "") if not text.startswith("/") else ""
    folders: list[str] = []
    parts = [p for p in os.path.join(start, text).split("/") if p not in ("", ".")]
    for index, part in enumerate(parts):
        if part == "..":
            if folders:
                folders.pop()
            continue
        folders.append(part)
        if len(folders) == 2 and folders[0] == "dev" and folders[1] in _PROC_DOORS:
            rest = parts[index + 1 :]
            if not rest:
                return False
            return not (folders[1] == "fd" and len(rest) == 1 and rest[0].isdigit())
    return False


def _in_proc(path: str) -> bool:
    return path == "/proc" or path.startswith("/proc/")


def shown(text: str, limit: int = 60) -> str:
    """``text`` for a reason: printable, and cut at ``limit`` characters."""
    clean = "".join(c if c.isprintable() else "?" for c in text[:limit])
    return clean + ("…" if len(text) > limit else "")
