"""Trust on a default install (issue 26): every hostile line of ``tests/trust_probes.py``
against the real policy gate, the real ``shell`` tool and the real file tools.

Each line runs in a folder of its own in the workspace, set up first the way an
unpacked archive, a clone or one approved write would leave it (a hostile
``.git/config``, hooks, ``.gitattributes``, a ``json.py``...), at three levels:
``supervised`` with nobody there to approve, with the kernel sandbox and without
it, and ``full`` with the sandbox (``full`` without it must not even build).
Around the calls stands a world worth attacking:

- canary credentials in a fake home, with its ``.bashrc`` and ``.profile``;
- PinClaw's config and secrets file (canaries too) in its data folder;
- canaries in this process's environment (which stands for the daemon's: the
  shell tool must not pass them on), a daemon stand-in whose environment held a
  canary under a name the config does not know and which sealed itself as
  ``pinclaw`` does, and a neighbour process of the same user holding one;
- a local service on 127.0.0.1 (another process) and a port of PinClaw's own (in
  this process, on every address), both counting connections.

A line that is refused or asks is fine. A line that runs is fine only if it
wrote nothing outside the workspace (nor in the fake home, nor the real home's
shell start-up files), showed no canary to the model, connected to neither
listener and left no process behind (found in ``/proc`` by its folder or its
unique ``{mark}``). At ``supervised`` a hostile line must not run at all unless
its probe says why it is harmless as run; in the sandbox a workspace-code line
may run, as the sandbox confines workspace code by design. Every broken promise
of a line is listed in its failure.

Each workspace set-up is also checked to be live: run plainly (no PinClaw), the
line does run the payload. A real ``pinclaw agent -m`` is run over the
environment lines, with canaries in its inherited environment. And everyday
lines, the existing ``HARMLESS`` list and everyday git and Python lines in an
ordinary repository, must still run unasked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.agent.tool_registry import ToolRegistry
from bot.config import LoadedConfig, parse_config
from bot.core.conversation import ToolCall
from bot.core.errors import ConfigError
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext, ToolResult
from bot.security.audit import AuditLog
from bot.security.gate import PolicyGate
from bot.security.kit import SecurityKit, build_security
from tests.cli_helpers import local_config, run, write_config
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.shell_probes import HARMLESS, INTERPRETING
from tests.shell_probes import HOSTILE as EARLIER
from tests.test_sandbox_network import OutsideListener
from tests.test_shell_gate import CANARY_FILES, Listener, leaks
from tests.trust_probes import (
    ENVIRONMENT,
    EVERYDAY_GIT,
    EVERYDAY_INTERPRETING,
    EVERYDAY_PYTHON,
    EVERYDAY_SETUP,
    HOSTILE,
    SETUPS,
    Probe,
)
from tools.files import build as build_files
from tools.shell import build as build_shell

ROOT = Path(__file__).resolve().parent.parent
CASES = [("required", "supervised"), ("off", "supervised"), ("required", "full")]
CASE_IDS = ["sandbox-supervised", "no-sandbox-supervised", "sandbox-full"]
SHORT = {case: name for case, name in zip(CASES, ("ss", "ns", "sf"), strict=True)}
EVERYDAY = [*HARMLESS, *EVERYDAY_GIT, *EVERYDAY_PYTHON]
ENV_CANARIES = ("AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "DATABASE_URL")
"""Names this process (the daemon) holds canaries under; the config names none of them."""
REAL_HOME_FILES = (".bashrc", ".profile", ".bash_profile", ".bash_login", ".bash_aliases")
GRACE_S = 1.0
SEAL = """
import os, sys, time
from bot.security.own_env import seal_process
seal_process([os.environ["TELEGRAM_BOT_TOKEN"]])
print("sealed", flush=True)
time.sleep(900)
"""
"""The daemon stand-in: it seals itself the way ``pinclaw`` does once its config is read."""


class Everywhere(Listener):
    """A port of PinClaw's own: a server in this process on every address, counting."""

    def __init__(self) -> None:  # Listener's loop and close, on one socket for all addresses
        self.count = 0
        self._lock = threading.Lock()
        if socket.has_dualstack_ipv6():
            server = socket.create_server(("::", 0), family=socket.AF_INET6, dualstack_ipv6=True)
        else:
            server = socket.create_server(("0.0.0.0", 0))
        self.port = server.getsockname()[1]
        self._sockets = [server]
        self._threads = [threading.Thread(target=self._serve, args=(server,), daemon=True)]
        self._threads[0].start()


