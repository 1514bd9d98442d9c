"""PinClaw under systemd: sd_notify, the watchdog, the unit file and ``pinclaw service``.

Notifications go to a real ``AF_UNIX`` datagram socket the test reads, as
systemd's would. The unit is checked by the real ``systemd-analyze`` (verify
must print nothing; the security score must stay at or below 2.0). The end to
end test runs ``pinclaw run`` against the fake Telegram, with the kernel
refusing writable-executable memory where it can (``PR_SET_MDWE``, Linux 6.3+),
as the unit's ``MemoryDenyWriteExecute=`` does. ``pinclaw service`` runs with
its unit folder in ``tmp_path`` and ``$PINCLAW_SYSTEMCTL`` pointing at a fake
(or at nothing), so no real systemd is ever touched.
"""

from __future__ import annotations

import asyncio
import ctypes
import grp
import os
import pwd
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.cli.main import main
from bot.cli.service_units import HELPER, SOCKET, UNIT, render_units
from bot.core.channel import ChannelStatus
from bot.daemon import systemd
from tests.cli_helpers import PINCLAW, local_config, one_line, run, write_config
from tests.daemon_harness import DaemonProcess, telegram_run_config
from tests.fake_llm import FakeLLM
from tests.fake_telegram import FakeTelegram

ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")
PR_SET_MDWE, PR_GET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 65, 66, 1


class NotifySocket:
    """A bound datagram socket standing in for systemd's; collects what arrives."""

    def __init__(self, address: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(address)
        self.messages: list[str] = []

    def wait_for(self, check: Callable[[list[str]], bool], timeout: float = 20.0) -> list[str]:
        """Receive until ``check(messages)`` holds; returns every message so far."""
        deadline = time.monotonic() + timeout
        while not check(self.messages):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"systemd was told only {self.messages}")
            self.sock.settimeout(left)
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except TimeoutError:
                continue
        return self.messages

    def drain(self) -> list[str]:
        """Take what is queued without waiting (the sender may be gone)."""
        self.sock.setblocking(False)
        while True:
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except BlockingIOError:
                return self.messages


def count(messages: list[str], line: str) -> int:
    return sum(line in m.splitlines() for m in messages)


@pytest.fixture
def notify_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[NotifySocket]:
    path = tmp_path / "notify"
    receiver = NotifySocket(str(path))
    monkeypatch.setenv("NOTIFY_SOCKET", str(path))
    yield receiver
    receiver.sock.close()


# -- sd_notify and the watchdog ---------------------------------------------------------


def test_notify_sends_one_datagram(notify_socket: NotifySocket) -> None:
    assert systemd.notify("READY=1\nSTATUS=telegram connected")
    assert notify_socket.wait_for(lambda m: len(m) == 1) == ["READY=1\nSTATUS=telegram connected"]


def test_notify_reaches_an_abstract_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"pinclaw-test-{uuid.uuid4().hex}"
    receiver = NotifySocket("\0" + name)
    monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
    try:
        assert systemd.notify("WATCHDOG=1")
        assert receiver.wait_for(lambda m: len(m) == 1) == ["WATCHDOG=1"]
    finally:
        receiver.sock.close()


