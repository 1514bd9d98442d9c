"""The environment of a command that runs unasked: settings that would run programs, off.

A program that reads its settings from the folder it runs in runs what they
name: git its hooks, fsmonitor, pager, gpg or ssh program, less its LESSOPEN
preprocessor. Such files reach the workspace through an unpacked archive, a
clone or one approved write, so a command rated low (run without a person)
gets ``neutralised``'s environment: git reads no system or global settings
and gets ``GIT_CONFIG_COUNT`` overrides, which rank like ``git -c`` above the
repository's own settings (checked against git 2.39); transports are off, so
a partial clone's lazy fetch cannot run ``remote.*.uploadpack`` or ssh;
pagers are ``cat``; ``less`` runs with ``LESSSECURE``; go uses only the local
toolchain; no PATH entry lies in the workspace. What cannot be switched off
by name (a diff driver's textconv, a filter, an alias) makes the command ask
(``shell.git_settings``); a line that changes these variables asks too
(``PROTECTED``). A command a person approved runs with the settings as they
are: the approval request named what they run.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path

GIT_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),  # no hook at all: not .git/hooks, not the repository's
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("core.editor", "false"),
    ("sequence.editor", "false"),
    ("core.askPass", ""),
    ("core.sshCommand", "ssh"),
    ("credential.helper", ""),  # an empty value empties the list of helpers
    ("gpg.program", "false"),  # no signature is checked: git log shows none
    ("gpg.openpgp.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.program", "false"),
    ("log.showSignature", "false"),
    ("safe.bareRepository", "explicit"),  # no folder in the workspace posing as a repository
    ("protocol.allow", "never"),  # and each protocol, which the repository could allow again
    *((f"protocol.{name}.allow", "never") for name in ("file", "git", "ssh", "http", "https")),
    ("protocol.ext.allow", "never"),
)
"""git settings for an unasked command, each overriding the repository's own."""

VARIABLES: dict[str, str] = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_PAGER": "cat",
    "GIT_EDITOR": "false",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PROXY_COMMAND": "",  # set, so core.gitProxy is not read
    "GIT_PROTOCOL_FROM_USER": "0",
    "GIT_NO_LAZY_FETCH": "1",  # newer git and its 2024 fixes (2.39.4); else protocol.allow
    "PAGER": "cat",
    "MANPAGER": "cat",
    "SYSTEMD_PAGER": "cat",
    "LESSSECURE": "1",  # no LESSOPEN, lesskey file, shell escape or editor
    "GOTOOLCHAIN": "local",  # no toolchain that go.mod names is fetched and run
}
"""Variables an unasked command gets (the git overrides are added to them)."""

_DROPPED = frozenset({"SSH_ASKPASS", "LESSOPEN", "LESSCLOSE", "LESSKEY", "LESSKEYIN"})

PROTECTED_PREFIXES = ("GIT_", "LESS", "XDG_")
PROTECTED = frozenset(
    {*VARIABLES, "HOME", "CDPATH", "GOFLAGS", "GOENV", "CC", "CXX", "BROWSER", "MANOPT"}
    | {"RUSTUP_TOOLCHAIN", "CARGO_HOME", "RUSTC_WRAPPER"}
)
"""Variables a line may not set, unset or rename unasked: they decide which settings
programs read (``HOME``, ``XDG_CONFIG_HOME``, every ``GIT_*``), or what they run."""


def protected(name: str) -> bool:
    """Whether setting or removing the variable ``name`` asks first."""
    return name in PROTECTED or name.startswith(PROTECTED_PREFIXES)


def git_variables() -> dict[str, str]:
    """``GIT_OVERRIDES`` as the variables git reads them from."""
    found = {"GIT_CONFIG_COUNT": str(len(GIT_OVERRIDES))}
    for index, (key, value) in enumerate(GIT_OVERRIDES):
        found[f"GIT_CONFIG_KEY_{index}"] = key
        found[f"GIT_CONFIG_VALUE_{index}"] = value
    return found


def neutralised(env: Mapping[str, str], roots: Collection[Path]) -> dict[str, str]:
    """``env`` for a command that runs unasked: git's and other programs' settings that
    would run programs switched off, and no PATH entry that is relative or in ``roots``
    (the workspace and extra roots), where a file could pose as a command."""
    kept = {
        name: value
        for name, value in env.items()
        if not name.startswith("GIT_") and name not in _DROPPED
    }
    kept.update(VARIABLES)
    kept.update(git_variables())
    if "PATH" in kept:
        kept["PATH"] = os.pathsep.join(
            entry for entry in kept["PATH"].split(os.pathsep) if _system_folder(entry, roots)
        )
    return kept


def _system_folder(entry: str, roots: Collection[Path]) -> bool:
    if not os.path.isabs(entry):
        return False
    real = os.path.realpath(entry)
    for root in roots:
        top = os.path.realpath(root)
        if real == top or real.startswith(top.rstrip("/") + "/"):
            return False
    return True
