"""Rules for git and package managers: what reads, what writes, what reaches the network.

git reads of the repository are low, unless the repository's settings name a
program no override switches off (``shell.git_settings``); verbs that talk to a
remote need approval (and their URLs are judged like any host); ``git config`` outside the
repository's own settings reads or writes ``~/.gitconfig``, where credentials
and tokens live, and is refused. Package managers: offline listing is low;
anything that talks to a registry, installs, or reads their settings (which
hold registry tokens) needs approval.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.security.shell.git_settings import judge_repository
from bot.security.shell.lexer import Word
from bot.security.shell.network import contacts
from bot.security.shell.project_rules import project_settings
from bot.security.shell.rules import positional, rule, short_flags
from bot.security.shell.tables import (
    GIT_LIST_FLAGS,
    GIT_LISTS,
    GIT_READS,
    GIT_RUNS_PROGRAMS,
    PACKAGE_MANAGERS,
    PACKAGE_READS,
    words,
)

if TYPE_CHECKING:
    from bot.security.shell.call import Call, Walker

GIT_NETWORK = words(
    """
    clone fetch pull push ls-remote archive submodule request-pull send-email fetch-pack
    send-pack http-fetch http-push svn p4 lfs
    """
)
"""git verbs that talk to another machine."""

_CONFIG_SCOPE = frozenset({"--local", "--worktree", "-f", "--file", "--blob"})
_CONFIG_READ = frozenset(
    {"-l", "--list", "--get", "--get-all", "--get-regexp", "--get-urlmatch", "--show-origin"}
    | {"--show-scope", "get", "list"}
)
_NETWORK_READS = frozenset({"outdated", "audit", "ping", "view", "search", "index", "download"})
_OFFLINE_SEARCH = frozenset({"apt", "apt-get", "apt-cache", "aptitude"})
_JS_MANAGERS = frozenset({"npm", "yarn", "pnpm", "bun"})


@rule("git")
def _git(w: Walker, call: Call) -> None:
    args = list(call.args)
    while args and args[0].text.startswith("-"):
        option = args.pop(0)
        if option.text in ("-c", "--config-env") or option.text.startswith("--exec-path"):
            w.add("high", f"git {option.text} can make git run any program")
            if args:
                _contacts(w, [Word(args[0].text.partition("=")[2])])
        if option.text in ("-c", "--config-env", "-C", "--git-dir", "--work-tree") and args:
            w.judge(args.pop(0), "read")
        w.judge_args([option], "read")
    if not args:
        return
    sub, rest = args[0].text, args[1:]
    judge_repository(w, call.args[: len(call.args) - len(args)], sub, rest)  # what it runs
    texts = {a.text for a in rest}
    listing = not positional(rest) or bool(texts & GIT_LIST_FLAGS)
    runs = ("--upload-pack", "--receive-pack", "--exec", "ext::", "--open-files-in-pager")
    if any(t.startswith(runs) for t in texts) or (sub == "grep" and _pager(texts)):
        w.add("high", f"git {sub} is told to run a program")
    lists = sub in GIT_LISTS and (listing or texts & {"list", "show", "get-url"})
    remote_verbs = {"show", "update", "prune"}
    remote_show = sub == "remote" and bool(texts & remote_verbs) and "-n" not in texts
    if sub in GIT_NETWORK or remote_show or any(t.startswith("--remote") for t in texts):
        w.add("medium", f"git {sub} talks to another machine over the network")
        if sub == "push" and (texts & {"-f", "--force"} or any(t.startswith("+") for t in texts)):
            w.add("high", "git push --force rewrites the remote history")
        _contacts(w, rest)
    elif sub == "config":
        _git_config(w, rest)
    elif sub in ("credential", "credential-store", "credential-cache"):
        w.findings.forbidden.append(f"git {sub} reads or stores saved passwords and tokens")
    elif sub == "var" and texts & {"-l", "--list"}:
        w.findings.forbidden.append("git var -l shows every git setting, tokens included")
    elif sub in GIT_READS or lists:
        pass
    elif sub == "reset" and "--hard" in texts:
        w.add("high", "git reset --hard discards uncommitted changes")
    elif sub == "clean" and ("f" in short_flags(rest) or "--force" in texts):
        w.add("high", "git clean -f deletes untracked files")
    else:
        w.add("medium", f"git {sub} changes the repository")
    w.judge_args(rest, "read")


def _pager(texts: set[str]) -> bool:
    """``git grep -O``/``-Oless``: the files are opened with a program."""
    return any(t.startswith("-O") for t in texts)


def _git_config(w: Walker, rest: list[Word]) -> None:
    """Settings of this repository only; the global ones hold credentials."""
    texts = {a.text.partition("=")[0] for a in rest}
    keys = positional(rest, {"-f", "--file", "--blob", "--type", "--default"})
    reads = bool(texts & _CONFIG_READ) or len(keys) == 1
    if texts & {"--global", "--system"} or (reads and not texts & _CONFIG_SCOPE):
        w.findings.forbidden.append(
            "git config outside this repository's own settings reads or changes ~/.gitconfig, "
            "where credentials and tokens are kept"
        )
        return
    if keys and GIT_RUNS_PROGRAMS.match(keys[0].text):
        w.add("high", f"git config {keys[0].text} makes git run a program")
    if not reads:
        w.add("medium", "git config changes git settings")


def _contacts(w: Walker, args: list[Word]) -> None:
    for contact in contacts("git", args):
        w.contact(*contact)


@rule(*PACKAGE_MANAGERS)
def package_manager(w: Walker, call: Call) -> None:
    """pip, npm, apt and the like: offline listing is low; registries and installs ask."""
    project_settings(w, call)  # cargo, npm in a project with its own settings...
    found = positional(call.args)
    sub = found[0].text if found else call.args[0].text if call.args else "help"
    texts = {a.text.partition("=")[0] for a in call.args}
    registry = contacts(call.name, call.args)
    uses_network = (
        bool(registry)
        or (sub in _NETWORK_READS and not (sub == "search" and call.name in _OFFLINE_SEARCH))
        or (sub in ("info", "show") and call.name in _JS_MANAGERS)
        or bool(texts & {"--outdated", "-o", "--remote", "-r"})
    )
    if sub == "config":
        w.add("medium", f"{call.name} config reads or changes settings that hold registry tokens")
    elif sub == "version" and len(found) > 1:
        w.add("medium", f"{call.name} version changes the project's version")
    elif uses_network:
        w.add("medium", f"{call.name} {sub} talks to a package registry over the network")
    elif sub not in PACKAGE_READS:
        w.add("medium", f"{call.name} {sub} installs or runs packages, whose scripts run code")
    for contact in registry:
        w.contact(*contact)
    w.judge_args(call.args, "read")
