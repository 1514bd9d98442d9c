"""The kernel sandbox, the network reading of a command line, and the daemon's sealed secrets.

The sandbox tests run real bubblewrap (CI installs it); "missing" is a PATH
without it. The secrets tests run a real Python process and read its
``/proc/PID/environ`` from outside, as another process of the same user would.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

import tools.shell
from bot.agent.tool_registry import ToolRegistry
from bot.config import LoadedConfig, load_config, parse_config, with_credentials
from bot.core.conversation import ToolCall
from bot.core.errors import ConfigError
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext
from bot.security.kit import build_security
from bot.security.net.addresses import Allowlist
from bot.security.sandbox.bwrap import SandboxLayout, find_sandbox
from bot.security.sandbox.wire import SOCKET_ENV, SandboxUnavailable, run_remote_blocking
from bot.security.shell.lexer import Word
from bot.security.shell.network import contacts, host_problem
from tests.cli_helpers import PINCLAW
from tests.test_shell_tool import wait_for_pids, wait_until_gone


def layout(tmp_path: Path, **extra: object) -> SandboxLayout:
    workspace = tmp_path / "home" / ".pinclaw" / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    return SandboxLayout(workspace=workspace, home=tmp_path / "home", **extra)  # type: ignore[arg-type]


def run_in(box: SandboxLayout, command: str) -> str:
    check = find_sandbox(box, "required")
    assert check.sandbox is not None, check.summary
    argv = check.sandbox.command(["/bin/sh", "-c", command], cwd=box.workspace)
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"}, check=False
    )
    return done.stdout + done.stderr


def test_a_missing_bubblewrap_is_reported_and_off_means_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    box = layout(tmp_path)
    assert find_sandbox(box, "off").sandbox is None
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing to run here
    missing = find_sandbox(box, "auto")
    assert missing.sandbox is None
    assert missing.summary == "bubblewrap is not installed (the package is `bubblewrap`)"


def test_without_bubblewrap_auto_warns_once_and_required_stops_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))

    def loaded(mode: str) -> LoadedConfig:
        raw = {"provider": {"kind": "ollama", "model": "m"}, "security": {"shell_sandbox": mode}}
        return LoadedConfig(parse_config(raw, {}), tmp_path / "c.toml", tmp_path / mode)

    auto = loaded("auto")
    ctx = ToolContext(SessionKey("test", "1"), auto.workspace, ZoneInfo("UTC"))
    with caplog.at_level(logging.INFO, logger="tools.shell"):
        built = [tools.shell.build(auto, build_security(auto)) for _ in range(2)]
        assert not caplog.records  # "auto" looks for the sandbox at the first command
        for [shell] in built:
            assert shell.assess(ctx, shell.validate({"command": "ls"})).risk == "low"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "shell commands run WITHOUT a sandbox: bubblewrap is not installed (the package is "
        "`bubblewrap`); commands that run scripts or use the network ask for approval first; "
        "to confine them, install bubblewrap"
    ]
    required = loaded("required")
    with pytest.raises(ConfigError, match=r'security.shell_sandbox is "required", but bubblewrap'):
        tools.shell.build(required, build_security(required))


def test_the_sandbox_hides_secrets_and_writes_only_the_workspace(tmp_path: Path) -> None:
    home = tmp_path / "home"
    extra = tmp_path / "projects"
    extra.mkdir()
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("KEY")
    box = layout(tmp_path, writable=(extra,))
    inner = box.workspace / "private"  # a forbidden folder inside the workspace
    inner.mkdir()
    (inner / "secret.txt").write_text("SECRET")
    (box.workspace / "notes.txt").write_text("PUBLIC")
    box = layout(tmp_path, writable=(extra,), hidden=(inner, home / ".ssh"))
    script = f"""
        cat {home}/.ssh/id_rsa; cat private/secret.txt; cat notes.txt; echo
        echo ws > out.txt && echo wrote-workspace
        echo x > {extra}/out.txt && echo wrote-extra
        echo x > /usr/out.txt || echo refused-elsewhere
        test -e /etc/shadow || echo no-shadow; test -e /etc/passwd && echo passwd
        ls -A /run /var /home | tr '\\n' ' '; echo; id -u; hostname
    """
    out = run_in(box, textwrap.dedent(script))
    assert "KEY" not in out and "SECRET" not in out
    assert "PUBLIC" in out
    for word in ("wrote-workspace", "wrote-extra", "refused-elsewhere", "no-shadow", "passwd"):
        assert word in out, out
    assert "/home:  /run:  /var: " in out  # empty
    assert (box.workspace / "out.txt").read_text() == "ws\n"
    assert (extra / "out.txt").read_text() == "x\n"
    assert (inner / "secret.txt").read_text() == "SECRET"  # hidden, not harmed
    assert f"{os.getuid()}\npinclaw-sandbox" in out


def test_the_sandbox_never_shares_the_host_network(tmp_path: Path) -> None:
    """Its own network namespace, always: the host's loopback is another machine's.

    A command that may use the network gets a relay to PinClaw's egress proxy
    in that namespace, nothing more (tests/test_sandbox_network.py).
    """
    box = layout(tmp_path)
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        connect = (  # the system's python3: the sandbox's PATH is /usr/bin:/bin
            'python3 -c "import socket; '
            f"socket.create_connection(('127.0.0.1', {port}), 5); print('CONNECTED')\""
        )
        closed = run_in(box, connect)
        assert "ConnectionRefusedError" in closed and "CONNECTED" not in closed, closed
        server.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing came
            server.accept()


HOSTS: list[tuple[str, list[str], list[tuple[str, int]]]] = [
    ("curl", ["-s", "http://127.0.0.1:8080/x"], [("127.0.0.1", 8080)]),
    ("curl", ["https://example.com/a"], [("example.com", 443)]),
    ("curl", ["127.1:99/x"], [("127.1", 99)]),
    (
        "curl",
        ["--resolve", "a.test:80:10.0.0.5", "http://a.test/"],
        [("10.0.0.5", 80), ("a.test", 80)],
    ),
    ("curl", ["-x", "http://[::1]:3128", "http://e.com"], [("::1", 3128), ("e.com", 80)]),
    ("wget", ["-O-", "http://[::ffff:127.0.0.1]:81/"], [("::ffff:127.0.0.1", 81)]),
    ("nc", ["-z", "localhost", "22"], [("localhost", 0)]),
    ("ssh", ["-p", "2222", "pi@192.168.1.5", "uptime"], [("192.168.1.5", 0)]),
    ("scp", ["notes.txt", "pi@raspberrypi.local:/tmp/"], [("raspberrypi.local", 22)]),
    ("socat", ["-", "TCP:169.254.169.254:80"], [("169.254.169.254", 80)]),
    ("dig", ["@127.0.0.53", "-p", "53", "example.com"], [("127.0.0.53", 0)]),
    ("npm", ["view", "x", "--registry=http://10.1.2.3:4873/"], [("10.1.2.3", 4873)]),
    ("pip", ["download", "-i", "http://0x7f000001/simple", "x"], [("0x7f000001", 80)]),
    ("openssl", ["s_client", "-connect", "127.0.0.1:443"], [("127.0.0.1", 443)]),
    ("git", ["clone", "git@github.com:me/repo.git"], [("github.com", 22)]),
]


@pytest.mark.parametrize(("name", "args", "expected"), HOSTS)
def test_the_hosts_a_command_names_are_found(
    name: str, args: list[str], expected: list[tuple[str, int]]
) -> None:
    assert [(h, p) for h, p, _, _ in contacts(name, [Word(a) for a in args])] == expected


@pytest.mark.parametrize(
    ("host", "problem"),
    [
        ("127.0.0.1", "127.0.0.1 is a loopback address"),
        ("0x7f000001", "0x7f000001 (that is 127.0.0.1) is a loopback address"),
        ("2130706433", "2130706433 (that is 127.0.0.1) is a loopback address"),
        ("169.254.169.254", "169.254.169.254 is the cloud metadata address"),
        ("[::1]", "::1 is a loopback address"),
        ("LOCALHOST.", "localhost is a loopback address"),
        ("192.168.1.5", "192.168.1.5 is a private network address"),
        ("example.com", None),
        ("8.8.8.8", None),
    ],
)
def test_private_and_loopback_hosts_are_refused_in_any_spelling(
    host: str, problem: str | None
) -> None:
    assert host_problem(host, Allowlist([])) == problem


def test_allowed_hosts_open_a_private_address_for_commands_too() -> None:
    allowed = Allowlist(["192.168.1.0/24", "homeassistant.local"])
    assert host_problem("192.168.1.5", allowed) is None
    assert host_problem("homeassistant.local", allowed) is None
    assert host_problem("192.168.2.5", allowed) == "192.168.2.5 is a private network address"


SEAL = """
import os, subprocess, sys
from bot.config import load_config
from bot.security.own_env import is_dumpable, seal_process
from bot.security.redact import config_secrets
seal_process(config_secrets(load_config(sys.argv[1]).config), keep=["KEEP"])
print("sealed", is_dumpable(), "KEEP" in os.environ, "CLOUD_KEY" in os.environ, flush=True)
child = subprocess.run(["env"], capture_output=True, text=True).stdout
print("child", "TOKEN" in child, flush=True)
sys.stdin.readline()
"""


def test_the_daemon_keeps_its_secrets_out_of_its_environment(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[provider]\nkind = "openai"\nmodel = "m"\napi_key = "${PROBE_API_KEY}"\n'
        '[general]\ndata_dir = "data"\n'
    )
    secret = "sk-probe-0123456789abcdef"
    env = {
        "PATH": os.environ["PATH"],
        "PROBE_API_KEY": secret,
        "KEEP": "ordinary",  # named in shell_env_passthrough, say
        "LANG": "C.UTF-8",
        "CLOUD_KEY": "unnamed-0123456789",  # a secret the config does not name
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", SEAL, str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None and proc.stdin is not None
    try:
        assert proc.stdout.readline().split() == ["sealed", "False", "True", "False"]
        assert proc.stdout.readline().split() == ["child", "False"]
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes()  # root may still read it
        assert secret.encode() not in environ
        assert b"unnamed-0123456789" not in environ and b"CLOUD_KEY" not in environ
        assert b"KEEP=ordinary" in environ and b"LANG=C.UTF-8" in environ
    finally:
        proc.stdin.write("\n")
        proc.stdin.close()
        proc.wait(timeout=30)


def test_a_systemd_credential_stands_in_for_an_unset_variable(tmp_path: Path) -> None:
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "TELEGRAM_BOT_TOKEN").write_text("123:from-a-credential\n")
    env = with_credentials({"CREDENTIALS_DIRECTORY": str(credentials), "OTHER": "x"})
    assert env["TELEGRAM_BOT_TOKEN"] == "123:from-a-credential"
    already = with_credentials(
        {"CREDENTIALS_DIRECTORY": str(credentials), "TELEGRAM_BOT_TOKEN": "from-env"}
    )
    assert already["TELEGRAM_BOT_TOKEN"] == "from-env"
    config = tmp_path / "config.toml"
    config.write_text(
        '[provider]\nkind = "openai"\nmodel = "m"\napi_key = "${TELEGRAM_BOT_TOKEN}"\n'
    )
    loaded = load_config(config, env=env)
    assert loaded.config.provider.api_key is not None
    assert loaded.config.provider.api_key.get_secret_value() == "123:from-a-credential"


# -- the helper behind pinclaw-sandbox.socket ----------------------------------------------


class SocketActivation:
    """What systemd does for ``pinclaw-sandbox.socket`` (``Accept=yes``): listen, and start
    ``pinclaw sandbox-exec`` with each connection as its standard input and output."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen()
        self.helpers: list[subprocess.Popen[bytes]] = []
        self.connections = 0
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                fd = conn.fileno()
                self.helpers.append(
                    subprocess.Popen([str(PINCLAW), "sandbox-exec"], stdin=fd, stdout=fd)
                )

    def close(self) -> None:
        self.server.shutdown(socket.SHUT_RDWR)  # wakes the accept() in the thread
        self.server.close()
        self.thread.join(timeout=10)
        for helper in self.helpers:
            helper.wait(timeout=30)


