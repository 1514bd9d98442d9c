"""Reading commands never run code named by the workspace's settings (issue 26).

Each case builds a hostile repository or project in the workspace, as an
unpacked archive or a clone would leave it, whose settings name a program of
the workspace. That program writes a marker in the workspace (it ran), tries
to write one outside (``outside/pwned-NAME``) and prints the canary SSH key of
the fake home. The everyday command a person would run there (``git status``,
``git log -p``, ``npm ls``...) goes through the real policy gate and shell tool
at the default autonomy (``supervised``) with nobody to approve, with the
kernel sandbox and without it. Either it runs with the program switched off
(``shell.neutral``), or it is not run: "needs a person's approval".

A control runs each hostile setup with plain git and no switch, to show the
program really runs there.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.config.security import DEFAULT_FORBIDDEN_PATHS
from bot.core.conversation import ToolCall
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext, ToolResult
from bot.security.files.paths import PathGuard
from bot.security.gate import PolicyGate
from bot.security.shell.git_config_file import ConfigError
from bot.security.shell.git_config_file import parse_config as parse_git_config
from bot.security.shell.git_repository import read_repository
from bot.security.shell.neutral import GIT_OVERRIDES, git_variables, neutralised
from bot.security.shell.risk import classify
from tests.test_shell_gate import make_gate

MODES = ["required", "off"]
ASKS = "not run: shell needs a person's approval"
PLAIN_GIT = {"PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1"}


@dataclass
class World:
    home: Path
    data: Path
    workspace: Path
    outside: Path
    canary: str


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("workspace-code")
    home, outside = root / "home", root / "outside"
    data = home / ".pinclaw"
    workspace = data / "workspace"
    for folder in (workspace, outside, home / ".ssh"):
        folder.mkdir(parents=True)
    canary = f"CANARY{secrets.token_hex(12)}"
    (home / ".ssh" / "id_rsa").write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{canary}\n")
    (home / ".git-credentials").write_text(f"https://pinclaw:{canary}@github.com\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        yield World(home, data, workspace, outside, canary)


@pytest.fixture(scope="module", params=MODES, ids=["sandbox", "no-sandbox"])
def gate(request: pytest.FixtureRequest, world: World) -> PolicyGate:
    return make_gate(world, request.param)


async def shell(gate: PolicyGate, folder: Path, command: str) -> ToolResult:
    ctx = ToolContext(SessionKey("test", "probe"), folder, ZoneInfo("UTC"))
    return await gate.execute(ToolCall("probe", "shell", {"command": command}), ctx)


# --- hostile workspaces ----------------------------------------------------------------


@dataclass
class Place:
    """A hostile folder in the workspace: its repository, its program, its markers."""

    world: World
    folder: Path
    name: str

    @property
    def program(self) -> Path:
        return self.folder / "tools" / "evil.sh"

    @property
    def ran(self) -> Path:
        return self.folder / f"RAN-{self.name}"

    @property
    def pwned(self) -> Path:
        return self.world.outside / f"pwned-{self.name}"

    def git(self, *args: str, cwd: Path | None = None) -> None:
        author = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
        env = {**PLAIN_GIT, "HOME": str(self.world.outside)}
        subprocess.run(["git", *author, *args], cwd=cwd or self.folder, env=env, check=True)

    def config(self, *pairs: str, repo: Path | None = None) -> None:
        for pair in pairs:
            key, _, value = pair.partition("=")
            self.git("config", key, value.replace("EVIL", str(self.program)), cwd=repo)


def evil_program(path: Path, place: Place) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f"touch '{place.ran}'\n"
        f"touch '{place.pwned}' 2>/dev/null\n"
        f"cat '{place.world.home}/.ssh/id_rsa' 2>/dev/null\n"
        '[ -f "$1" ] && cat "$1"\n'
        "exit 0\n"
    )
    path.chmod(0o755)


def repository(world: World, name: str) -> Place:
    """A repository with one commit of a.txt, then a.txt changed (same size, later time)."""
    place = Place(world, world.workspace / name, name)
    place.folder.mkdir()
    evil_program(place.program, place)
    (place.folder / "a.txt").write_text("hello\n")
    place.git("init", "-q")
    place.git("add", "a.txt")
    place.git("commit", "-qm", "one")
    (place.folder / "a.txt").write_text("HELLO\n")  # same size: git must read the content
    later = os.stat(place.folder / "a.txt").st_mtime + 100
    os.utime(place.folder / "a.txt", (later, later))
    return place


def index_to_refresh(place: Place) -> None:
    """A tracked b.txt whose time changed but not its content: ``git status`` refreshes
    its entry and so always writes the index (whether a.txt's entry is racily clean
    depends on the second the commit fell in, which made the hook cases flaky)."""
    (place.folder / "b.txt").write_text("same\n")
    place.git("add", "b.txt")
    later = os.stat(place.folder / "b.txt").st_mtime + 200
    os.utime(place.folder / "b.txt", (later, later))


def hook(place: Place) -> None:
    index_to_refresh(place)
    hooks = place.folder / ".git" / "hooks"
    evil_program(hooks / "post-index-change", place)  # git status writes the index


def hooks_path(place: Place) -> None:
    index_to_refresh(place)
    evil_program(place.folder / "githooks" / "post-index-change", place)
    place.config("core.hooksPath=githooks")


def attributes(place: Place, line: str) -> None:
    (place.folder / ".gitattributes").write_text(line + "\n")


def textconv(place: Place) -> None:
    attributes(place, "*.txt diff=x")
    place.config("diff.x.textconv=EVIL")
    place.git("commit", "-qam", "two")


def filters(kind: str) -> Callable[[Place], None]:
    def setup(place: Place) -> None:
        attributes(place, "*.txt filter=x")
        place.config(f"filter.x.{kind}=EVIL")

    return setup


def diff_command(place: Place) -> None:
    attributes(place, "*.txt diff=x")
    place.config("diff.x.command=EVIL")


def signed(place: Place) -> None:
    """A commit with a signature to check, and settings that check it with the program."""
    text = subprocess.run(
        ["git", "cat-file", "commit", "HEAD"], cwd=place.folder, capture_output=True, check=True
    ).stdout.decode()
    head, _, body = text.partition("\n\n")
    signature = "gpgsig -----BEGIN PGP SIGNATURE-----\n \n wsBc\n -----END PGP SIGNATURE-----"
    data = f"{head}\n{signature}\n\n{body}".encode()
    made = subprocess.run(
        ["git", "hash-object", "-t", "commit", "-w", "--stdin"],
        cwd=place.folder,
        input=data,
        capture_output=True,
        check=True,
    )
    place.git("update-ref", "HEAD", made.stdout.decode().strip())
    place.config("log.showSignature=true", "gpg.program=EVIL")


def lazy_fetch(url: str, *settings: str) -> Callable[[Place], None]:
    """A partial clone missing a.txt's blob: reading it fetches from the promisor remote."""

    def setup(place: Place) -> None:
        blob = subprocess.run(
            ["git", "rev-parse", "HEAD:a.txt"], cwd=place.folder, capture_output=True, check=True
        ).stdout.decode()
        (place.folder / ".git" / "objects" / blob[:2] / blob[2:].strip()).unlink()
        place.config(
            "core.repositoryformatversion=1",
            "extensions.partialClone=origin",
            f"remote.origin.url={url}",
            "remote.origin.promisor=true",
            *settings,
        )

    return setup


