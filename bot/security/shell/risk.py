"""How risky a shell command line is: every segment, substitution and path judged.

``classify`` tokenises the line (``shell.lexer``), splits it into simple
commands on ``;``, ``&&``, ``||``, ``|``, ``&`` and newlines (``shell.parse``)
and rates each one from the tables (``shell.tables``) and the per-command
rules (``shell.rules``, ``shell.code_rules``). Nested code (``$(...)``,
backticks, ``bash -c``, ``find -exec``, ``xargs``, ``env`` and other wrappers)
is classified the same way; paths are judged by the ``PathGuard``
(``shell.paths``). The line is as risky as its riskiest part, and forbidden if
any part names a forbidden place. A first word alone never decides.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.core.tool_api import Assessment, Risk
from bot.security.files.paths import PathGuard
from bot.security.net.addresses import Allowlist
from bot.security.shell.call import Call, Stdin
from bot.security.shell.code_rules import ALL_RULES
from bot.security.shell.lexer import Op, ShellSyntaxError, Word, tokenize
from bot.security.shell.network import (
    NETWORK,
    PROXY_VARIABLES,
    contacts,
    host_problem,
    network_call,
)
from bot.security.shell.parse import SimpleCommand, split_commands
from bot.security.shell.paths import Findings, PathJudge, Use, shown
from bot.security.shell.rules import LOOKS_INSIDE, attaches
from bot.security.shell.tables import (
    ASSIGNMENT,
    DANGEROUS_VARS,
    HIGH,
    LOW,
    MEDIUM,
    NAMES_ONLY,
    RUNS_CODE_OPTIONS,
    WRAPPERS,
    normalise,
)
from bot.security.shell.variable_rules import changes, name_word
from bot.security.shell.variable_rules import tokens as assigned_in

__all__ = ["Call", "LineVerdict", "Use", "Walker", "classify", "examine"]

MAX_DEPTH = 8
_CLEARS = frozenset({("env", "-i"), ("env", "--ignore-environment"), ("env", "-")})
_SYSTEM_BIN = re.compile(r"^/(usr/(local/)?)?s?bin/")


@dataclass(frozen=True, slots=True)
class LineVerdict:
    """A line's assessment, and the host names it contacts (judged before it runs)."""

    assessment: Assessment
    hosts: tuple[tuple[str, int], ...] = ()


def examine(
    command: str,
    *,
    guard: PathGuard,
    allowlist: Collection[str] = (),
    cwd: Path | None = None,
    sandboxed: bool = False,
    hosts: Allowlist | None = None,
) -> LineVerdict:
    """The risk of running ``command`` with ``/bin/sh -c`` in ``cwd`` (the workspace).

    ``sandboxed``: the command will run in the kernel sandbox, where a program
    from the workspace can change nothing but the workspace. ``hosts`` is
    ``allowed_hosts``: private addresses it names may be contacted.
    """
    walker = Walker(guard, allowlist, cwd, sandboxed=sandboxed, hosts=hosts)
    walker.line(command)
    found = walker.findings
    if walker.notes and found.found and not found.forbidden:  # it asks: say what else runs
        found.found.insert(0, ("medium", "; ".join(dict.fromkeys(walker.notes))))
    return LineVerdict(found.assessment(), tuple(dict.fromkeys(walker.names)))


def classify(
    command: str,
    *,
    guard: PathGuard,
    allowlist: Collection[str] = (),
    cwd: Path | None = None,
    sandboxed: bool = False,
) -> Assessment:
    """Only the assessment of ``examine``."""
    found = examine(command, guard=guard, allowlist=allowlist, cwd=cwd, sandboxed=sandboxed)
    return found.assessment