@pytest.mark.parametrize("value", [None, "", "relative/socket", "vsock:2:1234", "/no/such/socket"])
def test_notify_outside_systemd_is_false_and_quiet(
    value: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if value is None:
        monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    else:
        monkeypatch.setenv("NOTIFY_SOCKET", value)
    assert systemd.notify("READY=1") is False


@pytest.mark.parametrize(
    ("usec", "pid", "interval"),
    [
        ("400000", None, 0.2),
        ("60000000", "self", 30.0),
        ("60000000", "1", None),  # meant for another process
        (None, None, None),
        ("0", None, None),
        ("soon", None, None),
    ],
)
def test_watchdog_interval_is_half_of_watchdog_usec(
    usec: str | None, pid: str | None, interval: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in (("WATCHDOG_USEC", usec), ("WATCHDOG_PID", pid)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, str(os.getpid()) if value == "self" else value)
    assert systemd.watchdog_interval() == interval


async def test_watchdog_pings_and_reports_status_changes(notify_socket: NotifySocket) -> None:
    state = ["telegram starting"]
    task = asyncio.create_task(systemd.watchdog(0.01, lambda: state[0]))
    await asyncio.to_thread(notify_socket.wait_for, lambda m: len(m) >= 3)
    state[0] = "telegram connected"
    await asyncio.to_thread(
        notify_socket.wait_for, lambda m: count(m, "STATUS=telegram connected") > 0
    )
    task.cancel()
    messages = notify_socket.messages
    assert all(m.startswith("WATCHDOG=1") for m in messages)
    assert count(messages, "STATUS=telegram starting") == 1
    assert messages[0] == "WATCHDOG=1\nSTATUS=telegram starting"


async def test_ready_waits_for_every_channel_and_gives_up_in_time(
    notify_socket: NotifySocket, caplog: pytest.LogCaptureFixture
) -> None:
    telegram, slack = ChannelStatus("telegram"), ChannelStatus("slack")
    asyncio.get_running_loop().call_later(0.05, telegram.connected, "as @bot")
    assert not await systemd.ready_when_connected([telegram, slack], timeout_s=0.3)
    assert notify_socket.drain() == ["READY=1"]
    assert "not connected after 0 s: slack (starting)" in caplog.text
    slack.connected("")
    status = systemd.status_text([telegram, slack], jobs=1)
    assert await systemd.ready_when_connected([telegram, slack], lambda: status, timeout_s=5)
    assert notify_socket.drain()[-1] == "READY=1\nSTATUS=telegram connected, slack connected, 1 job"


# -- the unit file ----------------------------------------------------------------------


def rendered(tmp_path: Path, *, user_scope: bool, hardware: bool = True, name: str = UNIT) -> Path:
    """The templates rendered for a Pi's usual layout, with this venv's ``pinclaw``;
    the path of unit ``name``."""
    values: dict[str, str | None] = {
        "pinclaw": str(PINCLAW),
        "config_path": "/home/pi/.pinclaw/config.toml",
        "env_file": "/home/pi/.pinclaw/pinclaw.env",
        "data_dir": "/home/pi/.pinclaw",
        "user": "pi",
        "group": "pi",
        "device_groups": "gpio i2c dialout",
        "wanted_by": "default.target" if user_scope else "multi-user.target",
        "private_devices": None if hardware else "yes",
    }
    folder = tmp_path / f"{'user' if user_scope else 'system'}-{'hw' if hardware else 'nohw'}"
    folder.mkdir(exist_ok=True)
    for unit, text in render_units(values, user_scope=user_scope).items():
        (folder / unit).write_text(text)
    return folder / name


def analyze(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    assert ANALYZE is not None
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path), "SYSTEMD_LOG_COLOR": "0"}
    return subprocess.run(
        [ANALYZE, *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def exposure(output: str) -> float:
    match = re.search(r"Overall exposure level for pinclaw\.service: (\d+\.\d+)", output)
    assert match, output
    return float(match.group(1))


def test_the_templates_render_both_scopes(tmp_path: Path) -> None:
    system = rendered(tmp_path, user_scope=False).read_text()
    user = rendered(tmp_path, user_scope=True).read_text()
    for unit in (system, user):
        assert "{" not in unit.replace("${NAME}", "")
        assert f"ExecStart={PINCLAW} run\n" in unit
        assert "Type=notify\nNotifyAccess=main\n" in unit
        assert "ReadWritePaths=/home/pi/.pinclaw\nPrivateTmp=yes\n" in unit
        assert "WorkingDirectory=/home/pi/.pinclaw\n" in unit
        assert "EnvironmentFile=-/home/pi/.pinclaw/pinclaw.env\n" in unit
        assert "\n\n\n" not in unit
    assert "User=pi\nGroup=pi\nSupplementaryGroups=gpio i2c dialout\n" in system
    assert "DeviceAllow=char-gpiochip rw\n" in system and "PrivateUsers" not in system
    assert "WantedBy=multi-user.target" in system
    for line in ("User=", "Group=", "SupplementaryGroups=", "DeviceAllow=", "Wants=", "modprobe"):
        assert line not in user
    assert "PrivateUsers=yes\n" in user and "WantedBy=default.target" in user
    for unit in (system, user):
        assert "Environment=PINCLAW_SANDBOX_SOCKET=%t/pinclaw-sandbox.sock\n" in unit
        assert "RestrictNamespaces=yes\n" in unit and "PrivateDevices" not in unit
    quiet = rendered(tmp_path, user_scope=True, hardware=False).read_text()
    assert "PrivateDevices=yes\n" in quiet
    socket_unit = rendered(tmp_path, user_scope=False, name=SOCKET).read_text()
    assert "ListenStream=%t/pinclaw-sandbox.sock\nSocketUser=pi\nSocketGroup=pi\n" in socket_unit
    assert "SocketUser" not in rendered(tmp_path, user_scope=True, name=SOCKET).read_text()
    helper = rendered(tmp_path, user_scope=False, name=HELPER).read_text()
    assert f"ExecStart={PINCLAW} sandbox-exec\n" in helper
    assert "RestrictNamespaces=user mnt pid net ipc uts cgroup\n" in helper


def score(unit: Path, tmp_path: Path) -> float:
    security = analyze("security", "--offline=true", str(unit), tmp_path=tmp_path)
    assert security.returncode == 0, security.stderr
    return exposure(security.stdout)


@needs_analyze
@pytest.mark.parametrize("name", [UNIT, SOCKET, HELPER])
@pytest.mark.parametrize("user_scope", [False, True], ids=["system", "user"])
def test_every_unit_verifies_cleanly(tmp_path: Path, name: str, user_scope: bool) -> None:
    unit = rendered(tmp_path, user_scope=user_scope, name=name)
    scope = ["--user"] if user_scope else []
    verify = analyze(*scope, "verify", "--man=no", str(unit), tmp_path=tmp_path)
    assert (verify.returncode, verify.stderr, verify.stdout) == (0, "", "")


@needs_analyze
def test_the_daemon_units_score_at_most_2(tmp_path: Path) -> None:
    """The daemon's units stay tight (no namespaces: the sandbox is the helper's job).

    The user unit scores 2.1 when the config names GPIO, I2C or serial devices:
    a user manager can neither hand out single devices (DeviceAllow=) nor run
    the service as a named user, so devices mean PrivateDevices= stays off."""
    assert score(rendered(tmp_path, user_scope=False), tmp_path) <= 2.0
    assert score(rendered(tmp_path, user_scope=False, hardware=False), tmp_path) <= 2.0
    assert score(rendered(tmp_path, user_scope=True, hardware=False), tmp_path) <= 2.0
    assert score(rendered(tmp_path, user_scope=True), tmp_path) <= 2.1


# -- pinclaw run under systemd -----------------------------------------------------------


def mdwe_supported() -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(PR_GET_MDWE, 0, 0, 0, 0)) >= 0


def refuse_write_execute(folder: Path) -> dict[str, str]:
    """Environment making a Python refuse W+X memory from its first line (or not start)."""
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(
        "import ctypes\n"
        f"if ctypes.CDLL(None).prctl({PR_SET_MDWE}, {PR_MDWE_REFUSE_EXEC_GAIN}, 0, 0, 0):\n"
        "    raise SystemExit('cannot refuse writable-executable memory')\n"
    )
    return {"PYTHONPATH": str(folder)}


def test_pinclaw_run_is_ready_once_connected_pings_the_watchdog_and_says_stopping(
    tmp_path: Path, llm: FakeLLM
) -> None:
    receiver = NotifySocket(str(tmp_path / "notify"))
    env = {"NOTIFY_SOCKET": str(tmp_path / "notify"), "WATCHDOG_USEC": "400000"}
    if mdwe_supported():
        env |= refuse_write_execute(tmp_path / "mdwe")
    with FakeTelegram.running() as telegram:
        telegram.stall_polls(True)  # Telegram does not answer yet: the channel is not up
        config = telegram_run_config(llm, telegram, owner=7001)
        daemon = DaemonProcess(tmp_path / "home", config, env).start()
        try:
            early = receiver.wait_for(lambda m: count(m, "WATCHDOG=1") >= 2)
            assert count(early, "READY=1") == 0
            telegram.stall_polls(False)
            receiver.wait_for(lambda m: count(m, "READY=1") == 1)
            assert any(call.ok for call in telegram.calls("getUpdates"))
            daemon.wait_log("telegram connected as @pinclaw_bot")
            seen = len(receiver.messages)
            receiver.wait_for(lambda m: count(m[seen:], "WATCHDOG=1") >= 2)
        finally:
            code = daemon.terminate()
        messages = receiver.drain()
    receiver.sock.close()
    assert code == 0, daemon.log()
    [ready] = [m for m in messages if "READY=1" in m.splitlines()]
    assert "STATUS=telegram connected, 0 jobs" in ready.splitlines()
    [stopping] = [m for m in messages if "STOPPING=1" in m.splitlines()]
    assert messages.index(stopping) > messages.index(ready)
    assert "PinClaw stopped" in daemon.log()


@pytest.mark.skipif(not mdwe_supported(), reason="the kernel has no PR_SET_MDWE (Linux < 6.3)")
def test_the_libraries_need_no_writable_code(tmp_path: Path) -> None:
    """What ``pinclaw run`` may load beyond the end to end test's path, under the same rule."""
    probe = (
        "import channels.discord.channel, channels.slack.channel, channels.telegram.channel\n"
        "import gpiozero, serial, smbus2\n"
        "import numpy, sqlite3, ssl\n"
        "a = numpy.random.rand(64, 64)\n"
        "assert (a @ a.T).shape == (64, 64)\n"
        "sqlite3.connect(':memory:').execute('select 1')\n"
        "ssl.create_default_context()\n"
        "import mmap\n"
        "try:\n"
        "    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
        "except PermissionError:\n"
        "    pass  # refused, as it should be\n"
        "else:\n"
        "    raise SystemExit('writable-executable memory was not refused')\n"
    )
    env = {**os.environ, **refuse_write_execute(tmp_path / "mdwe")}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")


# -- pinclaw service ---------------------------------------------------------------------


@pytest.fixture
def configured(home: Path) -> Path:
    """A valid config in the throw-away HOME; install does not contact the model."""
    return write_config(home, local_config("http://127.0.0.1:9"))


def fake_systemctl(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A systemctl that records its arguments and succeeds."""
    calls = tmp_path / "systemctl-calls"
    script = tmp_path / "systemctl"
    script.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    script.chmod(0o755)
    return {"PINCLAW_SYSTEMCTL": str(script)}, calls


def line_starting(text: str, start: str) -> str:
    """The one report line whose text (after its mark) starts with ``start``."""
    rows = [row for row in text.splitlines() if row.partition(" ")[2].startswith(start)]
    assert len(rows) == 1, text
    return rows[0]


def test_install_dry_run_prints_the_user_unit_and_writes_nothing(
    home: Path, configured: Path
) -> None:
    env = {"XDG_CONFIG_HOME": str(home / ".config")}
    done = run(home, "service", "install", "--user", "--dry-run", env=env)
    assert done.returncode == 0, done.stderr
    unit_path = home / ".config" / "systemd" / "user" / "pinclaw.service"
    assert done.stdout.startswith(f"# pinclaw service install --dry-run: would write {unit_path}")
    assert f"ExecStart={PINCLAW} run\n" in done.stdout
    assert f"Environment=PINCLAW_CONFIG={configured}\n" in done.stdout
    assert f"ReadWritePaths={home / '.pinclaw'}\n" in done.stdout
    assert "\nUser=" not in done.stdout
    assert "systemctl --user enable --now pinclaw-sandbox.socket pinclaw.service" in done.stdout
    for name in ("pinclaw-sandbox.socket", "pinclaw-sandbox@.service"):
        assert f"would write {unit_path.parent / name}\n" in done.stdout
    assert f"ExecStart={PINCLAW} sandbox-exec\n" in done.stdout
    assert not unit_path.exists() and not (home / ".pinclaw" / "pinclaw.env").exists()


def test_install_without_systemctl_writes_the_unit_and_says_what_to_run(
    tmp_path: Path, home: Path, configured: Path
) -> None:
    units = tmp_path / "units"
    env = {"PINCLAW_SYSTEMCTL": str(tmp_path / "no-systemctl")}
    done = run(home, "service", "install", "--user", "--unit-dir", str(units), env=env)
    assert done.returncode == 1
    missing = tmp_path / "no-systemctl"
    assert one_line(done.stderr) == (
        "pinclaw: the unit is written but not started: "
        f"could not run {missing} (No such file or directory); run by hand: "
        f"{missing} --user daemon-reload && "
        f"{missing} --user enable --now pinclaw-sandbox.socket pinclaw.service"
    )
    unit = (units / "pinclaw.service").read_text()
    assert f"ExecStart={PINCLAW} run\n" in unit and f"PINCLAW_CONFIG={configured}\n" in unit
    env_file = home / ".pinclaw" / "pinclaw.env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert f"Secrets go in {env_file} (created, mode 0600)." in done.stdout
    if ANALYZE is not None:
        verify = analyze(
            "--user", "verify", "--man=no", str(units / "pinclaw.service"), tmp_path=tmp_path
        )
        assert (verify.returncode, verify.stderr) == (0, "")


def test_install_status_uninstall_through_systemctl(
    tmp_path: Path, home: Path, configured: Path
) -> None:
    env, calls = fake_systemctl(tmp_path)
    units = ["--unit-dir", str(tmp_path / "units")]
    done = run(home, "service", "install", "--user", *units, env=env)
    assert done.returncode == 0, done.stderr
    assert "Follow its log with: journalctl --user -u pinclaw -f" in done.stdout
    status = run(home, "service", "status", "--user", *units, env=env)
    assert (status.returncode, status.stderr) == (0, "")
    unit = tmp_path / "units" / "pinclaw.service"
    assert status.stdout.splitlines()[0].startswith(
        f"! service: installed as a user service ({unit}), but not enabled"
    )  # as doctor says it: this systemctl answers nothing and made no enable links
    removed = run(home, "service", "uninstall", "--user", *units, env=env)
    assert (removed.returncode, removed.stderr) == (0, "")
    assert not list((tmp_path / "units").glob("pinclaw*"))
    assert (home / ".pinclaw" / "pinclaw.env").exists()  # secrets and data stay
    assert calls.read_text().splitlines() == [
        "--user daemon-reload",
        "--user enable --now pinclaw-sandbox.socket pinclaw.service",
        "--user is-enabled pinclaw.service",
        "--user status pinclaw.service --no-pager",
        "--user disable --now pinclaw.service pinclaw-sandbox.socket",
        "--user daemon-reload",
    ]
    again = run(home, "service", "uninstall", "--user", *units, env=env)
    assert again.returncode == 0 and again.stdout.startswith("Nothing to remove")


def test_a_system_unit_runs_as_the_account_with_its_device_groups(
    tmp_path: Path, home: Path
) -> None:
    account = pwd.getpwuid(os.getuid()).pw_name
    config = write_config(
        home, f'[general]\ndata_dir = "{home}/state"\n' + local_config("http://127.0.0.1:9")
    )
    units = tmp_path / "units"
    done = run(
        home, "service", "install", "--system", "--run-as", account, "--config", str(config),
        "--unit-dir", str(units), "--no-start",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    start = (
        "systemctl daemon-reload && systemctl enable --now pinclaw-sandbox.socket pinclaw.service"
    )
    assert done.stdout.rstrip().endswith(f"Not started. To start it: {start}")
    unit = (units / "pinclaw.service").read_text()
    assert f"\nUser={account}\nGroup=" in unit and "WantedBy=multi-user.target" in unit
    groups = [g for g in ("gpio", "i2c", "dialout") if g in {e.gr_name for e in grp.getgrall()}]
    assert (f"SupplementaryGroups={' '.join(groups)}\n" in unit) == bool(groups)
    assert f"ReadWritePaths={home}/state\n" in unit and "PrivateUsers" not in unit
    assert stat.S_IMODE((home / "state").stat().st_mode) == 0o700
    if ANALYZE is not None:
        verify = analyze("verify", "--man=no", str(units / "pinclaw.service"), tmp_path=tmp_path)
        assert (verify.returncode, verify.stderr, verify.stdout) == (0, "", "")


def test_status_when_not_installed_is_one_line(tmp_path: Path, home: Path) -> None:
    """Not installed is fine for doctor, and so for `service status`: the same line, 0."""
    done = run(home, "service", "status", "--user", "--unit-dir", str(tmp_path / "units"))
    assert (done.returncode, done.stderr) == (0, "")
    assert one_line(done.stdout) == (
        "– service: not installed (fine while you start `pinclaw run` yourself) "
        "— to start PinClaw at boot: pinclaw service install"
    )


@pytest.mark.parametrize(
    ("enabled", "active", "code", "said"),
    [
        ("enabled", "inactive", 0, "✓ {where}, enabled, stopped"),
        ("enabled", "active", 0, "✓ {where}, enabled, running"),
        ("disabled", "inactive", 0, "! {where}, but not enabled (disabled)"),
        ("enabled", "failed", 1, "✗ {where}, enabled, but it failed"),
    ],
)
def test_service_status_and_doctor_agree(
    tmp_path: Path, home: Path, configured: Path, enabled: str, active: str, code: int, said: str
) -> None:
    """Each state systemctl reports gets the same mark and words from both commands, and
    `service status` fails exactly where doctor does."""
    systemctl = tmp_path / "systemctl"
    systemctl.write_text(
        f'#!/bin/sh\ncase "$2" in is-enabled) echo {enabled};; is-active) echo {active};;\n'
        f'status) echo "pinclaw.service - PinClaw"; [ {active} = active ] || exit 3;; esac\n'
    )
    systemctl.chmod(0o755)
    env = {"PINCLAW_SYSTEMCTL": str(systemctl), "XDG_CONFIG_HOME": str(home / ".config")}
    units = home / ".config" / "systemd" / "user"
    installed = run(home, "service", "install", "--user", "--no-start", env=env)
    assert installed.returncode == 0, installed.stderr
    where = f"service: installed as a user service ({units / 'pinclaw.service'})"
    expected = said.format(where=where)
    status = run(home, "service", "status", env=env)
    assert (status.returncode, status.stderr) == (code, "")
    assert status.stdout.splitlines()[0].startswith(expected)
    assert "pinclaw.service - PinClaw" in status.stdout  # then systemctl's own account
    report = run(home, "doctor", env=env)
    assert line_starting(report.stdout, "service:").startswith(expected)


def test_secrets_count_only_from_the_env_file(tmp_path: Path, home: Path) -> None:
    write_config(home, local_config("http://127.0.0.1:9", 'api_key = "${LOCAL_KEY}"\n'))
    units = ["--unit-dir", str(tmp_path / "units")]
    shell_only = run(
        home, "service", "install", "--user", "--dry-run", *units, env={"LOCAL_KEY": "k"}
    )
    assert shell_only.returncode == 2
    env_file = home / ".pinclaw" / "pinclaw.env"
    assert one_line(shell_only.stderr).endswith(f"the service reads variables only from {env_file}")
    env_file.write_text("# secrets\nLOCAL_KEY='k'\n")
    assert run(home, "service", "install", "--user", "--dry-run", *units).returncode == 0


def test_a_system_install_without_root_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert main(["service", "install", "--system"]) == 1
    assert one_line(capsys.readouterr().err) == (
        f"pinclaw: the system service needs root: run `sudo {PINCLAW} service install --system`, "
        "or use --user for a service of your own"
    )


def test_the_service_command_needs_an_action(home: Path) -> None:
    done = run(home, "service")
    assert done.returncode == 2 and "ACTION" in done.stderr