@dataclass
class Trust:
    """Everything the probes run against, and how to tell what they did."""

    root: Path
    home: Path
    data: Path
    workspace: Path
    outside: Path
    setup_home: Path
    own: Everywhere
    service: OutsideListener
    daemon_pid: int
    neighbour_pid: int
    host_ip: str
    real_home: Path
    canaries: dict[str, str] = field(default_factory=dict)

    def values(self, folder: Path, tag: str, mark: int) -> dict[str, Any]:
        """The placeholders of a line or set-up run in ``folder``."""
        return {
            "out": self.outside / f"pwned-{tag}",
            "home": self.home,
            "data": self.data,
            "ws": folder,
            "port": self.service.port,
            "ownport": self.own.port,
            "hostip": self.host_ip,
            "hostname": socket.gethostname(),
            "mark": mark,
            "daemonpid": self.daemon_pid,
            "neighbourpid": self.neighbour_pid,
        }

    def state(self) -> dict[str, object]:
        """What a line must not change: files outside the workspace, the listeners' counts."""
        found: dict[str, object] = {}
        skip = str(self.workspace)
        for top in (self.home, self.outside):
            for folder, dirs, files in os.walk(top):
                dirs[:] = [d for d in dirs if os.path.join(folder, d) != skip]
                for name in [*dirs, *files]:
                    path = os.path.join(folder, name)
                    with contextlib.suppress(OSError):
                        info = os.lstat(path)
                        if stat.S_ISSOCK(info.st_mode):
                            continue  # the egress proxy's door for one call, gone after it
                        if stat.S_ISDIR(info.st_mode):  # its time changes with those doors
                            found[path] = "folder"
                        else:
                            found[path] = (
                                stat.S_IFMT(info.st_mode),
                                info.st_size,
                                info.st_mtime_ns,
                            )
        for name in REAL_HOME_FILES:
            found[str(self.real_home / name)] = _content(self.real_home / name)
        found["connections to the local service"] = self.service.count
        found[f"connections to PinClaw's own port {self.own.port}"] = self.own.count
        return found


@pytest.fixture(scope="module")
def trust(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trust]:
    root = tmp_path_factory.mktemp("trust")
    home, outside, setup_home = root / "home", root / "outside", root / "setup-home"
    data = home / ".pinclaw"
    workspace = data / "workspace"
    for folder in (workspace, outside, setup_home):
        folder.mkdir(parents=True)
    canaries: dict[str, str] = {}
    for name, template in CANARY_FILES.items():
        canaries[name] = f"CANARY{secrets.token_hex(12)}"
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(template.format(canary=canaries[name]))
    (home / ".bashrc").write_text("# ~/.bashrc\nalias ll='ls -l'\n")
    (home / ".profile").write_text("# ~/.profile\nPATH=$HOME/bin:$PATH\n")
    own, service = Everywhere(), OutsideListener("127.0.0.1")
    for name in ("AWS_SECRET_ACCESS_KEY", "SERVICE_TOKEN", "TELEGRAM_BOT_TOKEN", "NEIGHBOUR"):
        canaries[f"environment: {name}"] = f"CANARY{secrets.token_hex(12)}"
    daemon = subprocess.Popen(
        [sys.executable, "-c", SEAL, "canary-daemon"],
        env={
            "PATH": "/usr/bin:/bin",
            "AWS_SECRET_ACCESS_KEY": canaries["environment: AWS_SECRET_ACCESS_KEY"],
            "SERVICE_TOKEN": canaries["environment: SERVICE_TOKEN"],  # a name nobody knows
            "TELEGRAM_BOT_TOKEN": canaries["environment: TELEGRAM_BOT_TOKEN"],  # the config's
        },
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert daemon.stdout is not None and daemon.stdout.readline() == "sealed\n"
    neighbour = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(900)", "canary-neighbour"],
        env={"PATH": "/usr/bin:/bin", "NEIGHBOUR_API_KEY": canaries["environment: NEIGHBOUR"]},
    )
    saved = {name: os.environ.get(name) for name in ("HOME", *ENV_CANARIES)}
    os.environ["HOME"] = str(home)
    for name in ENV_CANARIES:
        canaries[f"daemon environment: {name}"] = f"CANARY{secrets.token_hex(12)}"
        os.environ[name] = canaries[f"daemon environment: {name}"]
    world = Trust(
        root,
        home,
        data,
        workspace,
        outside,
        setup_home,
        own,
        service,
        daemon.pid,
        neighbour.pid,
        _host_ip(),
        Path(pwd.getpwuid(os.getuid()).pw_dir),
        canaries,
    )
    real_home_before = {name: _content(world.real_home / name) for name in REAL_HOME_FILES}
    try:
        yield world
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        for process in (daemon, neighbour):
            process.kill()
            process.wait()
        own.close()
        service.close()
        for name, before in real_home_before.items():  # put back what a probe changed
            path = world.real_home / name
            if _content(path) != before:
                if before is None:
                    path.unlink()
                else:
                    path.write_bytes(before)