@pytest.fixture
def activation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SocketActivation]:
    sockets = Path(tempfile.mkdtemp(prefix="pc-", dir="/tmp"))  # AF_UNIX paths must be short
    served = SocketActivation(sockets / "sandbox.sock")
    monkeypatch.setenv(SOCKET_ENV, str(served.path))
    try:
        yield served
    finally:
        served.close()
        shutil.rmtree(sockets)


def helper_registry(tmp_path: Path) -> ToolRegistry:
    raw = {
        "provider": {"kind": "ollama", "model": "m"},
        "security": {"shell_sandbox": "required", "shell_timeout_s": 20},
    }
    loaded = LoadedConfig(parse_config(raw, {}), tmp_path / "c.toml", tmp_path / "data")
    return ToolRegistry(tools.shell.build(loaded, build_security(loaded)))


def shell_context(tmp_path: Path) -> ToolContext:
    return ToolContext(SessionKey("test", "1"), tmp_path / "data" / "workspace", ZoneInfo("UTC"))


async def test_under_systemd_commands_run_through_the_helper(
    tmp_path: Path, activation: SocketActivation
) -> None:
    layout_ = layout(tmp_path)
    check = await asyncio.to_thread(find_sandbox, layout_, "required")
    assert check.sandbox is not None and check.sandbox.via == str(activation.path)
    assert check.summary.endswith(f"through {activation.path}")
    registry = helper_registry(tmp_path)
    command = "hostname; echo out; echo err >&2; ls -A /home | wc -l; exit 3"
    result = await registry.execute(
        ToolCall("1", "shell", {"command": command}), shell_context(tmp_path)
    )
    assert result.ok, result.error
    assert result.output.startswith("exit code 3 (")
    assert result.output.splitlines()[1:] == ["pinclaw-sandbox", "out", "err", "0"]
    # The check above, the one when the tool was built, then the command.
    assert activation.connections == 3


