"""What a repository's settings make a git command run, rated for the shell classifier.

An unasked git command runs with ``shell.neutral``'s environment, which
switches off what git lets the command line override: hooks, fsmonitor,
pagers, editors, gpg, every transport. The rest the repository names freely
(``diff.external``, ``diff.<driver>.textconv`` and ``.command``,
``filter.<driver>.clean``/``smudge``/``process``, an alias, ``man.*`` and
``browser.*`` for ``git help``): no override reaches those, so a git command
in a repository whose settings name one (its own, an included file's or a
nested repository's) runs that program, and asks. Files and folders git reads
beyond the line (a ``.git`` file's target, includes, ``core.worktree``,
alternates, ``blame.ignoreRevsFile`` and other paths in settings) are judged
like paths on the line. What the environment switches off is still named when
the line asks anyway: an approved command runs with the settings as they are.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bot.security.shell.git_repository import Repository, Unreadable, read_repository, setting_path
from bot.security.shell.lexer import Word

if TYPE_CHECKING:
    from bot.security.shell.call import Walker

_RUNS = re.compile(
    r"^(diff\.external|diff\..+\.(textconv|command)|filter\..+\.(clean|smudge|process))$"
)
"""Settings naming a program git runs while reading, which no override switches off."""
_HELP = re.compile(
    r"^(man\.viewer|man\..+\.(cmd|path)|(web|help)\.browser|browser\..+\.(cmd|path))$"
)
"""Settings naming the program ``git help`` (and ``git CMD --help``) shows pages with."""
_SWITCHED_OFF = re.compile(
    r"^(core\.(fsmonitor|pager|editor|askpass|sshcommand|gitproxy|hookspath)|sequence\.editor"
    r"|pager\..+|credential\.(.+\.)?helper|gpg\.((openpgp|x509|ssh)\.)?program"
    r"|gpg\.ssh\.defaultkeycommand|remote\..+\.(uploadpack|receivepack|vcs))$"
)
"""Settings naming programs that the environment of an unasked command switches off."""
_WHEN_ASKED = re.compile(
    r"^(merge\..+\.driver|(diff|merge)tool\..+\.(cmd|path)|tar\..+\.command"
    r"|interactive\.difffilter|sendemail\.(sendmailcmd|tocmd|cccmd))$"
)
"""Settings naming programs only commands that ask anyway run (merge, difftool, archive)."""
_PATHS = frozenset(
    {"core.excludesfile", "core.attributesfile", "blame.ignorerevsfile", "mailmap.file"}
    | {"diff.orderfile", "commit.template", "gpg.ssh.allowedsignersfile"}
    | {"gpg.ssh.revocationfile"}
)
"""Settings naming a file git reads (``git blame`` prints a bad line of ignoreRevsFile)."""
_LFS = frozenset(
    {"git-lfs clean -- %f", "git-lfs smudge -- %f", "git-lfs filter-process"}
    | {"git-lfs smudge --skip -- %f", "git-lfs filter-process --skip"}
)
"""What ``git lfs install`` writes: the installed git-lfs, not a program of the workspace."""
_NAMING = (_RUNS, _HELP, _SWITCHED_OFF, _WHEN_ASKED)
_OFF = frozenset({"false", "no", "off", "0", ""})
_SHOWN = 3


def judge_repository(w: Walker, options: Sequence[Word], sub: str, rest: Sequence[Word]) -> None:
    """Rate a git command (``options`` before ``sub``) by what its repository's settings run."""
    where = _location(w, options)
    if where is None:
        w.add("medium", "git runs in a folder only known when it runs, so its settings are unknown")
        return
    folder, git_dir, work_tree, bare = where
    try:
        repo = read_repository(folder, home=w.home, git_dir=git_dir, work_tree=work_tree, bare=bare)
    except Unreadable as exc:
        w.add("medium", f"{exc}, so what git would run is unknown")
        return
    if repo is None:
        return
    helping = sub == "help" or any(word.text == "--help" for word in rest)
    runs: list[str] = []
    quiet: list[str] = []
    for each in repo.every():
        for place in each.places:
            w.judge(Word(str(place)), "read")
        for path in _paths(each, w.home):
            w.judge(Word(str(path)), "read")
        for key, value in _programs(each):
            if _RUNS.match(key) or key == f"alias.{sub.lower()}" or (helping and _HELP.match(key)):
                if not (key.startswith("filter.lfs.") and value in _LFS):
                    runs.append(key)
            else:
                quiet.append(key)
        quiet.extend(f"the {name} hook" for name in each.hooks)
    if runs:
        w.add("medium", "the repository's settings make git run a program: " + _listed(runs))
    if quiet:
        w.note("once allowed, git also runs what the repository's settings name: " + _listed(quiet))


def _listed(names: list[str]) -> str:
    unique = list(dict.fromkeys(names))
    more = f" and {len(unique) - _SHOWN} more" if len(unique) > _SHOWN else ""
    return ", ".join(unique[:_SHOWN]) + more


def _programs(repo: Repository) -> Iterator[tuple[str, str]]:
    """The settings of ``repo`` that name a program, with their values."""
    for key, value, _ in repo.settings:
        text = "" if value is None else value
        if key == "core.fsmonitor" and text.lower() in _OFF:
            continue
        alias = key.startswith("alias.") and key.count(".") == 1
        command = key.startswith("submodule.") and text.startswith("!")  # update = !cmd
        if alias or command or any(p.match(key) for p in _NAMING):
            yield key, text


def _paths(repo: Repository, home: Path) -> Iterator[Path]:
    """The files the settings of ``repo`` name for git to read."""
    base = repo.top if repo.top is not None else repo.git_dir
    for key, value, _ in repo.settings:
        if key in _PATHS and value and "%(" not in value:
            yield setting_path(value, base, home)


def _location(
    w: Walker, options: Sequence[Word]
) -> tuple[Path, Path | None, Path | None, bool] | None:
    """Where git looks (folder after ``-C``, ``--git-dir``, ``--work-tree``, ``--bare``);
    None when a value is only known at run time."""
    folder = w.folder()
    if folder is None:
        return None
    given: dict[str, str] = {}
    bare = False
    words = iter(options)
    for option in words:
        name, eq, value = option.text.partition("=")
        word: Word | None = option
        if option.text in ("-C", "--git-dir", "--work-tree"):
            word = next(words, None)
            value = "" if word is None else word.text
        elif not (eq and name in ("--git-dir", "--work-tree")):
            bare = bare or option.text == "--bare"
            continue
        if word is None:
            break
        if word.expands or word.glob or word.subs:
            return None
        if value == "~" or value.startswith("~/"):
            value = str(w.home) + value[1:]
        if name == "-C":
            folder = Path(os.path.normpath(folder / value)) if value else folder
        else:
            given[name] = value
    git_dir, work_tree = given.get("--git-dir"), given.get("--work-tree")
    return (
        folder,
        None if git_dir is None else Path(os.path.normpath(folder / git_dir)),
        None if work_tree is None else Path(os.path.normpath(folder / work_tree)),
        bare,
    )
