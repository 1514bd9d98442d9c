"""Running the real daemon in tests: in-process (``running_daemon``) or as ``pinclaw run``.

``running_daemon`` builds a config pointing at the fake LLM plus the given
channel tables, opens the same ``Daemon`` that ``pinclaw run`` uses, starts it
and stops it afterwards. ``DaemonProcess`` runs the installed ``pinclaw run``
command in a throw-away HOME, follows its log on stderr, and stops it with
SIGTERM or kills it with SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bot.config import LoadedConfig, load_config, parse_config
from bot.daemon.main import Daemon
from tests.fake_llm import FakeLLM
from tests.fake_telegram import FakeTelegram

PINCLAW = Path(sys.executable).parent / "pinclaw"


def daemon_config(
    llm: FakeLLM,
    channels: dict[str, Any],
    *,
    security: dict[str, Any] | None = None,
    tables: dict[str, Any] | None = None,
    **daemon: Any,
) -> dict[str, Any]:
    """A raw config: the fake LLM as provider, quick shutdown, the given channel tables
    (and ``[security]`` keys, and other top-level ``tables`` such as ``cron``, if given)."""
    raw: dict[str, Any] = {
        "provider": {
            "kind": "openai",
            "model": "fake",
            "base_url": f"{llm.url}/v1",
            "max_retries": 0,
        },
        # Messages are never merged (split pastes) unless a test asks: tests send
        # several messages at once and expect an answer to each.
        "daemon": {"shutdown_grace_s": 0.5, "merge_window_ms": 0, **daemon},
        "channels": channels,
    }
    if security is not None:
        raw["security"] = security
    # The status endpoint is off unless a test asks for it, so daemons never share a port;
    # replies are not streamed unless a test asks, so a slow turn on a busy machine never
    # shows a draft where a test expects the reply.
    quiet = {"web": {"listen": "off"}, "agent": {"stream": False}}
    return {**raw, **quiet, **(tables or {})}


@asynccontextmanager
async def running_daemon(
    tmp_path: Path,
    llm: FakeLLM,
    channels: dict[str, Any],
    *,
    security: dict[str, Any] | None = None,
    tables: dict[str, Any] | None = None,
    **settings: Any,
) -> AsyncIterator[Daemon]:
    """The daemon, started, with its state under ``tmp_path/state``; stopped on exit.

    ``settings`` go to the ``[daemon]`` table, ``security`` (if given) to ``[security]``,
    ``tables`` (if given) are further top-level tables such as ``cron`` or ``heartbeat``.
    """
    raw = daemon_config(llm, channels, security=security, tables=tables, **settings)
    loaded = LoadedConfig(parse_config(raw, {}), tmp_path / "config.toml", tmp_path / "state")
    async with Daemon.open(loaded) as daemon:
        await daemon.start()
        yield daemon


@asynccontextmanager
async def daemon_from(config: Path) -> AsyncIterator[Daemon]:
    """``pinclaw run`` in-process from a config file, once Telegram is connected."""
    async with Daemon.open(load_config(config)) as daemon:
        await daemon.start()
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


def telegram_run_config(llm: FakeLLM, telegram: FakeTelegram, owner: int) -> str:
    """A config file for ``pinclaw run`` against the fake LLM and the fake Telegram."""
    return f"""
[provider]
kind = "openai"
model = "fake"
base_url = "{llm.url}/v1"
max_retries = 0

[daemon]
shutdown_grace_s = 0.5

[channels.telegram]
token = "{telegram.token}"
api_base_url = "{telegram.url}"
allowed_users = ["{owner}"]
poll_timeout_s = 1
"""


class DaemonProcess:
    """``pinclaw run`` as a subprocess; its stderr log lines are collected as they come."""

    def __init__(
        self,
        home: Path,
        config_toml: str,
        env: dict[str, str] | None = None,
        *,
        wrap: Sequence[str] = (),
    ) -> None:
        self.home = home
        self._wrap = tuple(wrap)  # a command that runs ``pinclaw run`` (e.g. in a namespace)
        config = home / ".pinclaw" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(config_toml)
        self._env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("PINCLAW_")},
            "HOME": str(home),
            "TZ": "UTC",
            **(env or {}),
        }
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> DaemonProcess:
        """Start ``pinclaw run`` (logging at info level)."""
        assert PINCLAW.exists(), "the pinclaw console script is not installed here"
        self.proc = subprocess.Popen(
            [*self._wrap, str(PINCLAW), "run", "--log-level", "info"],
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        threading.Thread(target=self._follow, daemon=True).start()
        return self

    def wait_log(self, needle: str, timeout: float = 20.0, after: int = 0) -> str:
        """Wait for a log line containing ``needle`` (among lines from index ``after``)."""

        def found() -> str | None:
            return next((line for line in self.lines[after:] if needle in line), None)

        with self._changed:
            if not self._changed.wait_for(lambda: found() is not None or self._exited(), timeout):
                raise TimeoutError(f"no log line with {needle!r}; log:\n" + "".join(self.lines))
        line = found()
        if line is None:
            raise AssertionError("pinclaw run exited; log:\n" + "".join(self.lines))
        return line

    def terminate(self, timeout: float = 20.0) -> int:
        """SIGTERM, then wait for the exit code."""
        return self._signal(signal.SIGTERM, timeout)

    def kill(self) -> int:
        """SIGKILL: no clean-up at all, like a power cut."""
        return self._signal(signal.SIGKILL, 10.0)

    def log(self) -> str:
        """Everything logged so far."""
        return "".join(self.lines)

    def _signal(self, signum: int, timeout: float) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        return self.proc.wait(timeout)

    def _exited(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def _follow(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``predicate`` (for state that has no event to wait on)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(0.02)