class Walker:
    """Walks one command line and everything nested in it, collecting findings."""

    def __init__(
        self,
        guard: PathGuard,
        allowlist: Collection[str],
        cwd: Path | None,
        *,
        sandboxed: bool = False,
        hosts: Allowlist | None = None,
    ) -> None:
        self.allowlist = [tuple(entry.split()) for entry in allowlist if entry.strip()]
        self.findings = Findings()
        self.paths = PathJudge(guard, cwd, self.findings, sandboxed=sandboxed)
        self.sandboxed = sandboxed
        self.hosts = hosts
        self.names: list[tuple[str, int]] = []  # host names to look up before running
        self.functions: set[str] = set()
        self.home = guard.home
        self.notes: list[str] = []  # what runs too, said only when the line asks anyway
        self.depth = 0
        self.generating = 0  # inside xargs or find -exec: arguments are added at run time

    def add(self, risk: Risk, reason: str) -> None:
        """Record that something in the line is at least ``risk``, because of ``reason``."""
        self.findings.add(risk, reason)

    def note(self, reason: str) -> None:
        """Something a person asked to approve the line should know (shown if it asks)."""
        self.notes.append(reason)

    def folder(self) -> Path | None:
        """The folder the command runs in; None when it is only known at run time."""
        where = self.paths.cwd()
        if where is None or not self.paths.prefix_known:
            return None
        return Path(os.path.abspath(where))

    def inside(self, path: Path) -> bool:
        """Whether ``path`` lies in the workspace or an extra root."""
        return self.paths.guard.verdict(str(path)) == "inside"

    def contact(self, host: str, port: int, label: str, resolve: bool = True) -> None:
        """A host the line connects to: refused if it is not public, else looked up later."""
        problem = host_problem(host, self.hosts)
        if problem:
            self.findings.forbidden.append(
                f"it connects to {shown(label)}: {problem}, which commands may not reach"
            )
        elif resolve and host and "$" not in host:
            self.names.append((host.strip("[]"), port))

    def judge(self, word: Word, use: Use) -> None:
        """Judge one word that may be a path."""
        self.paths.judge(word, use)

    def judge_args(self, args: Sequence[Word], use: Use) -> None:
        """Judge every argument that may be a path."""
        self.paths.judge_args(args, use)

    def change_directory(self, word: Word | None) -> None:
        """Follow a ``cd`` for the rest of the line."""
        self.paths.change_directory(word)

    def line(self, text: str, at_least: str | None = None) -> None:
        """Classify a (nested) command line; ``at_least`` makes it medium with that reason."""
        if at_least:
            self.add("medium", at_least)
        if self.depth >= MAX_DEPTH:
            self.add("high", "the command nests shells too deeply to check")
            return
        try:
            tokens = tokenize(text)
        except ShellSyntaxError as exc:
            self.add("high", f"the command line cannot be read: {exc}")
            return
        assigned_in(self, tokens)
        simples, functions = split_commands(tokens)
        self.functions |= functions
        self.depth += 1
        try:
            for simple in simples:
                self._simple(simple)
        finally:
            self.depth -= 1
        while self.findings.contacts:  # /dev/tcp/HOST/PORT found among the paths
            host, port, label = self.findings.contacts.pop()
            self.contact(host, port, label)

    def run_words(self, words: Sequence[Word], *, generated: bool = False) -> None:
        """Rate ``words`` as a command of their own (``find -exec``, ``xargs``, ``watch -x``)."""
        self.generating += generated
        try:
            self.run(words, Call(normalise(words[0].text), list(words[1:])))
        finally:
            self.generating -= generated

    def _simple(self, simple: SimpleCommand) -> None:
        for word in simple.words:
            self._subs(word.subs)
        stdin: Stdin = "pipe" if simple.piped_in else "none"
        stdin_text, stdin_file = "", None
        for op, target in simple.redirects:
            self._subs(op.subs + (target.subs if target is not None else ()))
            if op.heredoc is not None:
                stdin, stdin_text = "text", op.heredoc
            elif op.text == "<<<":
                stdin, stdin_text = "text", target.text if target is not None else ""
            elif op.text == "<" and target is not None and op.fd in ("", "0"):
                stdin, stdin_file = "file", target
            self._redirect(op, target)
        words = simple.words
        while words and ASSIGNMENT.match(words[0].text):
            self.assign(words[0])
            words = words[1:]
        if not words:
            return
        name = normalise(words[0].text)
        if simple.function is not None and name == simple.function:
            self.add("high", f"the function {name} calls itself (a fork bomb)")
        call = Call(name, list(words[1:]), stdin, stdin_text, stdin_file, simple.upstream)
        self.run(words, call)

    def _subs(self, subs: Sequence[str]) -> None:
        for body in subs:
            self.line(body, at_least="it runs a command substitution")

    def _redirect(self, op: Op, target: Word | None) -> None:
        if target is None or op.text in ("<<", "<<-", "<<<"):
            return
        if op.text in (">&", "<&") and (target.text.isdigit() or target.text == "-"):
            return  # 2>&1 duplicates a descriptor and names no file
        self.judge(target, "read" if op.text == "<" else "write")

    def assign(self, word: Word) -> None:
        """A ``NAME=value`` word: dangerous names are high; literal values are remembered."""
        match = ASSIGNMENT.match(word.text)
        if match is None:
            return
        name, value = match.groups()  # its substitutions were classified with its command
        if name in DANGEROUS_VARS:
            self.add("high", f"setting {name} changes which programs or code later commands run")
        changes(self, name)
        if name in PROXY_VARIABLES:
            self.add("medium", f"setting {name} sends network traffic elsewhere")
            for contact in contacts("", [Word(value)]):
                self.contact(*contact)
        if not word.expands:
            self.paths.remember(name, value)
        if "/" in value or value.startswith("~"):
            self.judge(Word(value, word.expands, word.glob, word.quoted), "name")

    def name_variable(self, word: Word) -> None:
        """A word naming a variable a builtin sets, removes or hides (``export -n NAME``)."""
        name_word(self, word, setting=False)

    def run(self, words: Sequence[Word], call: Call) -> None:
        """Rate the command ``words`` (``words[0]`` is the command itself)."""
        head, name = words[0], call.name
        if head.expands or head.subs:
            self.add("high", f"the command name {shown(head.text)} is only known when it runs")
            return
        if head.glob:
            self.add(
                "high", f"the command name {shown(head.text)} is a pattern matched at run time"
            )
            return
        if not name:
            return
        if "/" in head.text:  # ./ls is whatever file is there, not necessarily ls
            system = _SYSTEM_BIN.match(os.path.normpath(head.text))
            self.judge(head, "name" if system else "run")
            if not system and self.sandboxed and self.paths.inside(head):
                self.judge_args(call.args, "read")  # a program of the workspace, sandboxed
                return
        if name in NETWORK:
            network_call(self, call)
        if name in HIGH:
            reason = HIGH[name]
            self.add("high", reason if reason.startswith(name) else f"{name} {reason}")
        if option := _code_option(name, call.args):
            self.add("high", f"{name} {option} runs another program or code")
        if name in WRAPPERS:
            if name in MEDIUM:
                self.add("medium", f"{name} {MEDIUM[name]}")
            self._unwrap(name, call)
        elif name not in HIGH and name not in LOOKS_INSIDE and self._allowed(call):
            self.judge_args(call.args, "read")
        elif name in ALL_RULES:
            ALL_RULES[name](self, call)
        elif name in self.functions and name not in HIGH:
            return  # its body was classified where it was defined
        else:
            self.rate(call)

    def rate(self, call: Call, use: Use | None = None) -> None:
        """The default rating: the tables for the name, then every argument judged."""
        name = call.name
        if name in MEDIUM:
            self.add("medium", f"{name} {MEDIUM[name]}")
        elif name not in LOW and name not in HIGH:
            self.add("medium", f"{name} is not a command PinClaw knows")
        if use is None:
            use = "write" if name in HIGH else "name" if name in NAMES_ONLY else "read"
        self.judge_args(call.args, use)

    def _allowed(self, call: Call) -> bool:
        words = (call.name, *(word.text for word in call.args))
        return any(words[: len(entry)] == entry for entry in self.allowlist)

    def _unwrap(self, name: str, call: Call) -> None:
        """Skip a wrapper's own options and rate the command it runs."""
        value_options, positionals = WRAPPERS[name]
        args = list(call.args)
        if name in ("strace", "ltrace") and attaches(args):
            self.add("high", f"{name} attaches to a running process and can read its memory")
        while args:
            text = args[0].text
            if text == "--":
                args.pop(0)
                break
            if name == "env" and text in ("-S", "--split-string") and len(args) > 1:
                self.line(args[1].text, at_least="env -S runs a command line")
                args = args[2:]
            elif name == "env" and ASSIGNMENT.match(text):
                self.assign(args.pop(0))
            elif name == "command" and text in ("-v", "-V"):
                return  # only looks the name up
            elif (name, text) in _CLEARS or (name == "exec" and text[:1] == "-" and "c" in text):
                self.add("medium", f"{name} {text} drops the variables that keep settings off")
                args.pop(0)
            elif name == "env" and text in ("-u", "--unset") and len(args) > 1:
                name_word(self, args[1], setting=False)
                args = args[2:]
            elif name == "env" and text.startswith(("--unset=", "-u")) and len(text) > 2:
                name_word(self, Word(text.partition("=")[2] or text[2:]), setting=False)
                args.pop(0)
            elif text.startswith("-") and len(text) > 1:
                args.pop(0)
                if text in value_options and args:
                    self.judge(args.pop(0), "read")
            else:
                break
        for _ in range(positionals):
            if args:
                self.judge(args.pop(0), "read")
        if args:
            self.run(args, call.but(name=normalise(args[0].text), args=args[1:]))


def _code_option(name: str, args: Sequence[Word]) -> str:
    """The option (if any) that makes ``name`` run another program: ``tar --to-command``."""
    options = RUNS_CODE_OPTIONS.get(name, frozenset())
    for word in args:
        option = word.text.split("=", 1)[0]
        if option in options or ("+" in options and option[:1] == "+" and len(option) > 1):
            return option
    return ""