def include(*settings: str) -> Callable[[Place], None]:
    def setup(place: Place) -> None:
        pairs = (setting.split("=", 1) for setting in settings)
        lines = [
            f"\t{k.split('.')[-1]} = {v.replace('EVIL', str(place.program))}" for k, v in pairs
        ]
        section = settings[0].split("=")[0].rsplit(".", 1)[0]
        head, _, sub = section.partition(".")
        header = f'[{head} "{sub}"]' if sub else f"[{head}]"
        (place.folder / "shared.cfg").write_text(header + "\n" + "\n".join(lines) + "\n")
        place.config("include.path=../shared.cfg")
        if "diff.x" in section:
            attributes(place, "*.txt diff=x")

    return setup


def gitfile(inside: bool, *settings: str) -> Callable[[Place], None]:
    """The work tree's .git is a file naming a repository elsewhere, with hostile settings."""

    def setup(place: Place) -> None:
        target = (place.folder / "elsewhere") if inside else place.world.outside / place.name
        target.parent.mkdir(parents=True, exist_ok=True)
        (place.folder / ".git").rename(target)
        (place.folder / ".git").write_text(f"gitdir: {target}\n")
        place.config(*settings)
        attributes(place, "*.txt diff=x")

    return setup


def worktree_outside(place: Place) -> None:
    place.config(f"core.worktree={place.world.home}")


