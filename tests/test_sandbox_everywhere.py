"""A default install: `full` needs the sandbox, every surface says when there is none,
inherited secrets are scrubbed whatever their name, hard links cannot reach forbidden files.

"Without bubblewrap" is a ``PATH`` that holds no ``bwrap`` (only a shell), as on a
fresh machine where the package was never installed; the real installed
``pinclaw`` command runs with it.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from bot.cli.status import describe
from bot.security.shell.state import ShellState
from tests.browser import panel_daemon
from tests.cli_helpers import PINCLAW, local_config, one_line, run, write_config
from tests.daemon_harness import DaemonProcess
from tests.fake_llm import FakeLLM, Say
from tests.test_file_tools import Setup, setup


@pytest.fixture
def no_bwrap(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH finds a shell but no bubblewrap."""
    folder = tmp_path / "bin-without-bwrap"
    folder.mkdir()
    for program in ("sh", "env", "cat"):
        os.symlink(f"/bin/{program}" if program != "env" else "/usr/bin/env", folder / program)
    return {"PATH": str(folder)}


FULL = '[security]\nautonomy = "full"\n'


@pytest.mark.parametrize("command", [["agent", "-m", "hi"], ["chat"], ["run"]])
def test_full_autonomy_without_a_sandbox_refuses_to_start_naming_both_keys(
    home: Path, llm: FakeLLM, no_bwrap: dict[str, str], command: list[str]
) -> None:
    write_config(home, local_config(llm.url, FULL))
    done = run(home, *command, env=no_bwrap)
    assert done.returncode == 2, done.stderr
    line = one_line(done.stderr)
    assert "security.autonomy" in line and "security.shell_sandbox" in line
    assert "bubblewrap is not installed" in line
    assert llm.requests == []


def test_full_autonomy_with_the_sandbox_turned_off_refuses_too(home: Path, llm: FakeLLM) -> None:
    write_config(home, local_config(llm.url, FULL + 'shell_sandbox = "off"\n'))
    done = run(home, "agent", "-m", "hi")
    assert done.returncode == 2
    line = one_line(done.stderr)
    assert 'security.shell_sandbox is "off"' in line and "security.autonomy" in line


def test_full_autonomy_without_the_shell_tool_needs_no_sandbox(
    home: Path, llm: FakeLLM, no_bwrap: dict[str, str]
) -> None:
    write_config(home, local_config(llm.url, FULL + '[tools]\ndisabled = ["shell"]\n'))
    llm.queue(Say("Hello."))
    done = run(home, "agent", "-m", "hi", env=no_bwrap)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello.\n"


def test_without_bubblewrap_doctor_onboarding_and_the_log_say_so(
    home: Path, llm: FakeLLM, no_bwrap: dict[str, str]
) -> None:
    write_config(home, local_config(llm.url))
    doctor = run(home, "doctor", env=no_bwrap)
    line = next(x for x in doctor.stdout.splitlines() if "shell sandbox" in x)
    assert "WITHOUT a sandbox" in line and "bubblewrap is not installed" in line
    assert "sudo apt install bubblewrap" in doctor.stdout
    onboard = run(home, "onboard", env=no_bwrap)
    assert onboard.returncode == 0
    assert "WARNING: shell commands run WITHOUT a sandbox" in onboard.stdout
    assert "install bubblewrap: sudo apt install bubblewrap" in onboard.stdout
    daemon = DaemonProcess(home, local_config(llm.url), env=no_bwrap).start()
    try:
        daemon.wait_log("running with no chat channels")
    finally:
        assert daemon.terminate() == 0
    first = daemon.lines[0]
    assert "WARNING" in first and "shell commands run WITHOUT a sandbox" in first, daemon.log()


def test_with_bubblewrap_the_log_says_where_commands_run(home: Path, llm: FakeLLM) -> None:
    daemon = DaemonProcess(home, local_config(llm.url)).start()
    try:
        daemon.wait_log("running with no chat channels")
    finally:
        assert daemon.terminate() == 0
    assert "shell commands run in the kernel sandbox: bubblewrap" in daemon.lines[0]


