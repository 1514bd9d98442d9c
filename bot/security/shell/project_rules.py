"""Commands that read the project's settings or code from the folder they run in.

A tool that takes its settings from the current folder (or its parents) runs
what those settings name; the files can come with an unpacked archive or a
clone. Where no variable switches that off (``shell.neutral`` covers git,
pagers, ``less`` and go's toolchain), the command asks when it would read
such settings:

- cargo: rustup runs the toolchain ``rust-toolchain.toml`` names (even for
  ``cargo --version``), ``.cargo/config.toml`` names wrappers and runners,
  and builds run build scripts: every cargo command asks;
- bundle evaluates the Gemfile (Ruby), composer loads the project's plugins
  (PHP), poetry and uv run the project's virtual environment's Python: they
  ask but for ``--version`` and ``--help``;
- npm, yarn, pnpm and bun ask in a project with its own ``.npmrc``,
  ``.yarnrc(.yml)``, ``.pnpmfile.cjs`` or ``bunfig.toml`` (they can name a
  shell, a git, a yarn to run), or a ``packageManager`` for corepack;
- ack asks under a project ``.ackrc``;
- ``python -m pip`` puts the current folder first on the module path: it
  asks where that folder holds Python code that could take a module's place;
- ``go env -w`` changes go's settings for later commands: it asks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from bot.security.shell.rules import positional, rule

if TYPE_CHECKING:
    from bot.security.shell.call import Call, Walker

_ALWAYS = {
    "cargo": "cargo runs programs the project names (rust-toolchain.toml, .cargo/config.toml, "
    "build scripts)",
    "bundle": "bundle runs the project's Gemfile, which is Ruby code",
    "composer": "composer loads the project's plugins, which are PHP code",
    "poetry": "poetry runs the Python of the project's virtual environment",
    "uv": "uv runs the Python of the project's virtual environment",
}
_ONLY_ASKING = frozenset({"--version", "-V", "--help", "-h", "help"})
_JS = frozenset({"npm", "yarn", "pnpm", "bun"})
_JS_SETTINGS = (".npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs", ".pnpmfile.mjs", "bunfig.toml")
_PYTHON_CODE = (".py", ".pyc", ".so")
_UNKNOWN = "settings (in a folder only known when it runs)"
MAX_PACKAGE_JSON = 1 << 20
MAX_FOLDER_ENTRIES = 4096


def project_settings(w: Walker, call: Call) -> None:
    """A package manager in a folder whose settings or code it would run."""
    name, args = call.name, call.args
    only_asking = len(args) == 1 and args[0].text in _ONLY_ASKING and name != "cargo"
    if name in _ALWAYS and not only_asking:  # rustup reads rust-toolchain.toml for --version too
        w.add("medium", _ALWAYS[name])
    elif name == "go" and [a.text for a in positional(args)][:1] == ["env"]:
        if any(a.text in ("-w", "-u") for a in args):
            w.add("medium", "go env -w changes go's settings for every later go command")
    elif name in _JS:
        folder = w.folder()
        found = _UNKNOWN if folder is None else _js_settings(w, folder, name)
        if found:
            w.add("medium", f"{name} reads the project's {found}, which can make it run programs")


def _js_settings(w: Walker, folder: Path, name: str) -> str:
    for place in _ancestors(w, folder):
        for file in _JS_SETTINGS:
            if os.path.lexists(place / file):
                return file
        if name in ("yarn", "pnpm") and _corepack(place / "package.json"):
            return "package.json packageManager (corepack fetches and runs it)"
    return ""


def _corepack(path: Path) -> bool:
    try:
        if os.stat(path).st_size > MAX_PACKAGE_JSON:
            return True
        with open(path, "rb") as file:
            data = json.loads(file.read(MAX_PACKAGE_JSON))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "packageManager" in data


def _ancestors(w: Walker, folder: Path) -> list[Path]:
    """``folder`` and its parents inside the workspace (above it, settings are the owner's)."""
    return [place for place in (folder, *folder.parents) if w.inside(place)]


@rule("ack")
def _ack(w: Walker, call: Call) -> None:
    folder = w.folder()
    if folder is None or any(os.path.lexists(p / ".ackrc") for p in _ancestors(w, folder)):
        w.add("medium", "ack reads the project's .ackrc, whose options can make it run programs")
    w.rate(call)


def module_shadowing(w: Walker, module: str) -> None:
    """``python -m MODULE``: the current folder comes first on the module path."""
    folder = w.folder()
    found = "" if folder is None else _python_code(folder)
    if folder is None or found:
        where = "this folder holds " + found if found else "that folder is only known when it runs"
        w.add(
            "medium",
            f"python -m {module} looks for modules in the current folder first, and {where}",
        )


def _python_code(folder: Path) -> str:
    """A file or package in ``folder`` Python could import instead of another module."""
    try:
        with os.scandir(folder) as entries:
            for count, entry in enumerate(entries):
                if count > MAX_FOLDER_ENTRIES:
                    return "too many files to check"
                if entry.name.endswith(_PYTHON_CODE):
                    return entry.name
                if entry.is_dir() and any(
                    os.path.lexists(os.path.join(entry.path, f"__init__{suffix}"))
                    for suffix in _PYTHON_CODE
                ):
                    return entry.name + "/"
    except OSError:
        return ""
    return ""