def blame_ignore(place: Place) -> None:
    place.config(f"blame.ignoreRevsFile={place.world.home}/.git-credentials")


def submodule(*settings: str) -> Callable[[Place], None]:
    """A nested repository (a submodule's gitlink in the index) with hostile settings."""

    def setup(place: Place) -> None:
        inner = place.folder / "sub"
        inner.mkdir()
        (inner / "b.txt").write_text("hello\n")
        place.git("init", "-q", cwd=inner)
        place.git("add", "b.txt", cwd=inner)
        place.git("commit", "-qm", "inner", cwd=inner)
        place.git("add", "sub")
        place.git("commit", "-qm", "sub")
        (inner / "b.txt").write_text("HELLO\n")
        later = os.stat(inner / "b.txt").st_mtime + 100
        os.utime(inner / "b.txt", (later, later))
        (inner / ".gitattributes").write_text("*.txt filter=x diff=x\n")
        place.config(*settings, repo=inner)
        place.git("config", "-f", ".gitmodules", "submodule.sub.path", "sub")

    return setup


def bare_inside(place: Place) -> None:
    """A bare repository in the work tree (git finds it when run inside it)."""
    place.git("commit", "-qam", "two")
    bare = place.folder / "inner.git"
    place.git("clone", "-q", "--bare", ".", str(bare))
    place.config("diff.x.textconv=EVIL", repo=bare)
    (bare / "info").mkdir(exist_ok=True)
    (bare / "info" / "attributes").write_text("*.txt diff=x\n")


@dataclass(frozen=True)
class Case:
    name: str
    setup: Callable[[Place], None]
    command: str
    asks: bool  # else it runs, with the program switched off
    control: bool = True  # plain git without a terminal runs the program too


