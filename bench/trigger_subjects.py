"""The processes the trigger benchmark measures, and how to give each an event.

The daemon (``bench/trigger_daemon.py``) with a webhook trigger and a GPIO trigger
on a mock pin, and the floor (``bench/trigger_floor.py``), both sending to one fake
Telegram server in the benchmark's process. ``Subjects.event`` gives one event
and returns how long its message took to arrive; see ``bench/triggers_bench.py``.
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tests.fake_llm import FakeLLM
from tests.fake_telegram import Call, FakeTelegram

HOOK_CHAT, EDGE_CHAT, FLOOR_CHAT = 7001, 7002, 7003
PIN = 17
SECRET = "bench-secret-0123456789abcdef"
HERE = Path(__file__).resolve().parent


def free_port() -> int:
    """A TCP port nobody listens on right now (for the daemon's HTTP endpoint)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def daemon_config(llm: FakeLLM, telegram: FakeTelegram, port: int) -> str:
    """The daemon's config: defaults, the fakes, the endpoint on ``port``, the triggers."""
    return f"""
[provider]
kind = "openai"
model = "bench"
base_url = "{llm.url}/v1"

[daemon]
shutdown_grace_s = 1

[heartbeat]
interval = "0"

[web]
listen = "127.0.0.1:{port}"

[channels.telegram]
token = "{telegram.token}"
api_base_url = "{telegram.url}"
poll_timeout_s = 10
allowed_users = ["{HOOK_CHAT}", "{EDGE_CHAT}"]

[[triggers]]
name = "bench-hook"
on = "webhook"
secret = "{SECRET}"
to = "telegram:{HOOK_CHAT}"
say = "{{body}}"
cooldown = "0"
rate_limit = "0"

[[triggers]]
name = "bench-edge"
on = "gpio:door"
when = "change"
to = "telegram:{EDGE_CHAT}"
say = "The door is {{state}}"
cooldown = "0"
rate_limit = "0"

[hardware]
pin_factory = "mock"

[hardware.gpio.door]
pin = {PIN}
kind = "input"
"""


class Deliveries:
    """The fake's answered sendMessage calls, by chat; each scan reads only new calls."""

    def __init__(self, telegram: FakeTelegram) -> None:
        self.telegram = telegram
        self._seen = 0
        self.by_chat: dict[int, list[Call]] = {}

    def _scan(self) -> None:
        calls = self.telegram.journal.calls
        for call in calls[self._seen :]:
            if call.method == "sendMessage" and call.ok:
                self.by_chat.setdefault(int(call.params["chat_id"]), []).append(call)
        self._seen = len(calls)

    def text_in(self, chat: int, text: str, timeout: float = 30) -> Call:
        """Wait for a message reading ``text`` in ``chat``."""

        def check() -> Call | None:
            self._scan()
            return next((c for c in self.by_chat.get(chat, []) if c.params["text"] == text), None)

        return self.telegram.wait_until(check, timeout)

    def nth_in(self, chat: int, count: int, timeout: float = 30) -> Call:
        """Wait for the ``count``-th message in ``chat``."""

        def check() -> Call | None:
            self._scan()
            found = self.by_chat.get(chat, [])
            return found[count - 1] if len(found) >= count else None

        return self.telegram.wait_until(check, timeout)


class Hook:
    """POSTs to one HTTP hook over one kept-alive connection."""

    def __init__(self, port: int, path: str, headers: dict[str, str]) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.path = path
        self.headers = headers

    def post(self, text: str) -> None:
        """Send the request; its answer is read by ``answered``."""
        self.connection.request("POST", self.path, text.encode(), self.headers)

    def answered(self) -> None:
        """Read the answer of the last request; it must say it was taken."""
        answer = self.connection.getresponse()
        body = answer.read()
        if answer.status not in (200, 202):
            raise RuntimeError(f"{self.path}: {answer.status} {body.decode(errors='replace')}")


@dataclass
class Subjects:
    """The two processes under test and how to give each an event."""

    deliveries: Deliveries
    hooks: dict[str, Hook]  # "webhook", "floor"
    daemon_in: IO[str]
    daemon_out: IO[str]
    sequence: int = 0
    edges: int = 0

    def event(self, kind: str) -> float:
        """One event of ``kind``; milliseconds until its message reached the fake."""
        self.sequence += 1
        if kind == "gpio":
            self.edges += 1
            self.daemon_in.write("edge\n")
            self.daemon_in.flush()
            started = float(self.daemon_out.readline())
            return (self.deliveries.nth_in(EDGE_CHAT, self.edges).at - started) * 1000
        text = f"{kind} {self.sequence}"
        hook, chat = self.hooks[kind], HOOK_CHAT if kind == "webhook" else FLOOR_CHAT
        started = time.monotonic()
        hook.post(text)
        # The answer is read after the message arrived: this process hosts the fake
        # Telegram too, and reading it meanwhile would compete with the fake for the GIL.
        arrived = self.deliveries.text_in(chat, text).at
        hook.answered()
        return (arrived - started) * 1000


@contextmanager
def floor_running(telegram: FakeTelegram) -> Iterator[int]:
    """``bench/trigger_floor.py`` until the block ends; yields its port."""
    command = [sys.executable, str(HERE / "trigger_floor.py"), telegram.url, telegram.token,
               str(FLOOR_CHAT)]  # fmt: skip
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline())
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)


@contextmanager
def daemon_running(home: Path, config: str) -> Iterator[subprocess.Popen[str]]:
    """``bench/trigger_daemon.py`` in ``home`` until the block ends, once it is ready."""
    path = home / ".pinclaw" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(config)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCLAW_")}
    env.update(HOME=str(home), TZ="UTC")
    command = [sys.executable, str(HERE / "trigger_daemon.py"), str(path), str(PIN)]
    with (home / "daemon.log").open("w") as log:
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=log, text=True, env=env, cwd=HERE.parent)  # fmt: skip
        try:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError(f"the daemon did not start; see its log:\n{log_of(home)}")
            yield proc
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(30)


def log_of(home: Path) -> str:
    """The daemon's log so far."""
    return (home / "daemon.log").read_text()