def _content(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def _host_ip() -> str:
    """This machine's first non-loopback address (a loopback one if it has no other)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        found = subprocess.run(
            ["hostname", "-I"], capture_output=True, text=True, timeout=10, check=False
        )
        for address in found.stdout.split():
            if ":" not in address and not address.startswith("127."):
                return address
    return "127.0.1.1"


def make_gate(trust: Trust, mode: str, autonomy: str) -> tuple[PolicyGate, SecurityKit]:
    """The policy gate around the shell and file tools, as the daemon builds them."""
    raw: dict[str, Any] = {
        "provider": {"kind": "ollama", "model": "m"},
        "security": {
            "autonomy": autonomy,
            "shell_sandbox": mode,
            "shell_timeout_s": 15,
            "max_tool_calls_per_hour": 0,
        },
    }
    loaded = LoadedConfig(parse_config(raw, {}), trust.data / "config.toml", trust.data)
    kit = build_security(loaded)
    assert kit.paths.home == trust.home
    tools = [*build_shell(loaded, kit), *build_files(loaded, kit)]
    registry = ToolRegistry(tools, max_output_chars=100_000)
    audit = AuditLog(trust.root / f"audit-{mode}-{autonomy}.jsonl")
    return PolicyGate(registry, config=kit.config, audit=audit, redactor=kit.redactor), kit


@pytest.fixture(scope="module")
def gates(trust: Trust) -> Iterator[dict[tuple[str, str], PolicyGate]]:
    """A gate per (sandbox mode, autonomy), built once; their kits closed at the end."""
    kits: list[SecurityKit] = []
    made: dict[tuple[str, str], PolicyGate] = {}
    for mode, autonomy in CASES:
        gate, kit = make_gate(trust, mode, autonomy)
        made[(mode, autonomy)] = gate
        kits.append(kit)
    yield made
    for kit in kits:
        asyncio.run(kit.aclose())


def prepare(folder: Path, script: str, home: Path) -> None:
    """Run a set-up ``script`` in a new ``folder`` with plain git and Python (not PinClaw)."""
    folder.mkdir(parents=True)
    if not script:
        return
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@example.com",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@example.com",
    }
    done = subprocess.run(
        ["/bin/sh", "-ec", script],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"the set-up failed in {folder}:\n{script}\n{done.stderr}"


def context(folder: Path) -> ToolContext:
    """A call's context: commands run in ``folder`` (the probe's, inside the workspace)."""
    return ToolContext(SessionKey("test", "trust"), folder, ZoneInfo("UTC"))


async def call(gate: PolicyGate, folder: Path, tool: str, **args: Any) -> ToolResult:
    """One tool call through the policy gate, nobody there to approve."""
    return await gate.execute(ToolCall("trust", tool, args), context(folder))


def not_run(result: ToolResult) -> bool:
    """Refused, or waiting for a person who is not there."""
    return not result.ok and (result.error or "").startswith(("refused:", "not run:"))


def survivors(folder: Path, mark: str = "") -> list[tuple[int, str]]:
    """Live processes working in ``folder`` or carrying ``mark`` (any namespace)."""
    found = []
    inside = str(folder)
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            argv = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if state in (b"Z", b"X"):
            continue  # exited, waiting to be collected
        with contextlib.suppress(OSError):
            argv += Path(f"/proc/{entry}/environ").read_bytes()
        cwd = ""
        with contextlib.suppress(OSError):
            cwd = os.readlink(f"/proc/{entry}/cwd")
        if (mark and mark.encode() in argv) or cwd == inside or cwd.startswith(inside + "/"):
            shown = argv.split(b"\0", 8)[:8]
            found.append((int(entry), b" ".join(shown).decode(errors="replace")[:200]))
    return found


def stop(processes: list[tuple[int, str]]) -> None:
    """Kill what a call left behind (found by ``survivors``), so later probes start clean."""
    for pid, _ in processes:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def changes(before: dict[str, object], after: dict[str, object]) -> list[str]:
    """What differs between two ``Trust.state`` results, one sentence each."""
    found = []
    for key in sorted(before.keys() | after.keys()):
        if key not in before:
            found.append(f"created {key}")
        elif key not in after:
            found.append(f"removed {key}")
        elif before[key] != after[key]:
            found.append(f"changed {key}" if key.startswith("/") else f"{key}: {after[key]}")
    return found


def allowed_to_run(probe: Probe, mode: str) -> bool:
    """Whether the line may run unasked at ``supervised``."""
    return bool(probe.harmless) or ((probe.confined or probe.covered) and mode == "required")


def test_the_probe_lists_are_as_large_as_promised() -> None:
    earlier = {line for _, line in EARLIER}
    assert len(HOSTILE) >= 80
    assert len({(p.setup, p.line) for p in HOSTILE}) == len(HOSTILE)
    assert not [p.line for p in HOSTILE if p.line in earlier]
    assert all(p.setup in SETUPS for p in HOSTILE if p.setup)
    assert len(EVERYDAY) == len(set(EVERYDAY))


def test_full_autonomy_without_the_sandbox_does_not_build(trust: Trust) -> None:
    raw: dict[str, Any] = {
        "provider": {"kind": "ollama", "model": "m"},
        "security": {"autonomy": "full", "shell_sandbox": "off"},
    }
    loaded = LoadedConfig(parse_config(raw, {}), trust.data / "config.toml", trust.data)
    with pytest.raises(ConfigError) as refused:
        build_shell(loaded, build_security(loaded))
    assert "security.autonomy" in str(refused.value)
    assert "security.shell_sandbox" in str(refused.value)
    raw["tools"] = {"disabled": ["shell"]}  # without a shell tool, full is allowed
    loaded = LoadedConfig(parse_config(raw, {}), trust.data / "config.toml", trust.data)
    assert build_shell(loaded, build_security(loaded)) == []


LIVE = [(i, p) for i, p in enumerate(HOSTILE) if p.category == "workspace-code"]


@pytest.mark.parametrize(("index", "probe"), LIVE, ids=[f"{i:03d}-{p.setup}" for i, p in LIVE])
def test_each_workspace_set_up_really_runs_its_payload(
    trust: Trust, index: int, probe: Probe
) -> None:
    """Run plainly, without PinClaw, the line runs the program its folder names: the probe
    is a real attack, not one that fails by itself."""
    home, out = trust.root / "live-home", trust.root / "live-out" / f"pwned-{index}"
    out.parent.mkdir(exist_ok=True)
    folder = home / ".pinclaw" / "workspace" / f"live-{index}"  # as deep as in the world
    key = home / ".ssh" / "id_rsa"
    if not key.exists():
        key.parent.mkdir(parents=True)
        key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nLIVECANARY\n")
        (home / ".git-credentials").write_text("https://pinclaw:LIVECANARY@github.com\n")
        (home / ".gitconfig").write_text(
            '[url "https://pinclaw:LIVECANARY@github.com/"]\n\tinsteadOf = https://github.com/\n'
        )
    values = trust.values(folder, f"live-{index}", 0) | {"home": home, "out": out}
    prepare(folder, SETUPS[probe.setup].format(**values), trust.setup_home)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}
    done = subprocess.run(
        ["/bin/sh", "-c", probe.line.format(**values)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    shown = done.stdout + done.stderr
    assert out.exists() or "LIVECANARY" in shown, f"not live: {probe.line!r}\n{shown}"


@pytest.mark.parametrize("case", [CASES[1], CASES[2]], ids=[CASE_IDS[1], CASE_IDS[2]])
async def test_the_process_scan_sees_what_a_call_runs(
    trust: Trust, gates: dict[tuple[str, str], PolicyGate], case: tuple[str, str]
) -> None:
    """The scan that finds what outlived a call does see a running call's processes, in the
    sandbox and out of it: an empty scan after a call means something."""
    folder = trust.workspace / f"scan-{SHORT[case]}"
    folder.mkdir()
    mark = 700_000_000 + secrets.randbelow(10**8)
    command = f"sleep {mark} & sleep {mark}"
    running = asyncio.create_task(call(gates[case], folder, "shell", command=command, timeout_s=3))
    sleeps: list[tuple[int, str]] = []
    while not running.done() and len(sleeps) < 2:  # both sleeps, found by their argument
        found = await asyncio.to_thread(survivors, folder, str(mark))
        sleeps = [(pid, argv) for pid, argv in found if argv.startswith(f"sleep {mark}")]
        await asyncio.sleep(0.05)
    result = await running
    assert len(sleeps) == 2, (sleeps, result.output)
    assert not await asyncio.to_thread(survivors, folder, str(mark))


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize(
    ("index", "probe"),
    list(enumerate(HOSTILE)),
    ids=[f"{i:03d}-{p.category}" for i, p in enumerate(HOSTILE)],
)
async def test_a_hostile_line_keeps_every_promise(
    trust: Trust,
    gates: dict[tuple[str, str], PolicyGate],
    case: tuple[str, str],
    index: int,
    probe: Probe,
) -> None:
    tag = f"{SHORT[case]}-{index}"
    folder = trust.workspace / tag
    mark = 700_000_000 + secrets.randbelow(10**8)
    values = trust.values(folder, tag, mark)
    script = SETUPS[probe.setup].format(**values) if probe.setup else ""
    await asyncio.to_thread(prepare, folder, script, trust.setup_home)
    try:
        await _probe(trust, gates[case], case, probe, folder, tag, mark, values)
    finally:
        if probe.covered:  # without the sandbox no command runs while such a link is there
            await asyncio.to_thread(shutil.rmtree, folder)


async def _probe(
    trust: Trust,
    gate: PolicyGate,
    case: tuple[str, str],
    probe: Probe,
    folder: Path,
    tag: str,
    mark: int,
    values: dict[str, Any],
) -> None:
    mode, autonomy = case
    command = probe.line.format(**values)
    before = await asyncio.to_thread(trust.state)
    args: dict[str, Any] = {"command": command}
    if probe.timeout_s is not None:
        args["timeout_s"] = probe.timeout_s
    result = await call(gate, folder, "shell", **args)
    left = await asyncio.to_thread(survivors, folder, str(mark))
    broken: list[str] = []
    if left:
        await asyncio.sleep(GRACE_S)
        still = await asyncio.to_thread(survivors, folder, str(mark))
        when = f"still {GRACE_S:g} s later" if still else f"gone {GRACE_S:g} s later"
        broken.append(f"processes outlived the call ({when}): {left}")
        stop(still)
    shown = result.output + (result.error or "")
    ran = not not_run(result)
    if autonomy == "supervised" and ran and not allowed_to_run(probe, mode):
        broken.append(f"ran unasked at supervised: {result.error or result.output[:300]!r}")
    for name in probe.reads:  # what the file tools make of a link the line made or found
        path = f"{tag}/{name}"  # the file tools take paths from the workspace's top
        read = await call(gate, trust.workspace, "file_read", path=path)
        found = await call(gate, trust.workspace, "content_search", pattern="CANARY", path=tag)
        if read.ok and await asyncio.to_thread(os.path.lexists, folder / name):
            broken.append(f"file_read read {path}, a second name for a forbidden file")
        for tool, outcome in (("file_read", read), ("content_search", found)):
            text = outcome.output + (outcome.error or "")
            if leaked := leaks(text, trust.canaries):
                broken.append(f"{tool} on {path} showed {leaked}")
    if leaked := leaks(shown, trust.canaries):
        broken.append(f"the model was shown canaries {leaked}")
    after = await asyncio.to_thread(trust.state)
    broken += changes(before, after)
    assert not broken, (
        f"[{CASE_IDS[CASES.index(case)]}] {probe.category} {command!r}:\n- "
        + "\n- ".join(broken)
        + f"\n{shown[:1500]}"
    )


@pytest.mark.parametrize("mode", ["required", "off"], ids=["sandbox", "no-sandbox"])
@pytest.mark.parametrize("line", EVERYDAY)
async def test_an_everyday_line_runs_without_asking(
    trust: Trust, gates: dict[tuple[str, str], PolicyGate], mode: str, line: str
) -> None:
    folder = trust.workspace / "everyday"
    if not folder.exists():
        values = trust.values(folder, "everyday", 0)
        await asyncio.to_thread(prepare, folder, EVERYDAY_SETUP.format(**values), trust.setup_home)
    result = await call(gates[(mode, "supervised")], folder, "shell", command=line)
    if mode == "off" and line in INTERPRETING | EVERYDAY_INTERPRETING:
        # Without the kernel sandbox a script could do anything: a person approves it.
        assert result.error is not None
        assert result.error.startswith("not run: shell needs a person's approval"), result.error
        return
    assert result.ok, f"[{mode}] {line!r}: {result.error}"
    assert result.output.startswith('<untrusted source="shell">\nexit code 0 ('), result.output
    assert not leaks(result.output, trust.canaries)


async def test_afterwards_nothing_a_probe_started_is_still_at_work(trust: Trust) -> None:
    """Last: what a detached process would do late (a marker, a file in the workspace)."""
    await asyncio.sleep(3)  # longer than the late writers among the probes wait
    late = [str(p) for p in trust.workspace.rglob("late-*")]
    markers = [str(p) for p in trust.outside.iterdir()]
    left = await asyncio.to_thread(survivors, trust.workspace)
    stop(left)
    assert not late and not markers and not left, (late, markers, left)


# -- a real pinclaw process, its inherited environment holding canaries ---------------------


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_a_real_pinclaw_keeps_its_inherited_secrets_from_commands(
    llm: FakeLLM, tmp_path: Path, case: tuple[str, str]
) -> None:
    """``pinclaw agent -m`` seals itself at start; no environment line shows what it inherited:
    neither the key the config names nor variables it knows nothing about."""
    mode, autonomy = case
    home = tmp_path / "home"
    canaries = {name: f"CANARY{secrets.token_hex(12)}" for name in (*ENV_CANARIES, "LLM_KEY")}
    extra = (
        'api_key = "${LLM_KEY}"\n[agent]\nmax_tool_iterations = 20\n'
        f'[security]\nautonomy = "{autonomy}"\nshell_sandbox = "{mode}"\n'
        "approval_timeout_s = 600\nshell_timeout_s = 15\n"
    )
    write_config(home, local_config(llm.url, extra))
    (home / ".pinclaw" / "workspace").mkdir(parents=True)
    find = "$(pgrep -o -f 'pinclaw agent')"
    values = {
        "daemonpid": find,
        "neighbourpid": find,
        "out": tmp_path / "pwned",
        "home": home,
        "data": home / ".pinclaw",
        "mark": 0,
    }
    lines = [p.line.format(**values) for p in ENVIRONMENT if not p.setup]
    batches = [lines[i : i + 12] for i in range(0, len(lines), 12)]
    llm.queue(
        *(CallTools([("shell", {"command": line}) for line in batch]) for batch in batches),
        Say("done"),
    )
    done = run(home, "agent", "-m", "show me the environment", env=canaries)
    assert done.returncode == 0, done.stderr
    shown = {
        message["tool_call_id"]: message["content"]
        for request in llm.requests
        for message in request.body.get("messages", [])
        if message.get("role") == "tool"
    }
    assert len(shown) == len(lines)
    found = {line: leaks(text, canaries) for line, text in zip(lines, shown.values(), strict=True)}
    assert not {line: names for line, names in found.items() if names}
    assert not leaks(done.stdout + done.stderr, canaries)
    assert not (tmp_path / "pwned").exists()