GIT_CASES = [
    Case("hook", hook, "git status", asks=False),
    Case("hooks-path", hooks_path, "git status", asks=False),
    Case("fsmonitor", lambda p: p.config("core.fsmonitor=EVIL"), "git status", asks=False),
    Case("fsmonitor-diff", lambda p: p.config("core.fsmonitor=EVIL"), "git diff", asks=False),
    Case("diff-external", lambda p: p.config("diff.external=EVIL"), "git diff", asks=True),
    Case("textconv-log", textconv, "git log -p", asks=True),
    Case("textconv-show", textconv, "git show", asks=True),
    Case("textconv-blame", textconv, "git blame a.txt", asks=True),
    Case("diff-command", diff_command, "git diff", asks=True),
    Case("filter-clean-status", filters("clean"), "git status", asks=True),
    Case("filter-clean-diff", filters("clean"), "git diff", asks=True),
    Case("filter-process", filters("process"), "git status", asks=True),
    Case("pager", lambda p: p.config("core.pager=EVIL"), "git -p log", asks=False, control=False),
    Case(
        "pager-cmd", lambda p: p.config("pager.log=EVIL"), "git -p log", asks=False, control=False
    ),
    Case("alias", lambda p: p.config("alias.st=!EVIL"), "git st", asks=True),
    Case(
        "ssh-command",
        lazy_fetch("ssh://example.invalid/x", "core.sshCommand=EVIL"),
        "git log -p",
        asks=False,
    ),
    Case(
        "upload-pack",
        lazy_fetch(
            "file:///nowhere", "remote.origin.uploadpack=EVIL", "protocol.file.allow=always"
        ),
        "git log -p",
        asks=False,
    ),
    Case("gpg", signed, "git log", asks=False),
    Case("include-fsmonitor", include("core.fsmonitor=EVIL"), "git status", asks=False),
    Case("include-textconv", include("diff.x.textconv=EVIL"), "git diff", asks=True),
    Case("gitfile-inside", gitfile(True, "core.fsmonitor=EVIL"), "git status", asks=False),
    Case("gitfile-textconv", gitfile(True, "diff.x.textconv=EVIL"), "git diff", asks=True),
    Case("gitfile-outside", gitfile(False, "core.fsmonitor=EVIL"), "git status", asks=True),
    Case("worktree", worktree_outside, "git status", asks=True, control=False),
    Case("blame-ignore", blame_ignore, "git blame a.txt", asks=True, control=False),
    Case("submodule-fsmonitor", submodule("core.fsmonitor=EVIL"), "git status", asks=False),
    Case("submodule-filter", submodule("filter.x.clean=EVIL"), "git status", asks=True),
    Case("bare", bare_inside, "cd inner.git && git log -p", asks=True),
    Case(
        "help",
        lambda p: p.config("man.viewer=evil", "man.evil.cmd=EVIL"),
        "git help log",
        asks=True,
    ),
    Case(
        "unset-override",
        lambda p: p.config("core.fsmonitor=EVIL"),
        "unset GIT_CONFIG_COUNT; git status",
        asks=True,
        control=False,
    ),
    Case(
        "env-i",
        lambda p: p.config("core.fsmonitor=EVIL"),
        "env -i git status",
        asks=True,
        control=False,
    ),
    Case(
        "loop-override",
        lambda p: p.config("core.fsmonitor=EVIL"),
        "for GIT_CONFIG_COUNT in 0; do git status; done",
        asks=True,
        control=False,
    ),
]


def project(world: World, name: str, files: dict[str, str]) -> Place:
    place = Place(world, world.workspace / name, name)
    place.folder.mkdir()
    evil_program(place.program, place)
    for relative, text in files.items():
        path = place.folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("EVIL", str(place.program)).replace("RAN", str(place.ran)))
    return place


OTHER_CASES: list[tuple[str, dict[str, str], str]] = [
    (
        "python-m-pip",
        {"pip/__init__.py": "", "pip/__main__.py": "open('RAN', 'w')\n"},
        "python3 -m pip --version",
    ),
    ("npmrc", {"package.json": "{}", ".npmrc": "script-shell=EVIL\ngit=EVIL\n"}, "npm ls"),
    ("yarnrc", {".yarnrc.yml": "yarnPath: tools/evil.sh\n"}, "yarn --version"),
    ("rust-toolchain", {"rust-toolchain.toml": '[toolchain]\npath = "tc"\n'}, "cargo --version"),
    ("ackrc", {".ackrc": "--pager=EVIL\n"}, "ack hello"),
    ("gemfile", {"Gemfile": "system('EVIL')\n"}, "bundle list"),
]


def test_every_case_is_a_real_threat_without_the_switches(world: World) -> None:
    """Plain git (no terminal, no switches) runs each hostile setup's program."""
    for case in GIT_CASES:
        if not case.control:
            continue
        place = repository(world, f"control-{case.name}")
        case.setup(place)
        env = {**PLAIN_GIT, "HOME": str(world.home)}
        subprocess.run(
            ["/bin/sh", "-c", case.command],
            cwd=place.folder,
            env=env,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=20,
            check=False,
        )
        assert place.ran.exists(), f"{case.name}: the program did not run without the switches"


def test_blame_ignore_revs_file_shows_a_file_without_the_checks(world: World) -> None:
    place = repository(world, "control-blame")
    blame_ignore(place)
    shown = subprocess.run(
        ["git", "blame", "a.txt"],
        cwd=place.folder,
        capture_output=True,
        text=True,
        env={**PLAIN_GIT, "HOME": str(world.home)},
        check=False,
    )
    assert world.canary in shown.stderr  # git blame prints the first line it cannot read


