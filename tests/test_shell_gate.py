"""The shell gate against someone trying hard: every hostile line held, every everyday line run.

The lines come from ``tests/shell_probes.py``. Each goes through the real policy
gate and the real ``shell`` tool at the default autonomy (``supervised``) with
nobody there to approve, with the kernel sandbox (bubblewrap, which CI installs)
and without it. Around them stands a world worth attacking: canary credentials
in a fake home, PinClaw's own config and secrets file, a process whose
environment holds a canary token (the daemon stand-in), and a loopback listener
that counts every connection. A hostile line must not run: nothing written
outside the workspace, no canary in what the model sees, no connection made.

A second wall is tested on its own: at ``full`` autonomy, where the classifier
lets nearly everything run, the sandbox alone must keep forbidden files and
other processes' secrets out of reach.
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from zoneinfo import ZoneInfo

import pytest

from bot.agent.tool_registry import ToolRegistry
from bot.config import LoadedConfig, parse_config
from bot.core.conversation import ToolCall
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext, ToolResult
from bot.security.audit import AuditLog
from bot.security.gate import PolicyGate
from bot.security.kit import build_security
from tests.cli_helpers import local_config, run, write_config
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.shell_probes import FORBIDDEN_TRICKS, HARMLESS, HOSTILE, INTERPRETING, PROCESS_SECRETS
from tools.shell import build

MODES = ["required", "off"]  # with the kernel sandbox (CI installs bubblewrap), and without


class Listener:
    """A TCP server on loopback (IPv4 and, where there is one, IPv6) counting connections."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        first = socket.create_server(("127.0.0.1", 0))
        self.port = first.getsockname()[1]
        self._sockets.append(first)
        with contextlib.suppress(OSError):  # no IPv6 here
            self._sockets.append(socket.create_server(("::1", self.port), family=socket.AF_INET6))
        self._threads = [threading.Thread(target=self._serve, args=(s,)) for s in self._sockets]
        for thread in self._threads:
            thread.daemon = True
            thread.start()

    def _serve(self, server: socket.socket) -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with self._lock:
                self.count += 1
            with conn:
                conn.settimeout(1)
                try:
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
                except OSError:
                    pass

    def close(self) -> None:
        """Stop listening and wait for the threads: a thread still blocked in accept() on
        a closed descriptor would take the connections of whatever socket reuses it."""
        for server in self._sockets:
            with contextlib.suppress(OSError):
                server.shutdown(socket.SHUT_RDWR)  # wakes the accept() in its thread
            server.close()
        for thread in self._threads:
            thread.join(timeout=10)
            assert not thread.is_alive(), "a listener thread did not stop"


@dataclass
class World:
    """The home, workspace, canaries and listener every probe runs against."""

    home: Path
    data: Path
    workspace: Path
    outside: Path
    listener: Listener
    canaries: dict[str, str] = field(default_factory=dict)

    def fill(self, line: str, index: int) -> str:
        return line.format(
            out=self.outside / f"pwned-{index}",
            home=self.home,
            port=self.listener.port,
            data=self.data,
        )


CANARY_FILES = {
    ".ssh/id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\n{canary}\n",
    ".gitconfig": '[url "https://pinclaw:{canary}@github.com/"]\n\tinsteadOf = https://github.com/\n',
    ".git-credentials": "https://pinclaw:{canary}@github.com\n",
    ".npmrc": "//registry.npmjs.org/:_authToken={canary}\n",
    ".pypirc": "[pypi]\nusername = __token__\npassword = {canary}\n",
    ".docker/config.json": '{{"auths": {{"ghcr.io": {{"auth": "{canary}"}}}}}}\n',
    ".netrc": "machine example.com login pinclaw password {canary}\n",
    ".config/gh/hosts.yml": "github.com:\n    oauth_token: {canary}\n",
    ".kube/config": "users:\n- name: pi\n  user:\n    token: {canary}\n",
    ".bash_history": "export OPENAI_API_KEY={canary}\n",
    ".pinclaw/pinclaw.env": "TELEGRAM_BOT_TOKEN={canary}\n",
    ".pinclaw/config.toml": '[provider]\napi_key = "{canary}"\n',
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("gate")
    home, outside = root / "home", root / "outside"
    data = home / ".pinclaw"
    workspace = data / "workspace"
    for folder in (workspace / "src", outside):
        folder.mkdir(parents=True)
    world = World(home, data, workspace, outside, Listener())
    for name, template in CANARY_FILES.items():
        canary = f"CANARY{secrets.token_hex(12)}"
        world.canaries[name] = canary
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(template.format(canary=canary))
    files = {
        "notes.txt": "first line\nsecond line TODO\n",
        "notes2.txt": "first line\n",
        "data.csv": "name,count\npi,3\n",
        "data.json": '{"name": "pinclaw"}\n',
        "script.py": "print('hello from a script')\n",
        "run.sh": "echo running\n",
        "payload.sh": f"touch {outside}/pwned-payload\n",
    }
    for name, text in files.items():
        (workspace / name).write_text(text)
    (workspace / "run.sh").chmod(0o755)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(workspace)]
    clean = {"PATH": os.environ["PATH"], "HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "first"]):
        subprocess.run([*git, *args], check=True, env=clean)
    # The daemon stand-in: a process whose environment holds a token.
    world.canaries["daemon environment"] = f"CANARY{secrets.token_hex(12)}"
    daemon = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", "canary-daemon"],
        env={"PATH": "/usr/bin:/bin", "PINCLAW_TOKEN": world.canaries["daemon environment"]},
    )
    saved_home = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    try:
        yield world
    finally:
        if saved_home is not None:
            os.environ["HOME"] = saved_home
        daemon.kill()
        daemon.wait()
        world.listener.close()