def test_status_says_plainly_when_commands_run_without_a_sandbox() -> None:
    report: dict[str, Any] = {"version": "x", "uptime_s": 5, "pid": 1, "ok": True}
    bare = ShellState("unsandboxed", "bubblewrap is not installed (the package is `bubblewrap`)")
    text = describe({**report, "shell": bare.as_dict()})
    assert "Shell: shell commands run WITHOUT a sandbox (bubblewrap is not installed" in text
    assert "install bubblewrap: sudo apt install bubblewrap" in text
    boxed = ShellState("sandboxed", "bubblewrap (/usr/bin/bwrap)").as_dict()
    assert "Shell: shell commands run in the sandbox: bubblewrap" in describe(
        {**report, "shell": boxed}
    )


def test_secrets_inherited_under_any_name_are_gone_from_the_process(
    home: Path, llm: FakeLLM
) -> None:
    """While `pinclaw chat` waits for input, its /proc/PID/environ holds no inherited secret."""
    write_config(home, local_config(llm.url, '[security]\nshell_env_passthrough = ["KEEP_ME"]\n'))
    canary = f"CANARY{secrets.token_hex(12)}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PINCLAW_")},
        "HOME": str(home),
        "AWS_SECRET_ACCESS_KEY": canary,
        "SOME_UNRELATED_TOKEN": canary,
        "KEEP_ME": "kept",
        "LC_TIME": "C",
    }
    proc = subprocess.Popen(
        [str(PINCLAW), "chat"], env=env, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # Sealing happens once the config is read; then the chat waits for input.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            environ = Path(f"/proc/{proc.pid}/environ").read_bytes()
            if canary.encode() not in environ:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        assert canary.encode() not in environ
        assert b"AWS_SECRET_ACCESS_KEY" not in environ and b"SOME_UNRELATED_TOKEN" not in environ
        entries = dict(e.split(b"=", 1) for e in environ.split(b"\0") if b"=" in e)
        assert entries[b"HOME"] == str(home).encode()
        assert entries[b"KEEP_ME"] == b"kept" and entries[b"LC_TIME"] == b"C"
    finally:
        proc.kill()
        proc.communicate()


async def test_a_hard_link_to_a_forbidden_file_is_refused_by_every_file_tool(
    setup: Setup, tmp_path: Path
) -> None:
    key = tmp_path / "home" / ".ssh" / "id_rsa"
    key.write_text("KEY-topsecret\n")
    os.link(key, setup.workspace / "innocent.txt")
    (setup.workspace / "mine.txt").write_text("mine\n")
    os.link(setup.workspace / "mine.txt", setup.workspace / "mine-too.txt")
    for tool, args in (
        ("file_read", {"path": "innocent.txt"}),
        ("content_search", {"pattern": "tops.cret"}),
        ("file_edit", {"path": "innocent.txt", "old_text": "KEY", "new_text": "x"}),
    ):
        result = await setup.call(tool, **args)
        assert "topsecret" not in result.output + (result.error or ""), tool
        if tool != "content_search":
            assert result.error is not None and "hard link" in result.error, result
    assert key.read_text() == "KEY-topsecret\n"
    # An ordinary second name inside the workspace is fine.
    assert "mine" in await setup.ok("file_read", path="mine-too.txt")


__all__ = ["setup"]  # the fixture from tests.test_file_tools, used by name


async def test_the_panel_overview_says_when_commands_run_without_a_sandbox(
    tmp_path: Path, llm: FakeLLM
) -> None:
    tables = {"security": {"shell_sandbox": "off"}}
    async with panel_daemon(tmp_path, llm, tables=tables) as site, site.client() as client:
        await site.logged_in(client)
        page = (await client.get("/")).text
    assert 'id="shell-unsandboxed"' in page
    assert "Shell commands run WITHOUT a sandbox" in page and "sudo apt install bubblewrap" in page


async def test_the_panel_overview_shows_the_sandbox_in_use(tmp_path: Path, llm: FakeLLM) -> None:
    async with panel_daemon(tmp_path, llm) as site, site.client() as client:
        await site.logged_in(client)
        page = (await client.get("/")).text
    assert 'id="shell-unsandboxed"' not in page
    assert "in the sandbox (bubblewrap" in page