@pytest.mark.parametrize("case", GIT_CASES, ids=[case.name for case in GIT_CASES])
async def test_git_never_runs_what_the_repository_names_unasked(
    gate: PolicyGate, world: World, case: Case, request: pytest.FixtureRequest
) -> None:
    mode = request.node.callspec.id.split("-")[0]
    place = repository(world, f"{mode}-{case.name}")
    case.setup(place)
    result = await shell(gate, place.folder, case.command)
    assert not place.ran.exists(), f"{case.name}: the program ran\n{result.output}"
    assert not place.pwned.exists()
    assert world.canary not in result.output + (result.error or "")
    if case.asks:
        assert result.error is not None, result.output
        assert result.error.startswith((ASKS, "refused:")), result.error
    else:
        assert result.ok, result.error
        assert result.output.startswith('<untrusted source="shell">\nexit code'), result.output


@pytest.mark.parametrize(("name", "files", "command"), OTHER_CASES, ids=[c[0] for c in OTHER_CASES])
async def test_other_reading_commands_ask_before_running_the_projects_code(
    gate: PolicyGate,
    world: World,
    name: str,
    files: dict[str, str],
    command: str,
    request: pytest.FixtureRequest,
) -> None:
    mode = request.node.callspec.id.split("-")[0]
    place = project(world, f"{mode}-{name}", files)
    result = await shell(gate, place.folder, command)
    assert result.error is not None and result.error.startswith(ASKS), result.error
    assert not place.ran.exists()
    assert not place.pwned.exists()


async def test_an_unasked_command_gets_the_switches(gate: PolicyGate, world: World) -> None:
    result = await shell(gate, world.workspace, "printenv GIT_CONFIG_COUNT LESSSECURE GIT_PAGER")
    assert result.ok, result.error
    assert result.output.split("\n")[2:5] == [str(len(GIT_OVERRIDES)), "1", "cat"]


async def test_an_approved_git_commit_still_runs_the_owners_hooks(world: World) -> None:
    """At full autonomy (or once approved) git runs as it would for the owner: hooks too."""
    policy = make_gate(world, "required", autonomy="full")
    place = repository(world, "full-hook")
    evil_program(place.folder / ".git" / "hooks" / "pre-commit", place)
    command = "git -c user.name=t -c user.email=t@example.com commit -qam two"
    result = await shell(policy, place.folder, command)
    assert result.ok, result.error
    assert place.ran.exists(), result.output  # in the workspace: the sandbox holds the rest
    assert not place.pwned.exists()
    assert world.canary not in result.output


# --- the classifier's reasons ------------------------------------------------------------


def guard_for(world: World) -> PathGuard:
    return PathGuard(world.workspace, forbidden=DEFAULT_FORBIDDEN_PATHS, home=world.home)


def test_the_reason_names_the_setting_and_approvals_learn_what_else_runs(world: World) -> None:
    place = repository(world, "reasons")
    textconv(place)
    place.config("core.fsmonitor=EVIL")
    evil_program(place.folder / ".git" / "hooks" / "pre-commit", place)
    guard = guard_for(world)
    reading = classify("git log -p", guard=guard, cwd=place.folder)
    assert reading.risk == "medium"
    assert "the repository's settings make git run a program: diff.x.textconv" in reading.reason
    place.git("config", "--unset", "diff.x.textconv")
    assert classify("git log -p", guard=guard, cwd=place.folder).risk == "low"
    commit = classify("git commit -m x", guard=guard, cwd=place.folder)
    assert commit.risk == "medium"
    assert "core.fsmonitor, the pre-commit hook" in commit.reason