class Places(Protocol):
    """Where a test world keeps its (fake) home, PinClaw's data and what lies outside."""

    home: Path
    data: Path
    outside: Path


def make_gate(world: Places, mode: str, autonomy: str = "supervised") -> PolicyGate:
    raw: dict[str, Any] = {
        "provider": {"kind": "ollama", "model": "m"},
        "security": {
            "autonomy": autonomy,
            "shell_sandbox": mode,
            "shell_timeout_s": 20,
            "max_tool_calls_per_hour": 0,
        },
    }
    loaded = LoadedConfig(parse_config(raw, {}), world.data / "config.toml", world.data)
    kit = build_security(loaded)
    assert kit.paths.home == world.home
    registry = ToolRegistry(build(loaded, kit), max_output_chars=100_000)
    audit = AuditLog(world.outside.parent / f"audit-{mode}-{autonomy}.jsonl")
    return PolicyGate(registry, config=kit.config, audit=audit, redactor=kit.redactor)


@pytest.fixture(scope="module", params=MODES, ids=["sandbox", "no-sandbox"])
def gate(request: pytest.FixtureRequest, world: World) -> tuple[str, PolicyGate]:
    return request.param, make_gate(world, request.param)


def context(world: World) -> ToolContext:
    return ToolContext(SessionKey("test", "probe"), world.workspace, ZoneInfo("UTC"))


async def shell(gate: PolicyGate, world: World, command: str) -> ToolResult:
    return await gate.execute(ToolCall("probe", "shell", {"command": command}), context(world))


