"""The shell tool through the registry, built the way the daemon builds it, running real /bin/sh.

Processes are checked in ``/proc`` (polled with a deadline, never a fixed sleep):
a timeout, the end of a command and a cancelled call must each leave nothing
running.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.agent.tool_registry import ToolRegistry
from bot.config import LoadedConfig, parse_config
from bot.core.conversation import ToolCall
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext, ToolResult
from bot.security.kit import build_security
from bot.security.shell.neutral import VARIABLES as neutral_variables
from bot.security.shell.neutral import git_variables
from tools.shell import build

MAX_BYTES = 64 * 1024


def make_registry(tmp_path: Path, max_chars: int = 1_000_000, **security: Any) -> ToolRegistry:
    raw = {"provider": {"kind": "ollama", "model": "m"}, "security": security}
    loaded = LoadedConfig(parse_config(raw, {}), tmp_path / "c.toml", tmp_path)
    return ToolRegistry(build(loaded, build_security(loaded)), max_output_chars=max_chars)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def ctx(workspace: Path) -> ToolContext:
    return ToolContext(SessionKey("test", "1"), workspace, ZoneInfo("UTC"))


@pytest.fixture
def registry(tmp_path: Path) -> ToolRegistry:
    return make_registry(
        tmp_path,
        shell_timeout_s=20,
        shell_max_output_bytes=MAX_BYTES,
        shell_env_passthrough=["PINCLAW_SHELL_TEST"],
    )


async def run(registry: ToolRegistry, ctx: ToolContext, command: str, **args: Any) -> ToolResult:
    return await registry.execute(ToolCall("1", "shell", {"command": command, **args}), ctx)


def gone(pid: int) -> bool:
    """Whether ``pid`` is no longer running (a zombie waiting for its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # ESRCH: it exited while being read
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


async def wait_until_gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        await asyncio.sleep(0.02)
    return gone(pid)


def test_the_tool_is_declared_as_a_shell_tool(registry: ToolRegistry, ctx: ToolContext) -> None:
    shell = registry.get("shell")
    assert shell is not None
    assert shell.effect == "shell"
    assert shell.untrusted_output
    assert list(shell.spec().parameters["properties"]) == ["command", "timeout_s"]
    values = shell.validate({"command": "ls && rm -rf ~"})
    assert shell.assess(ctx, values).risk == "high"
    assert shell.assess(ctx, shell.validate({"command": "ls -la"})).risk == "low"
    assert shell.assess(ctx, shell.validate({"command": "cat ~/.ssh/id_rsa"})).forbidden


async def test_runs_in_the_workspace_with_the_exit_code_first(
    registry: ToolRegistry, ctx: ToolContext, workspace: Path
) -> None:
    result = await run(registry, ctx, "pwd; echo out; echo err >&2")
    assert result.ok, result.error
    first, *rest = result.output.splitlines()
    assert first.startswith("exit code 0 (")
    assert rest == [await asyncio.to_thread(os.path.realpath, workspace), "out", "err"]


async def test_a_failing_command_is_an_ordinary_result(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    failed = await run(registry, ctx, "echo about to fail; exit 3")
    assert failed.ok
    assert failed.output.startswith("exit code 3 (")
    assert "about to fail" in failed.output
    missing = await run(registry, ctx, "no-such-command-here")
    assert missing.ok
    assert missing.output.startswith("exit code 127 (")
    assert "not found" in missing.output
    quiet = await run(registry, ctx, "true")
    assert quiet.output.endswith("\n(no output)")


async def test_the_environment_is_scrubbed(
    registry: ToolRegistry, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:should-not-leak")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "should-not-leak")
    monkeypatch.setenv("PINCLAW_SHELL_TEST", "passed through")
    monkeypatch.setenv("LC_TIME", "C")
    result = await run(registry, ctx, "env")
    assert result.ok
    names = {line.split("=", 1)[0] for line in result.output.splitlines()[1:] if "=" in line}
    assert "should-not-leak" not in result.output
    assert {"OPENAI_API_KEY", "TELEGRAM_BOT_TOKEN", "AWS_SECRET_ACCESS_KEY"}.isdisjoint(names)
    assert "PINCLAW_SHELL_TEST=passed through" in result.output
    assert {"PATH", "LC_TIME"} <= names
    allowed = {"PATH", "HOME", "LANG", "TERM", "TZ", "USER", "TMPDIR", "PINCLAW_SHELL_TEST"}
    allowed |= set(neutral_variables) | set(git_variables())  # settings that run programs: off
    assert all(n in allowed or n.startswith("LC_") or n in ("PWD", "SHLVL", "_") for n in names)


async def test_stdin_is_closed(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run(registry, ctx, "cat; read line; echo read=$?")
    assert result.ok
    assert result.output.splitlines()[1:] == ["read=1"]


def pids_running(marker: str) -> list[int]:
    """Host pids of live processes whose command line holds ``marker`` (any namespace)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline.split(b"\0")[-2:] and not gone(int(entry)):
            found.append(int(entry))
    return found


async def wait_for_pids(marker: str, within_s: float = 10.0) -> list[int]:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if pids := await asyncio.to_thread(pids_running, marker):
            return pids
        await asyncio.sleep(0.02)
    raise AssertionError(f"no process with {marker!r} ever ran")


SANDBOX_MODES = pytest.mark.parametrize("mode", ["auto", "off"], ids=["sandbox", "no-sandbox"])


@SANDBOX_MODES
async def test_a_timeout_stops_the_whole_process_group(
    tmp_path: Path, ctx: ToolContext, mode: str
) -> None:
    registry = make_registry(tmp_path, shell_timeout_s=20, shell_sandbox=mode)
    # A grandchild that ignores SIGTERM too, so the SIGKILL that follows is needed.
    command = (
        "sh -c 'trap \"\" TERM; while :; do sleep 1; done' stubborn-7f3a & "
        "sleep 300.1731 & echo started; wait"
    )
    started = time.monotonic()
    call = asyncio.create_task(run(registry, ctx, command, timeout_s=3))
    pids = await wait_for_pids("stubborn-7f3a") + await wait_for_pids("300.1731")
    result = await call
    assert time.monotonic() - started < 12
    assert not result.ok
    assert result.error is not None
    assert "did not finish within 3 s" in result.error
    assert result.output.startswith("stopped after")
    assert "started" in result.output
    for pid in pids:
        assert await wait_until_gone(pid), f"process {pid} survived the timeout"


async def test_the_configured_limit_caps_a_longer_requested_timeout(
    tmp_path: Path, ctx: ToolContext
) -> None:
    registry = make_registry(tmp_path, shell_timeout_s=1)
    started = time.monotonic()
    result = await run(registry, ctx, "sleep 30", timeout_s=600)
    assert not result.ok
    assert time.monotonic() - started < 8


@SANDBOX_MODES
async def test_background_processes_do_not_outlive_the_command(
    tmp_path: Path, ctx: ToolContext, mode: str
) -> None:
    registry = make_registry(tmp_path, shell_timeout_s=20, shell_sandbox=mode)
    call = asyncio.create_task(run(registry, ctx, "sleep 300.2417 & echo left it; sleep 0.5"))
    pids = await wait_for_pids("300.2417")
    result = await call
    assert result.ok
    assert result.output.startswith("exit code 0")
    for pid in pids:
        assert await wait_until_gone(pid)


@SANDBOX_MODES
async def test_a_cancelled_call_stops_the_process_group(
    tmp_path: Path, ctx: ToolContext, mode: str
) -> None:
    registry = make_registry(tmp_path, shell_timeout_s=20, shell_sandbox=mode)
    call = asyncio.create_task(run(registry, ctx, "sleep 300.3517 & wait"))
    pids = await wait_for_pids("300.3517")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    for pid in pids:
        assert await wait_until_gone(pid)


async def test_oversized_output_is_capped_and_the_drop_counted(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    size = 5 * 1024 * 1024
    result = await run(registry, ctx, f"yes abcdefg | head -c {size}; echo; echo THE END")
    assert result.ok
    first = result.output.splitlines()[0]
    dropped = size + len("\nTHE END\n") - MAX_BYTES
    assert first.startswith("exit code 0 (")
    assert f"output was {size + 9} bytes, {dropped} bytes in the middle were dropped" in first
    assert f"…[{dropped} bytes of output dropped here]…" in result.output
    assert result.output.rstrip().endswith("THE END")
    assert len(result.output) < MAX_BYTES + 500


async def test_the_status_line_survives_the_registry_cut(tmp_path: Path, ctx: ToolContext) -> None:
    registry = make_registry(tmp_path, max_chars=1000)
    result = await run(registry, ctx, "seq 1 100000; exit 4")
    assert result.output.startswith("exit code 4 (")
    assert "characters cut" in result.output
    assert result.output.rstrip().endswith("100000")


async def test_binary_output_does_not_break_anything(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    result = await run(registry, ctx, "printf 'a\\000b\\377\\376c\\n'; head -c 4096 /dev/urandom")
    assert result.ok
    assert result.output.splitlines()[1].startswith("a\x00b\ufffd\ufffdc")


async def test_a_forbidden_command_is_refused_even_without_the_gate(
    registry: ToolRegistry, ctx: ToolContext, workspace: Path
) -> None:
    result = await run(registry, ctx, "cat ~/.ssh/id_rsa > stolen.txt")
    assert not result.ok
    assert result.error is not None
    assert "forbidden location" in result.error
    assert not await asyncio.to_thread((workspace / "stolen.txt").exists)