@pytest.mark.parametrize(
    "line",
    [
        "unset GIT_PAGER",
        "read GIT_CONFIG_COUNT",
        "export -n LESSSECURE",
        "declare +x GIT_CONFIG_GLOBAL",
        "local GIT_CONFIG_NOSYSTEM",
        "declare -n ref=GIT_CONFIG_COUNT",
        "printf -v GIT_PAGER %s x",
        "getopts ab GIT_PAGER",
        "mapfile GIT_CONFIG_KEY_0 < /dev/null",
        "for PAGER in less; do man ls; done",
        ": $((GIT_CONFIG_COUNT = 0))",
        "v=GIT_CONFIG_COUNT; : $(($v = 0))",
        "echo ${GIT_PAGER:=less}",
        "unset $name",
        'export "$name=0"',
        "env -i git status",
        "env -u GIT_CONFIG_COUNT git status",
        "env --unset=GIT_PAGER git log",
        "exec -c git status",
        "GIT_DIR=/srv/other/.git git log",
        "HOME=. git status",
        "XDG_CONFIG_HOME=. git status",
        "export GIT_CONFIG_COUNT=0",
    ],
)
def test_a_line_that_changes_the_switches_asks(world: World, line: str) -> None:
    assert classify(line, guard=guard_for(world), cwd=world.workspace).risk != "low", line


@pytest.mark.parametrize(
    "line", ["echo $HOME", "printenv GIT_CONFIG_COUNT", "read -r line", "for f in *; do :; done"]
)
def test_lines_that_only_read_variables_stay_low(world: World, line: str) -> None:
    assert classify(line, guard=guard_for(world), cwd=world.workspace).risk == "low", line


# --- the switches and the readers themselves ---------------------------------------------