async def test_the_helper_stops_the_command_at_the_time_limit(
    tmp_path: Path, activation: SocketActivation
) -> None:
    registry = helper_registry(tmp_path)
    # Long enough for the helper to start even on a busy machine, short enough to wait for.
    arguments = {"command": "sleep 300.4711 & sleep 300.4712 & wait", "timeout_s": 4}
    call = asyncio.create_task(
        registry.execute(ToolCall("1", "shell", arguments), shell_context(tmp_path))
    )
    pids = await wait_for_pids("300.4711") + await wait_for_pids("300.4712")
    result = await call
    assert not result.ok and result.error is not None
    assert "did not finish within 4 s" in result.error
    for pid in pids:
        assert await wait_until_gone(pid)


async def test_a_cancelled_call_makes_the_helper_stop_the_command(
    tmp_path: Path, activation: SocketActivation
) -> None:
    registry = helper_registry(tmp_path)
    call = asyncio.create_task(
        registry.execute(
            ToolCall("1", "shell", {"command": "sleep 300.5813; echo never"}),
            shell_context(tmp_path),
        )
    )
    pids = await wait_for_pids("300.5813")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    for pid in pids:
        assert await wait_until_gone(pid)


def test_the_helper_runs_bubblewrap_and_nothing_else(
    tmp_path: Path, activation: SocketActivation
) -> None:
    with pytest.raises(SandboxUnavailable, match=r"runs bubblewrap \(bwrap\) and nothing else"):
        run_remote_blocking(
            str(activation.path), ["/bin/sh", "-c", "id"], cwd=tmp_path, env={}, timeout_s=10
        )


