"""Rules for commands whose risk depends on their arguments: files, processes, system.

Each rule gets the ``Walker`` (to record findings, judge paths and classify
nested code) and the ``Call``. Commands without a rule are rated from the
tables in ``shell.tables``; rules for commands that run other code live in
``shell.code_rules``, for git and package managers in ``shell.git``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from bot.security.shell.lexer import Word
from bot.security.shell.tables import ASSIGNMENT, INTERPRETERS, SHELLS

if TYPE_CHECKING:
    from bot.security.shell.call import Call, Walker
    from bot.security.shell.paths import Use

Rule = Callable[["Walker", "Call"], None]
RULES: dict[str, Rule] = {}
LOOKS_INSIDE = frozenset(
    {
        *SHELLS,
        *INTERPRETERS,
        *("rm", "dd", "find", "xargs", "sed", "awk", "eval", "source", ".", "trap", "watch"),
        *("su", "git", "nc", "netcat", "socat", "ssh", "docker", "podman", "systemctl"),
        *("service", "crontab", "alias", "export", "declare", "typeset", "readonly", "local"),
    }
)
"""Commands an allowlist entry cannot lower: their arguments decide what they do."""

_OUTPUTS: dict[str, frozenset[str]] = {
    "curl": frozenset({"-o", "--output", "-c", "--cookie-jar", "-D", "--dump-header"}),
    "wget": frozenset({"-O", "--output-document", "-o", "--output-file", "-P"}),
    "sort": frozenset({"-o", "--output"}),
    "tar": frozenset({"-C", "--directory"}),
    "unzip": frozenset({"-d"}),
    "patch": frozenset({"-o", "--output"}),
    **dict.fromkeys(("gcc", "cc", "g++", "clang"), frozenset({"-o"})),
    **dict.fromkeys(("cp", "mv", "install", "ln"), frozenset({"-t", "--target-directory"})),
}
_LAST_IS_TARGET = frozenset({"cp", "mv", "install", "ln", "rsync", "scp"})
_ALL_TARGETS: dict[str, Use] = {
    **dict.fromkeys(("touch", "mkdir", "truncate", "mkfifo", "tee"), "write"),
    **dict.fromkeys(("chmod", "chown", "chgrp", "chattr", "setfacl"), "write"),
    **dict.fromkeys(("rmdir", "unlink", "shred"), "delete"),
}


def rule(*names: str) -> Callable[[Rule], Rule]:
    """Register a rule for the command ``names``."""

    def register(func: Rule) -> Rule:
        RULES.update(dict.fromkeys(names, func))
        return func

    return register


def positional(args: Sequence[Word], value_options: Collection[str] = ()) -> list[Word]:
    """The arguments that are neither options nor option values."""
    found: list[Word] = []
    words = iter(args)
    for word in words:
        if word.text == "--":
            found.extend(words)
        elif word.text.startswith("-") and len(word.text) > 1:
            if word.text in value_options:
                next(words, None)
        else:
            found.append(word)
    return found


def short_flags(args: Sequence[Word]) -> str:
    """The letters of every single-dash option cluster (``-rf -v`` gives ``rfv``)."""
    flags = [w.text[1:] for w in args if w.text.startswith("-") and not w.text.startswith("--")]
    return "".join(flags)


@rule("rm")
def _rm(w: Walker, call: Call) -> None:
    targets = positional(call.args)
    flags = short_flags(call.args)
    if "r" in flags or "R" in flags or any(a.text == "--recursive" for a in call.args):
        shown = " ".join(a.text for a in call.args if a.text.startswith("-"))
        w.add("high", f"`rm {shown}` deletes recursively")
    if any(t.glob for t in targets):
        w.add("high", "rm deletes everything a pattern matches")
    if w.generating or any(t.expands for t in targets):
        w.add("high", "rm deletes files whose names are only known when it runs")
    w.add("medium", "rm deletes files")
    for target in targets:
        w.judge(target, "delete")


@rule(*_OUTPUTS, *_LAST_IS_TARGET, *_ALL_TARGETS)
def _files(w: Walker, call: Call) -> None:
    outputs = _OUTPUTS.get(call.name, frozenset())
    rest: list[Word] = []
    written: list[Word] = []
    words = iter(call.args)
    for word in words:
        option, eq, value = word.text.partition("=")
        attached = [o for o in outputs if len(o) == 2 and word.text.startswith(o)]
        if word.text in outputs:
            written.extend(w for w in [next(words, None)] if w is not None)
        elif eq and option in outputs:
            written.append(Word(value, word.expands, word.glob, word.quoted))
        elif attached and len(word.text) > 2 and not word.text.startswith("--"):
            written.append(Word(word.text[2:], word.expands, word.glob, word.quoted))
        else:
            rest.append(word)
    targets = positional(rest)
    if call.name == "tee" and not targets:
        return
    into_folder = any(a.text.startswith(("-t", "--target-directory")) for a in call.args)
    if call.name in _LAST_IS_TARGET and not into_folder and len(targets) > 1:
        written.append(targets[-1])
        rest.remove(targets[-1])
    w.rate(call.but(args=rest), _ALL_TARGETS.get(call.name))
    for word in written:
        w.judge(word, "write")


@rule("dd")
def _dd(w: Walker, call: Call) -> None:
    for word in call.args:
        key, eq, value = word.text.partition("=")
        if eq and key in ("if", "of"):
            path = Word(value, word.expands, word.glob, word.quoted)
            w.judge(path, "write" if key == "of" else "read")


@rule("ps")
def _ps(w: Walker, call: Call) -> None:
    """``ps e`` (BSD style, no dash) adds every process's environment: its secrets."""
    values = {"-C", "-G", "-g", "-O", "-o", "-p", "-q", "-s", "-t", "-U", "-u", "--format"}
    values |= {"--pid", "--ppid", "--sort", "-k", "o", "O", "p", "q", "t", "U", "k"}
    words = iter(call.args)
    for word in words:
        text = word.text
        if text in values:
            next(words, None)
        elif not text.startswith("-") and text.isalpha() and "e" in text:
            w.findings.forbidden.append(
                f"ps {text} shows other processes' environment variables, where secrets live"
            )
            return
    w.rate(call, "name")


