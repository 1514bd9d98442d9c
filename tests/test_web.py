"""The daemon's status endpoint end to end: /healthz, /metrics, /status and ``pinclaw status``.

The real daemon runs in-process with the fake Telegram and the fake model; the
endpoint is read over a real socket with httpx, the metrics are parsed by
prometheus-client's own parser, and ``pinclaw status`` is the installed command
(run in a thread, so the daemon on this loop can answer it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.daemon.main import Daemon
from tests.channel_tables import telegram_table
from tests.cli_helpers import run, write_config
from tests.daemon_harness import running_daemon
from tests.fake_llm import FakeLLM, Say
from tests.fake_telegram import FakeTelegram

OWNER = 7001
ADA = FakeTelegram.user(OWNER, "Ada", "ada")


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def daemon_on(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, web: dict[str, Any]
) -> AsyncIterator[Daemon]:
    """The real daemon with Telegram and the endpoint configured by ``web``, once connected."""
    channels = {"telegram": telegram_table(telegram)}
    async with running_daemon(tmp_path, llm, channels, tables={"web": web}) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


def status_config(home: Path, state: Path, llm: FakeLLM, web: str) -> Path:
    """A config file for ``pinclaw status`` naming the daemon's data folder and endpoint."""
    return write_config(
        home,
        f'[general]\ndata_dir = "{state}"\n'
        f'[provider]\nkind = "openai"\nmodel = "fake"\nbase_url = "{llm.url}/v1"\n'
        f"[web]\n{web}\n",
    )


async def pinclaw(home: Path, *args: str) -> Any:
    """The installed ``pinclaw`` in a thread, so this loop's daemon can answer it."""
    return await asyncio.to_thread(run, home, *args)


def sample(text: str, name: str, **labels: str) -> float:
    """One sample's value from Prometheus text (0 when absent)."""
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and all(found.labels.get(k) == v for k, v in labels.items()):
                return float(found.value)
    return 0.0