def leaks(text: str, canaries: dict[str, str]) -> list[str]:
    """Canaries found in ``text``: plainly, reversed, or base64 or hex encoded."""
    forms: dict[str, str] = {}
    for name, canary in canaries.items():
        raw = canary.encode()
        forms[canary] = name
        forms[canary[::-1]] = name
        forms[raw.hex()] = name
        for shift in range(3):
            encoded = base64.b64encode(b"\0" * shift + raw).decode()
            forms[encoded[4 * shift // 3 + 2 : -4]] = name
    squeezed = "".join(text.split())
    return sorted({name for form, name in forms.items() if form in text or form in squeezed})


def test_the_probe_lists_are_as_large_as_promised() -> None:
    assert len(HOSTILE) >= 150
    assert len(HARMLESS) >= 50
    assert len({line for _, line in HOSTILE}) == len(HOSTILE)
    assert {category for category, _ in HOSTILE} == {
        "stdin-code",
        "process-secrets",
        "credentials",
        "network",
        "forbidden-tricks",
    }


@pytest.mark.parametrize(
    ("index", "category", "line"),
    [(i, c, line) for i, (c, line) in enumerate(HOSTILE)],
    ids=[f"{i}-{c}" for i, (c, _) in enumerate(HOSTILE)],
)
async def test_a_hostile_line_does_not_run(
    gate: tuple[str, PolicyGate], world: World, index: int, category: str, line: str
) -> None:
    mode, policy = gate
    command = world.fill(line, index)
    before = world.listener.count
    result = await shell(policy, world, command)
    assert not result.ok, f"[{mode}] ran: {command!r}\n{result.output}"
    assert result.error is not None
    assert result.error.startswith(("refused:", "not run:")), result.error
    assert not (world.outside / f"pwned-{index}").exists()
    assert not (world.outside / "pwned-payload").exists()
    assert world.listener.count == before, f"[{mode}] {command!r} reached the listener"
    assert not leaks(result.output + result.error, world.canaries)


@pytest.mark.parametrize("line", HARMLESS)
async def test_an_everyday_line_runs_without_asking(
    gate: tuple[str, PolicyGate], world: World, line: str
) -> None:
    mode, policy = gate
    result = await shell(policy, world, world.fill(line, 0))
    if mode == "off" and line in INTERPRETING:
        # Without the kernel sandbox a script could do anything: a person approves it.
        assert result.error is not None
        assert result.error.startswith("not run: shell needs a person's approval"), result.error
        return
    assert result.ok, f"[{mode}] {line!r}: {result.error}"
    assert result.output.startswith('<untrusted source="shell">\nexit code 0 ('), result.output
    assert not leaks(result.output, world.canaries)


async def test_the_sandbox_is_really_there(world: World) -> None:
    policy = make_gate(world, "required", autonomy="full")  # let it look around
    command = 'hostname; ps -e | wc -l; ls -A ~ "$(dirname "$PWD")" /home /run'
    result = await shell(policy, world, command)
    assert result.ok, result.error
    lines = result.output.split("\n")[2:-1]
    assert lines[0] == "pinclaw-sandbox"
    assert int(lines[1]) <= 6  # a heading, bwrap's reaper, sh, ps and wc: no other process
    listed: dict[str, list[str]] = {}
    for block in "\n".join(lines[2:]).strip().split("\n\n"):
        heading, *entries = block.split("\n")
        listed[heading.rstrip(":")] = entries
    # Home holds only the way to the workspace; the config and secrets beside it are gone.
    assert listed == {
        str(world.home): [".pinclaw"],
        str(world.data): ["workspace"],
        "/home": [],
        "/run": ["pinclaw"],  # a call that may use the network: the relay to the egress proxy
    }


@pytest.mark.parametrize(
    "line",
    [*FORBIDDEN_TRICKS, *PROCESS_SECRETS],
)
async def test_at_full_autonomy_the_sandbox_alone_keeps_secrets_out_of_reach(
    world: World, line: str
) -> None:
    policy = make_gate(world, "required", autonomy="full")
    result = await shell(policy, world, world.fill(line, 999))
    found = leaks(result.output + (result.error or ""), world.canaries)
    assert not found, f"{line!r} leaked {found}:\n{result.output}"
    assert not (world.outside / "pwned-999").exists()


def test_pinclaw_agent_asked_for_every_hostile_line_answers_in_its_normal_time(
    llm: FakeLLM, tmp_path: Path
) -> None:
    """Nobody can approve in ``agent -m``: nothing waits for a person, nothing runs."""
    home, outside = tmp_path / "home", tmp_path / "outside"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("CANARY-agent-key\n")
    outside.mkdir()
    listener = Listener()
    extra = "[agent]\nmax_tool_iterations = 20\n[security]\napproval_timeout_s = 600\n"
    write_config(home, local_config(llm.url, extra))
    data = home / ".pinclaw"
    lines = [
        line.format(out=outside / f"pwned-{i}", home=home, port=listener.port, data=data)
        for i, (_, line) in enumerate(HOSTILE)
    ]
    batches = [lines[i : i + 12] for i in range(0, len(lines), 12)]
    assert len(batches) < 20
    llm.queue(
        *(CallTools([("shell", {"command": line}) for line in batch]) for batch in batches),
        Say("None of that ran."),
    )
    try:
        started = time.monotonic()
        done = run(home, "agent", "-m", "try everything")
        took = time.monotonic() - started
    finally:
        listener.close()
    assert done.returncode == 0, done.stderr
    assert done.stdout == "None of that ran.\n"
    assert took < 30, f"agent -m took {took:.1f} s"
    shown = {  # every tool result the model was shown, by call id
        message["tool_call_id"]: message["content"]
        for request in llm.requests
        for message in request.body.get("messages", [])
        if message.get("role") == "tool"
    }
    assert len(shown) == len(lines)
    ran = [r for r in shown.values() if not r.startswith(("Error: refused:", "Error: not run:"))]
    assert not ran
    assert not list(outside.iterdir())
    assert listener.count == 0
    assert "CANARY" not in done.stdout + done.stderr
