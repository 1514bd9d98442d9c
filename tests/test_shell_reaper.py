"""Nothing a shell command starts outlives its call, however hard it tries to get away.

Each command goes through the real policy gate and the real ``shell`` tool,
running unasked, with the kernel sandbox (bubblewrap, which CI installs) and
without it (where ``tools.shell_reaper``, a subreaper, must do the job), and
leaves processes behind the ways programs detach: ``setsid``, a double fork
into a new session, ``nohup``, a Python daemon (fork, setsid, fork), a process
that ignores SIGTERM and one that keeps forking new detached children. Every
process of the call carries a marker in its environment (the leaves also in
their arguments); ``/proc`` is scanned for it after the call returns
normally, at its time limit, and when the calling task is cancelled, and when
the daemon itself is killed mid-call. Through the systemd helper
(``pinclaw sandbox-exec``) too.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.agent.tool_registry import ToolRegistry
from bot.config import LoadedConfig, parse_config
from bot.core.conversation import ToolCall
from bot.core.errors import ToolError
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext, ToolResult
from bot.security.audit import AuditLog
from bot.security.gate import PolicyGate
from bot.security.kit import SecurityKit, build_security
from tests.test_shell_sandbox import SocketActivation, activation
from tools.shell import build
from tools.shell_process import run_command

__all__ = ["activation"]  # the fixture of tests.test_shell_sandbox, used by name

ROOT = Path(__file__).resolve().parent.parent
MODES = pytest.mark.parametrize("mode", ["required", "off"], ids=["sandbox", "no-sandbox"])
MARK = "PINCLAW_REAPER_TEST"
WAIT_S = 20.0  # for something to appear or vanish; never an assertion about speed

# How each probe leaves processes behind, and the arguments its leaves carry.
PROBES: dict[str, tuple[str, tuple[str, ...]]] = {
    "setsid": ("setsid sleep 300.{t}1 &", ("300.{t}1",)),
    "double-fork": ("sh -c '(setsid sh -c \"sleep 300.{t}2 & exit\" &)'", ("300.{t}2",)),
    "nohup": ("nohup sleep 300.{t}3 &", ("300.{t}3",)),  # keeps the output pipe open
    "python-daemon": ("python3 daemonise.py daemon-{t}", ("daemon-{t}",)),
    "ignores-sigterm": (
        "setsid sh -c 'trap \"\" TERM; while :; do sleep 300.{t}5; done' stubborn-{t} &",
        ("stubborn-{t}", "300.{t}5"),
    ),
}
DAEMONISE = """\
import os, time

if os.fork():  # the classic daemon: fork, a new session, fork again, the parents gone
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
time.sleep(300)
"""
FORKER = (  # forks detached children until it is killed, so the tree grows while it is stopped
    "setsid sh -c 'while :; do (setsid sleep 300.{t}6 &); sleep 0.05; done' forker-{t} &",
    ("forker-{t}", "300.{t}6"),
)


@dataclass
class Line:
    """A command line built from probes: what it runs and how to find what it left."""

    text: str
    tag: str
    leaves: tuple[str, ...]


def line(probes: list[tuple[str, tuple[str, ...]]], then: str) -> Line:
    """The probes run one after the other, each process marked, then ``then``."""
    t = f"{secrets.randbelow(10**6):06d}"
    tag = f"reaper-{t}"
    text = f"export {MARK}={tag}; " + " ".join(
        p.format(t=t) + ("" if p.endswith("&") else ";") for p, _ in probes
    )
    leaves = tuple(leaf.format(t=t) for _, found in probes for leaf in found)
    return Line(f"{text} {then}", tag, leaves)


def marked(tag: str) -> list[tuple[int, list[str]]]:
    """Live processes (pid, argv) whose environment or arguments hold ``tag``; any namespace."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if stat.rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
            continue  # exited, waiting for its parent to collect it
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            environ = []
        if f"{MARK}={tag}".encode() in environ or any(tag.encode() in a for a in argv):
            found.append((int(entry), [a.decode(errors="replace") for a in argv if a]))
    return found