async def until(check: Callable[[], Any], timeout_s: float = 30.0) -> Any:
    """Poll an async-free ``check`` until it returns something truthy."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if result := await check():
            return result
        await asyncio.sleep(0.1)
    raise AssertionError("condition not met in time")


def turn_tokens(state: Path) -> tuple[int, int]:
    with contextlib.closing(sqlite3.connect(state / "pinclaw.db")) as db:
        row = db.execute("SELECT SUM(input_tokens), SUM(output_tokens) FROM turns").fetchone()
    return int(row[0] or 0), int(row[1] or 0)


async def a_turn_is_counted(
    http: httpx.AsyncClient, url: str, llm: FakeLLM, telegram: FakeTelegram, state: Path
) -> None:
    """One Telegram message answered: /metrics counts the turn and exactly its tokens."""
    before = (await http.get(f"{url}/metrics")).text
    llm.queue(Say("Hello, Ada."))
    telegram.user_sends(OWNER, ADA, "hello there")
    await telegram.await_until(
        lambda: [m for m in telegram.sent(OWNER) if m.text == "Hello, Ada."] or None
    )
    after = (await http.get(f"{url}/metrics")).text
    tokens_in, tokens_out = turn_tokens(state)
    assert tokens_in > 0 and tokens_out > 0

    def grew(name: str, **labels: str) -> float:
        return sample(after, name, **labels) - sample(before, name, **labels)

    assert grew("pinclaw_turns_total", status="done") == 1
    assert grew("pinclaw_turn_seconds_count") == 1
    assert grew("pinclaw_model_calls_total", provider="openai", model="fake") == 1
    model = {"provider": "openai", "model": "fake"}
    assert grew("pinclaw_model_tokens_total", direction="input", **model) == tokens_in
    assert grew("pinclaw_model_tokens_total", direction="output", **model) == tokens_out
    assert sample(after, "pinclaw_channel_up", channel="telegram") == 1

    async def answered() -> bool:  # the row is marked answered just after the reply is sent
        text = (await http.get(f"{url}/metrics")).text
        return sample(text, "pinclaw_inbox_depth") == 0

    await until(answered)
    assert "pinclaw_owner_inbox_unread 0.0" in after
    assert "pinclaw_start_time_seconds" in after


async def test_health_metrics_and_status_follow_the_channel_and_count_a_turn(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    web = {"listen": f"127.0.0.1:{port}", "health_grace_s": 1}
    home = tmp_path / "home"
    config = status_config(home, tmp_path / "state", llm, f'listen = "127.0.0.1:{port}"')
    async with daemon_on(tmp_path, llm, telegram, web), httpx.AsyncClient(timeout=10) as http:
        health = await http.get(f"{url}/healthz")
        assert health.status_code == 200, health.text
        report = health.json()
        assert report["ok"] is True
        assert report["channels"]["telegram"]["state"] == "connected"
        assert report["scheduler"] == {"running": True}
        assert report["database"]["ok"] is True

        await a_turn_is_counted(http, url, llm, telegram, tmp_path / "state")

        shown = await pinclaw(home, "status", "--config", str(config))
        assert shown.returncode == 0, shown.stderr
        assert "telegram  connected since" in shown.stdout
        assert "Model: openai:fake" in shown.stdout
        assert f"Tokens today: {sum(turn_tokens(tmp_path / 'state')):,}" in shown.stdout
        assert "Scheduler: running" in shown.stdout
        assert "Unread in `pinclaw inbox`: 0" in shown.stdout
        as_json = await pinclaw(home, "status", "--json", "--config", str(config))
        assert json.loads(as_json.stdout)["channels"]["telegram"]["state"] == "connected"

        telegram.unreachable(True)  # the fake Telegram stops answering

        async def down() -> httpx.Response | None:
            answer = await http.get(f"{url}/healthz")
            return answer if answer.status_code == 503 else None

        failing = (await until(down)).json()
        assert failing["ok"] is False
        assert failing["channels"]["telegram"]["state"] == "reconnecting"
        assert failing["channels"]["telegram"]["healthy"] is False
        assert telegram.token not in json.dumps(failing)
        degraded = await pinclaw(home, "status", "--config", str(config))
        assert degraded.returncode == 1
        assert "telegram  reconnecting since" in degraded.stdout
        assert "down too long" in degraded.stdout
        metrics = (await http.get(f"{url}/metrics")).text
        assert sample(metrics, "pinclaw_channel_up", channel="telegram") == 0
        assert sample(metrics, "pinclaw_channel_reconnects_total", channel="telegram") >= 1

        telegram.unreachable(False)

        async def up() -> bool:
            return (await http.get(f"{url}/healthz")).status_code == 200

        await until(up)


async def test_status_says_when_no_daemon_runs(tmp_path: Path, llm: FakeLLM) -> None:
    home = tmp_path / "home"
    config = status_config(home, tmp_path / "state", llm, f'listen = "127.0.0.1:{free_port()}"')
    absent = await pinclaw(home, "status", "--config", str(config))
    assert absent.returncode == 3
    assert absent.stdout.startswith("PinClaw is not running: nothing answers at http://127.0.0.1:")
    assert "Traceback" not in absent.stderr + absent.stdout
    as_json = await pinclaw(home, "status", "--json", "--config", str(config))
    assert as_json.returncode == 3 and json.loads(as_json.stdout)["running"] is False
    config = status_config(home, tmp_path / "state", llm, 'listen = "off"')
    off = await pinclaw(home, "status", "--config", str(config))
    assert off.returncode == 3 and "endpoint is off" in off.stdout


async def test_a_token_guards_every_route_and_status_sends_it(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    web = {"listen": f"127.0.0.1:{port}", "token": "s3cret-t0ken"}
    home = tmp_path / "home"
    async with daemon_on(tmp_path, llm, telegram, web), httpx.AsyncClient(timeout=10) as http:
        for route in ("/healthz", "/metrics", "/status"):
            assert (await http.get(url + route)).status_code == 401
            wrong = {"Authorization": "Bearer nope"}
            assert (await http.get(url + route, headers=wrong)).status_code == 401
            right = {"Authorization": "Bearer s3cret-t0ken"}
            assert (await http.get(url + route, headers=right)).status_code == 200
        good = status_config(
            home, tmp_path / "state", llm, f'listen = "127.0.0.1:{port}"\ntoken = "s3cret-t0ken"'
        )
        assert (await pinclaw(home, "status", "--config", str(good))).returncode == 0
        bad = status_config(home, tmp_path / "state", llm, f'listen = "127.0.0.1:{port}"')
        refused = await pinclaw(home, "status", "--config", str(bad))
        assert refused.returncode == 1 and "check [web] token" in refused.stdout


async def test_without_a_token_only_loopback_host_names_are_served(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    web = {"listen": f"127.0.0.1:{port}"}
    async with daemon_on(tmp_path, llm, telegram, web), httpx.AsyncClient(timeout=10) as http:
        for host in ("localhost", f"localhost:{port}", f"127.0.0.1:{port}", "[::1]:80"):
            answer = await http.get(f"{url}/healthz", headers={"Host": host})
            assert answer.status_code == 200, host
        for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.1.nip.io"):
            answer = await http.get(f"{url}/status", headers={"Host": host})
            assert answer.status_code == 403, host


def test_a_remote_address_needs_a_token(tmp_path: Path, llm: FakeLLM) -> None:
    home = tmp_path / "home"
    config = status_config(home, tmp_path / "state", llm, 'listen = "0.0.0.0:8765"')
    checked = run(home, "config", "check", "--config", str(config))
    assert checked.returncode == 2
    keys = [line.split(": ")[2] for line in checked.stderr.splitlines()]  # each names its key
    assert keys == ["web.token", "web.tls_key"]  # both missing, each on its own line
    config = status_config(home, tmp_path / "state", llm, 'listen = "localhost"')
    checked = run(home, "config", "check", "--config", str(config))
    assert checked.returncode == 2 and "web.listen" in checked.stderr


async def test_a_busy_port_is_logged_and_the_daemon_answers_chats_anyway(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        web = {"listen": f"127.0.0.1:{port}"}
        async with daemon_on(tmp_path, llm, telegram, web):
            telegram.user_sends(OWNER, ADA, "still there?")
            await telegram.await_until(lambda: telegram.sent(OWNER) or None)
    assert any(
        "status endpoint cannot listen" in r.getMessage() and "[web] listen" in r.getMessage()
        for r in caplog.records
    )