def test_each_git_override_beats_the_repositorys_own_setting(world: World) -> None:
    place = repository(world, "overrides")
    for key, _ in GIT_OVERRIDES:
        place.git("config", "--add", key, "hostile")
    env = neutralised({"PATH": "/usr/bin:/bin", "HOME": str(world.home)}, [world.workspace])
    for key, value in GIT_OVERRIDES:
        got = subprocess.run(
            ["git", "config", "--get-all", key],
            cwd=place.folder,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")[:-1]
        assert got[-1] == value, key  # the last value wins (helpers: an empty one clears)


def test_the_environment_keeps_no_git_variable_or_workspace_path(world: World) -> None:
    given = {
        "PATH": f"/usr/bin:.:bin:{world.workspace}/bin:/bin",
        "GIT_SSH_COMMAND": "evil",
        "GIT_DIR": "/elsewhere",
        "LESSOPEN": "|evil %s",
        "LANG": "C.UTF-8",
    }
    env = neutralised(given, [world.workspace])
    assert env["PATH"] == "/usr/bin:/bin"
    assert "GIT_SSH_COMMAND" not in env and "GIT_DIR" not in env and "LESSOPEN" not in env
    assert env["LANG"] == "C.UTF-8"
    assert {k: env[k] for k in git_variables()} == git_variables()


TRICKY_CONFIGS = [
    b"[core] fsmonitor = a\n",
    b'[Diff "X"]\n\ttextconv = "b c" ; comment\n',
    b"[alias.St]\n x = !y\\\n z\n",
    b"[a]b\n",
    b'[c "d\\"e"]k=v\n',
    b"[core]\rfoo=1\n",
    b"[core]\r\nfoo=1\r\n",
    b"\xef\xbb\xbf[core]\nfoo=1\n  ; c\n # c\n\n[x]\n y = 1 # c\n",
    b"[core]\n\tk\\\n = v\n",
    b"[co re]\nfoo=1\n",
    b'[core]\nfoo="a\nb"\n',
    b"[core]\nfoo = a\\qb\n",
    b'[core "x" ]\nfoo = 1\n',
    b"[ core]\nfoo = 1\n",
    b"[core]\n\x0bfoo=1\n",
    b"[core]\nfoo\n",
    b'[filter "lfs"]\n\tclean = git-lfs clean -- %f\n\trequired\n',
    b'[x]\ny = a\\tb\\nc\\\\d\\"e\n',
    b'[x]\ny = " a # b "  # c\n',
    b"[x.y.z]\nk = 1\n",
    b"[x]\n-k = 1\n",
    b"[x]\nk-1 = 1\n",
    b"[x]\nk_1 = 1\n",
]


def git_reads(data: bytes, tmp_path: Path) -> list[tuple[str, str | None]] | None:
    path = tmp_path / "config"
    path.write_bytes(data)
    done = subprocess.run(
        ["git", "config", "--file", str(path), "--list", "--no-includes", "-z"],
        capture_output=True,
        env=PLAIN_GIT,
        cwd=tmp_path,
        check=False,
    )
    if done.returncode:
        return None
    found: list[tuple[str, str | None]] = []
    for item in done.stdout.split(b"\0")[:-1]:
        key, newline, value = item.partition(b"\n")
        found.append((key.decode(), value.decode("utf-8", "surrogateescape") if newline else None))
    return found


def ours(data: bytes) -> list[tuple[str, str | None]] | None:
    try:
        return parse_git_config(data)
    except ConfigError:
        return None


@pytest.mark.parametrize("data", TRICKY_CONFIGS)
def test_our_config_reader_reads_what_git_reads(data: bytes, tmp_path: Path) -> None:
    assert ours(data) == git_reads(data, tmp_path)


_PIECES = st.sampled_from(
    ["[", "]", '"', "\\", "\n", "\r", "\t", " ", "=", "#", ";", ".", "-", "core", "x", "Y", "1"]
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.lists(_PIECES, max_size=30).map(lambda parts: "".join(parts).encode()))
def test_whatever_git_reads_we_read_the_same_or_refuse(data: bytes, tmp_path: Path) -> None:
    mine = ours(data)
    if mine is not None:  # refusing is safe: the command asks
        assert mine == git_reads(data, tmp_path), data


def test_nested_repositories_are_found_in_every_index_version(world: World) -> None:
    place = repository(world, "index-versions")
    submodule("core.fsmonitor=EVIL")(place)
    for version in ("2", "3", "4"):
        place.git("update-index", "--index-version", version)
        found = read_repository(place.folder, home=world.home)
        assert found is not None
        assert [repo.top for repo in found.nested] == [place.folder / "sub"], version


def test_settings_are_found_wherever_git_would_read_them(world: World) -> None:
    """includeIf (whatever its condition), config.worktree, a linked work tree's common
    folder, ``-C`` and ``--git-dir``: the textconv is found every way."""
    guard = guard_for(world)
    place = repository(world, "found")
    (place.folder / "extra.cfg").write_text('[diff "x"]\n\ttextconv = evil\n')
    place.config("includeIf.onbranch:nowhere.path=../extra.cfg")
    assert classify("git diff", guard=guard, cwd=place.folder).risk == "medium"
    place.git("config", "--unset", "includeIf.onbranch:nowhere.path")
    assert classify("git diff", guard=guard, cwd=place.folder).risk == "low"
    (place.folder / ".git" / "config.worktree").write_text('[filter "y"]\n\tclean = evil\n')
    assert "filter.y.clean" in classify("git status", guard=guard, cwd=place.folder).reason
    (place.folder / ".git" / "config.worktree").unlink()
    place.git("worktree", "add", "-q", str(world.workspace / "found-linked"))
    place.config("diff.z.command=evil")
    linked = classify("git diff", guard=guard, cwd=world.workspace / "found-linked")
    assert "diff.z.command" in linked.reason
    assert (
        "diff.z.command" in classify("git -C found diff", guard=guard, cwd=world.workspace).reason
    )
    line = "git --git-dir=found/.git log"
    assert "diff.z.command" in classify(line, guard=guard, cwd=world.workspace).reason
    assert classify("git -C $where diff", guard=guard, cwd=world.workspace).risk == "medium"


def test_a_settings_file_git_would_not_read_asks_rather_than_guessing(world: World) -> None:
    place = repository(world, "unreadable")
    (place.folder / ".git" / "config").write_bytes(b"[core]\n\tfsmonitor = a\0b\n")
    found = classify("git status", guard=guard_for(world), cwd=place.folder)
    assert found.risk == "medium"
    assert "cannot be read" in found.reason