async def leaves_running(probe: Line) -> None:
    """Wait until every leaf of the line runs (each found by an exact argument)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        running = await asyncio.to_thread(marked, probe.tag)
        if all(any(leaf in argv for _, argv in running) for leaf in probe.leaves):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"not every leaf of {probe.leaves} ever ran: {running}")


async def none_left(tag: str) -> None:
    """Nothing of the call runs any more: asserted once, at once."""
    survivors = await asyncio.to_thread(marked, tag)
    assert survivors == [], f"processes outlived the call: {survivors}"


async def gone_eventually(tag: str) -> None:
    """Nothing of the call runs a while later (for stops that happen after the call)."""
    deadline = time.monotonic() + WAIT_S
    while await asyncio.to_thread(marked, tag):
        if time.monotonic() > deadline:
            await none_left(tag)
        await asyncio.sleep(0.05)


def make_gate(data: Path, mode: str) -> tuple[PolicyGate, SecurityKit]:
    """The policy gate around the shell tool, as the daemon builds it, letting commands
    run unasked: at full autonomy in the sandbox; without it (full autonomy needs the
    sandbox) the widest that runs unasked, supervised with ``auto_approve = ["shell"]``."""
    (data / "workspace").mkdir(parents=True, exist_ok=True)
    (data / "workspace" / "daemonise.py").write_text(DAEMONISE)
    unasked = {"autonomy": "full"} if mode != "off" else {"auto_approve": ["shell"]}
    raw: dict[str, Any] = {
        "provider": {"kind": "ollama", "model": "m"},
        "security": {
            **unasked,
            "shell_sandbox": mode,
            "shell_timeout_s": 30,
            "max_tool_calls_per_hour": 0,
        },
    }
    loaded = LoadedConfig(parse_config(raw, {}), data / "config.toml", data)
    kit = build_security(loaded)
    registry = ToolRegistry(build(loaded, kit), max_output_chars=100_000)
    audit = AuditLog(data / "audit.jsonl")
    return PolicyGate(registry, config=kit.config, audit=audit, redactor=kit.redactor), kit


@pytest.fixture
async def gates(tmp_path: Path) -> AsyncIterator[dict[str, PolicyGate]]:
    """A gate per sandbox mode, built on first use; their kits closed after the test."""
    made: dict[str, tuple[PolicyGate, SecurityKit]] = {}

    class Gates(dict[str, PolicyGate]):
        def __missing__(self, mode: str) -> PolicyGate:
            made[mode] = make_gate(tmp_path / mode, mode)
            self[mode] = made[mode][0]
            return self[mode]

    yield Gates()
    for _, kit in made.values():
        await kit.aclose()


def context(data: Path) -> ToolContext:
    return ToolContext(SessionKey("test", "reaper"), data / "workspace", ZoneInfo("UTC"))


async def shell(gate: PolicyGate, data: Path, command: str, **args: Any) -> ToolResult:
    call = ToolCall("reaper", "shell", {"command": command, **args})
    return await gate.execute(call, context(data))


# -- the call ends normally, at its time limit, or cancelled ------------------------------


@MODES
@pytest.mark.parametrize("probe", list(PROBES))
async def test_nothing_left_behind_outlives_a_finished_command(
    gates: dict[str, PolicyGate], tmp_path: Path, mode: str, probe: str
) -> None:
    go = tmp_path / mode / "workspace" / "go"
    command = line([PROBES[probe]], f"until [ -e {go} ]; do sleep 0.05; done; echo finished")
    call = asyncio.create_task(shell(gates[mode], tmp_path / mode, command.text))
    await leaves_running(command)
    await asyncio.to_thread(go.touch)
    result = await call
    assert result.ok, result.error
    assert "exit code 0 (" in result.output  # not held until the limit by the pipe
    assert "finished" in result.output
    await none_left(command.tag)


@MODES
async def test_at_the_time_limit_every_process_of_the_call_is_stopped(
    gates: dict[str, PolicyGate], tmp_path: Path, mode: str
) -> None:
    command = line([*PROBES.values(), FORKER], "sleep 300")
    call = asyncio.create_task(shell(gates[mode], tmp_path / mode, command.text, timeout_s=5))
    await leaves_running(command)
    result = await call
    assert not result.ok
    assert result.error is not None and "did not finish within 5 s" in result.error
    await none_left(command.tag)


@MODES
async def test_a_cancelled_call_stops_every_process_it_started(
    gates: dict[str, PolicyGate], tmp_path: Path, mode: str
) -> None:
    command = line([*PROBES.values(), FORKER], "sleep 300")
    call = asyncio.create_task(shell(gates[mode], tmp_path / mode, command.text))
    await leaves_running(command)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await none_left(command.tag)


async def test_a_detached_process_holding_the_output_is_stopped_and_the_call_returns(
    gates: dict[str, PolicyGate], tmp_path: Path
) -> None:
    command = line([("setsid sh -c 'echo from the background; exec sleep 300.{t}7' &", ())], "")
    result = await shell(gates["off"], tmp_path / "off", command.text + "echo from the shell")
    assert result.ok, result.error
    assert "exit code 0 (" in result.output
    assert "from the shell" in result.output
    await none_left(command.tag)


# -- the daemon dies mid-call ----------------------------------------------------------------

STAND_IN = """
import asyncio, sys
from pathlib import Path
from tests.test_shell_reaper import make_gate, shell