def test_without_the_helper_the_local_sandbox_is_tried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SOCKET_ENV, str(tmp_path / "no-such.sock"))
    check = find_sandbox(layout(tmp_path), "auto")
    assert check.sandbox is not None and check.sandbox.via is None


async def test_a_host_name_that_leads_to_loopback_is_refused_before_the_command_runs(
    tmp_path: Path,
) -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return {"sneaky.test": ["127.0.0.1"], "fine.test": ["93.184.215.14"]}[host]

    raw = {"provider": {"kind": "ollama", "model": "m"}, "security": {"autonomy": "full"}}
    loaded = LoadedConfig(parse_config(raw, {}), tmp_path / "c.toml", tmp_path / "data")
    registry = ToolRegistry(tools.shell.build(loaded, build_security(loaded, resolver=resolver)))
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        command = f"curl -s -m 5 http://sneaky.test:{port}/ || echo tried"
        result = await registry.execute(
            ToolCall("1", "shell", {"command": command}), shell_context(tmp_path)
        )
        assert result.error == (
            "refused: the command names sneaky.test: the host sneaky.test resolves to "
            "127.0.0.1, a loopback address"
        )
        fine = await registry.execute(
            ToolCall(
                "2",
                "shell",
                {"command": "echo http://fine.test/ | wc -c; curl --version >/dev/null"},
            ),
            shell_context(tmp_path),
        )
        assert fine.ok, fine.error