def attaches(args: Sequence[Word]) -> bool:
    """Whether a debugger or tracer is told to attach to a running process."""
    return any(a.text in ("-p", "--pid", "attach") or a.text.startswith("--pid=") for a in args)


@rule("gdb", "gcore")
def _debugger(w: Walker, call: Call) -> None:
    if call.name == "gcore" or attaches(call.args):
        w.add("high", f"{call.name} attaches to a running process and can read its memory")
    w.add("medium", f"{call.name} runs and controls programs")
    w.judge_args(call.args, "read")


@rule("gpio", "raspi-gpio", "pinctrl")
def _pins(w: Walker, call: Call) -> None:
    """Pin tools: reading pins is low; setting them operates devices (the GPIO tools ask)."""
    reads = {"readall", "read", "get", "funcs", "help", "-v", "-h", "--help", "wfi", "lev"}
    words = [a.text for a in positional(call.args)]
    if words and words[0] not in reads:
        w.add("medium", f"{call.name} {words[0]} operates GPIO pins")
    elif not words and call.name == "raspi-gpio":
        w.add("medium", "raspi-gpio without a command prints help or changes pins")


@rule("kill", "pkill", "killall")
def _kill(w: Walker, call: Call) -> None:
    w.add("medium", f"{call.name} stops processes")
    if call.name == "kill" and any(a.text == "-1" for a in call.args[1:]):
        w.add("high", "kill -1 signals every process it can reach")


@rule("nc", "netcat", "socat", "ssh")
def _network(w: Walker, call: Call) -> None:
    if any(_runs_program(call.name, a.text) for a in call.args):
        w.add("high", f"{call.name} is told to run a program for the connection")
    w.add("medium", f"{call.name} opens a network connection")
    w.judge_args(call.args, "read")


def _runs_program(name: str, text: str) -> bool:
    """Whether one argument makes nc, socat or ssh run a local program."""
    if name == "socat":
        return bool(re.search(r"(exec|system):", text, re.IGNORECASE))
    if name == "ssh":
        return bool(re.search(r"(proxy|local)command", text, re.IGNORECASE))
    if text in ("--exec", "--sh-exec", "--lua-exec"):
        return True
    return text.startswith("-") and not text.startswith("--") and bool(set(text) & set("ec"))


@rule("docker", "podman")
def _containers(w: Walker, call: Call) -> None:
    words = [a.text for a in positional(call.args, {"-H", "--host", "--context", "-c"})]
    reads = {"ps", "images", "version", "info", "logs", "inspect", "stats", "top", "port"}
    if words and (words[0] in reads or (words[:1] == ["compose"] and words[1:2] == ["ps"])):
        return
    sub = words[0] if words else ""
    w.add("high", f"{call.name} {sub} can reach the whole machine (mounts, privileges)")


@rule("systemctl", "service", "crontab")
def _services(w: Walker, call: Call) -> None:
    words = [a.text for a in positional(call.args)]
    texts = {a.text for a in call.args}
    reads = {"status", "show", "cat", "list-units", "list-unit-files", "list-timers"}
    reads |= {"is-active", "is-enabled", "is-failed", "get-default", "help"}
    if call.name == "systemctl" and (not words or words[0] in reads):
        return
    if call.name == "service" and ("--status-all" in texts or words[1:2] == ["status"]):
        return
    if call.name == "crontab" and "-l" in texts:
        return
    what = "scheduled jobs" if call.name == "crontab" else "system services"
    w.add("high", f"{call.name} changes {what}")


@rule("ip", "hostname", "date")
def _settings(w: Walker, call: Call) -> None:
    texts = [a.text for a in call.args]
    changes = {
        "ip": any(
            t in ("add", "del", "delete", "set", "flush", "change", "replace") for t in texts
        ),
        "hostname": bool(positional(call.args)) or "-F" in texts or "--file" in texts,
        "date": any(t in ("-s", "--set") or t.startswith("--set=") for t in texts),
    }[call.name]
    if changes:
        what = {"ip": "network settings", "hostname": "the machine's name", "date": "the clock"}
        w.add("high", f"{call.name} changes {what[call.name]}")
    w.rate(call, "name")


@rule("alias")
def _alias(w: Walker, call: Call) -> None:
    if any("=" in a.text for a in call.args):
        w.add("high", "alias changes what later commands mean")


@rule("cd", "pushd")
def _cd(w: Walker, call: Call) -> None:
    words = positional(call.args)
    if words:
        w.judge(words[0], "read")
    w.change_directory(words[0] if words else None)


@rule("export", "declare", "typeset", "readonly", "local")
def _export(w: Walker, call: Call) -> None:
    nameref = "n" in short_flags(call.args) and call.name != "export"
    for word in call.args:
        if match := ASSIGNMENT.match(word.text):
            w.assign(word)
            if nameref:  # declare -n NAME=TARGET: assigning NAME assigns TARGET
                w.name_variable(Word(match[2], word.expands, word.glob, word.quoted))
        elif not word.text.startswith(("-", "+")) or word.expands:
            w.name_variable(word)  # exported, hidden or unset: GIT_PAGER, $name