async def main() -> None:
    gate, _ = make_gate(Path(sys.argv[1]), sys.argv[2])
    await shell(gate, Path(sys.argv[1]), sys.argv[3])

asyncio.run(main())
"""


@MODES
async def test_when_the_daemon_dies_its_commands_die_with_it(tmp_path: Path, mode: str) -> None:
    command = line([*PROBES.values()], "sleep 300")
    data = str(tmp_path / mode)
    daemon = await asyncio.create_subprocess_exec(
        sys.executable, "-c", STAND_IN, data, mode, command.text, cwd=ROOT
    )
    try:
        await leaves_running(command)
    finally:
        daemon.send_signal(signal.SIGKILL)
        await daemon.wait()
    await gone_eventually(command.tag)


# -- under systemd: through pinclaw-sandbox.socket -------------------------------------------


@pytest.mark.parametrize("ending", ["finished", "time limit", "cancelled"])
async def test_through_the_systemd_helper_nothing_outlives_the_call(
    activation: SocketActivation, gates: dict[str, PolicyGate], tmp_path: Path, ending: str
) -> None:
    go = tmp_path / "required" / "workspace" / "go"
    then = f"until [ -e {go} ]; do sleep 0.05; done" if ending == "finished" else "sleep 300"
    command = line([*PROBES.values()], then)
    args = {"timeout_s": 5} if ending == "time limit" else {}
    call = asyncio.create_task(
        shell(gates["required"], tmp_path / "required", command.text, **args)
    )
    await leaves_running(command)
    if ending == "finished":
        await asyncio.to_thread(go.touch)
    elif ending == "cancelled":
        call.cancel()
    try:
        result = await call
    except asyncio.CancelledError:
        assert ending == "cancelled"
    else:
        assert result.ok == (ending == "finished"), result.error
    assert activation.connections >= 2  # the check at start, then the command
    # The helper stops the command when the daemon hangs up, after the call returned.
    await gone_eventually(command.tag)


# -- the supervisor itself ------------------------------------------------------------------


async def supervised(command: str, env: dict[str, str], tmp_path: Path) -> str:
    outcome = await run_command(
        ["/bin/sh", "-c", command], cwd=tmp_path, env=env, limit_s=30, max_bytes=10_000
    )
    return outcome.render()


async def test_under_the_supervisor_the_status_and_environment_are_the_commands(
    tmp_path: Path,
) -> None:
    # Python coerces a C locale by setting LC_CTYPE in its own environment: not here.
    env = {"PATH": "/usr/bin:/bin", "LANG": "C", "ODD": "a=b\tc"}
    listed = await supervised("env; exit 3", env, tmp_path)
    assert listed.startswith("exit code 3 (")
    lines = set(listed.splitlines()[1:])
    assert lines - {f"PWD={tmp_path}"} == {"PATH=/usr/bin:/bin", "LANG=C", "ODD=a=b\tc"}
    killed = await supervised("echo before; kill -TERM $$", env, tmp_path)
    assert killed.startswith("killed by signal 15 after")
    assert "before" in killed
    quiet = await supervised("read line; echo read=$?", env, tmp_path)  # no input
    assert quiet.splitlines()[1:] == ["read=1"]
    # No signal left ignored (Python ignores SIGPIPE; posix_spawn two of glibc's own).
    ignored = await supervised("grep SigIgn /proc/self/status; yes | head -c 2", env, tmp_path)
    assert ignored.splitlines()[1:] == ["SigIgn:\t0000000000000000", "y"]


async def test_a_program_that_cannot_start_is_an_error_for_the_model(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="the command could not be started: No such file"):
        await run_command(
            [str(tmp_path / "no-such-program")], cwd=tmp_path, env={}, limit_s=30, max_bytes=100
        )
