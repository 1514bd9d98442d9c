"""Triggers in ``pinclaw status`` (and ``GET /status``), ``/metrics`` and ``pinclaw doctor``.

The daemon runs for real with the fake Telegram (Ada, 7001); webhooks are real HTTP
POSTs, and ``pinclaw status`` and ``pinclaw doctor`` are the installed command, run
as a person runs it. Home Assistant is the fake one of ``tests/fake_home_assistant``
with its WebSocket API, or a closed port where it should be down.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from bot.cli.doctor.findings import Finding
from bot.cli.doctor.triggers import home_assistant
from bot.cli.status import describe
from bot.config.hardware import HomeAssistantConfig
from bot.daemon.main import Daemon
from tests.browser import free_port
from tests.cli_helpers import run, write_config
from tests.daemon_harness import running_daemon
from tests.fake_home_assistant import TOKEN, FakeHomeAssistant
from tests.fake_llm import FakeLLM
from tests.fake_telegram import FakeTelegram
from tests.provider_cases import closed_port
from tests.trigger_harness import OWNER, telegram_channel

SECRET = "doorbell-secret-0123456789"
DOORBELL = {
    "name": "doorbell",
    "on": "webhook",
    "secret": SECRET,
    "to": f"telegram:{OWNER}",
    "say": "Someone rang: {body}",
}
GARAGE = {
    "name": "garage",
    "on": "ha:cover.garage",
    "when": "open",
    "to": f"telegram:{OWNER}",
    "say": "The garage door is {state}.",
}
PORCH = {**DOORBELL, "name": "porch", "enabled": False, "say": "Porch: {body}"}


@asynccontextmanager
async def daemon_with(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, tables: dict[str, Any]
) -> AsyncIterator[tuple[Daemon, Path]]:
    """The daemon with ``tables``, and a config file that points ``pinclaw status`` at it."""
    port = free_port()
    tables = {
        "heartbeat": {"interval": "0"},
        "web": {"listen": f"127.0.0.1:{port}", "panel": False},
        **tables,
    }
    channel = telegram_channel(telegram)
    home = tmp_path / "home"
    config = write_config(
        home,
        f'[provider]\nkind = "openai"\nmodel = "fake"\nbase_url = "{llm.url}/v1"\n'
        f'[web]\nlisten = "127.0.0.1:{port}"\n',
    )
    async with running_daemon(tmp_path, llm, {"telegram": channel}, tables=tables) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon, config


async def pinclaw(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed command, in a thread: the daemon answers on this loop."""
    home = config.parent.parent
    return await asyncio.to_thread(run, home, *args, "--config", str(config))


async def get(daemon: Daemon, path: str) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.get(f"{daemon.web.url}{path}")


async def ring(daemon: Daemon, body: str) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.post(
            f"{daemon.web.url}/hooks/doorbell",
            content=body,
            headers={"Authorization": f"Bearer {SECRET}"},
        )


def sample(text: str, name: str, **labels: str) -> float:
    """One sample's value in the Prometheus text (0 when it is not there yet)."""
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    found = re.search(rf"^{re.escape(name)}\{{{re.escape(wanted)}\}} (\S+)$", text, re.M)
    return float(found[1]) if found else 0.0


def ha_tables(url: str, token: str = TOKEN) -> dict[str, Any]:
    return {"url": url, "token": token, "allow": ["cover.garage"]}


async def test_status_shows_each_trigger_and_a_down_home_assistant_with_its_reason(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    tables = {
        "triggers": [DOORBELL, GARAGE, PORCH],
        "home_assistant": ha_tables(f"http://127.0.0.1:{closed_port()}"),
    }
    async with daemon_with(tmp_path, llm, telegram, tables) as (daemon, config):
        assert daemon.triggers is not None
        service = daemon.triggers
        for _ in range(100):  # the first try to connect fails within moments
            ha_down = [s for s in service.states() if s.what == "ha:cover.garage"]
            if ha_down and ha_down[0].detail.startswith("reconnecting"):
                break
            await asyncio.sleep(0.05)
        assert [s.ok for s in ha_down] == [False]
        assert ha_down[0].detail.startswith("reconnecting to ws://127.0.0.1:")
        health = await get(daemon, "/healthz")
        assert health.status_code == 200 and health.json()["ok"] is True  # not PinClaw's fault
        report = (await get(daemon, "/status")).json()
        shown = await pinclaw(config, "status")
    by_name = {t["name"]: t for t in report["triggers"]}
    assert by_name["doorbell"] == {
        "name": "doorbell", "on": "webhook", "enabled": True, "ok": True,
        "detail": "POST /hooks/doorbell",
    }  # fmt: skip
    assert by_name["garage"]["ok"] is False and by_name["garage"]["detail"] == ha_down[0].detail
    assert by_name["porch"] == {
        "name": "porch", "on": "webhook", "enabled": False, "ok": True, "detail": "disabled"
    }  # fmt: skip
    assert shown.returncode == 0, shown.stdout + shown.stderr  # healthy: HA is outside
    lines = shown.stdout.splitlines()
    start = lines.index("Triggers: 3, 1 not watching")
    assert lines[start + 1 : start + 4] == [
        "  doorbell  webhook: POST /hooks/doorbell",
        f"  garage    ha:cover.garage: {ha_down[0].detail}  ✗",
        "  porch     webhook: disabled",
    ]
    assert "Health: ok" in lines


def test_a_report_without_triggers_has_no_triggers_line() -> None:
    report = {"ok": True, "version": "0", "uptime_s": 5, "pid": 1, "triggers": []}
    assert "Triggers" not in describe(report, now=0.0)
    older = {"ok": True, "version": "0", "uptime_s": 5, "pid": 1}  # a daemon before triggers
    assert "Triggers" not in describe(older, now=0.0)


async def test_a_webhook_firing_shows_in_metrics_with_its_source_up(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    with FakeHomeAssistant.running() as ha:
        tables = {"triggers": [DOORBELL, GARAGE], "home_assistant": ha_tables(ha.url)}
        async with daemon_with(tmp_path, llm, telegram, tables) as (daemon, _):
            before = (await get(daemon, "/metrics")).text
            assert (await ring(daemon, "front door")).status_code == 202
            await telegram.await_until(
                lambda: (
                    "Someone rang: front door" in [m.text for m in telegram.sent(OWNER)] or None
                ),
                10,
            )
            await asyncio.sleep(0.2)  # the delivery is counted after the send returns
            after = (await get(daemon, "/metrics")).text
            ha.refuse_websockets(True)
            ha.drop_connections()
            assert daemon.triggers is not None
            service = daemon.triggers
            for _ in range(100):
                if not all(s.ok for s in service.states()):
                    break
                await asyncio.sleep(0.05)
            down = (await get(daemon, "/metrics")).text
    counted = "pinclaw_triggers_fired_total"
    for outcome in ("fired", "sent"):
        grew = sample(after, counted, trigger="doorbell", outcome=outcome) - sample(
            before, counted, trigger="doorbell", outcome=outcome
        )
        assert grew == 1.0, outcome
    up = "pinclaw_trigger_source_up"
    assert sample(after, up, source="webhook doorbell") == 1.0
    assert sample(after, up, source="ha:cover.garage") == 1.0
    assert f'{up}{{source="ha:cover.garage"}} 0.0' in down
    assert sample(down, up, source="webhook doorbell") == 1.0


def doctor_config(home: Path, llm: FakeLLM, *, web: str, triggers: str, extra: str = "") -> Path:
    body = (
        f'[provider]\nkind = "openai"\nmodel = "local-model"\nbase_url = "{llm.url}/v1"\n'
        f"[web]\n{web}\n"
        '[hardware]\npin_factory = "mock"\n'
        '[hardware.gpio.door]\npin = 27\nkind = "input"\n'
        "[hardware.gpio.porch_light]\npin = 17\n"
        f"{extra}{triggers}"
    )
    path = write_config(home, body)
    path.parent.chmod(0o700)
    path.chmod(0o600)
    return path


def doctor(home: Path) -> subprocess.CompletedProcess[str]:
    return run(home, "doctor", env={"XDG_CONFIG_HOME": str(home / ".config")})


def line(done: subprocess.CompletedProcess[str], start: str) -> str:
    """The one report line whose text (after its mark) starts with ``start``."""
    found = [r for r in done.stdout.splitlines() if r.partition(" ")[2].startswith(start)]
    assert len(found) == 1, done.stdout
    return found[0]


TRIGGER_TABLES = f"""
[[triggers]]
name = "doorbell"
on = "webhook"
secret = "{SECRET}"
say = "Someone rang"

[[triggers]]
name = "door"
on = "gpio:door"
when = "off"
say = "The door closed"

[[triggers]]
name = "light"
on = "gpio:porch_light"
say = "The light changed"

[[triggers]]
name = "garage"
on = "ha:cover.garage"
when = "open"
say = "The garage door is open"
"""


def test_doctor_checks_each_trigger_and_home_assistant_s_websocket(
    llm: FakeLLM, home: Path
) -> None:
    with FakeHomeAssistant.running() as ha:
        extra = f'[home_assistant]\nurl = "{ha.url}"\ntoken = "{TOKEN}"\nallow = ["cover"]\n'
        config = doctor_config(
            home, llm, web=f'listen = "127.0.0.1:{closed_port()}"', triggers=TRIGGER_TABLES,
            extra=extra,
        )  # fmt: skip
        done = doctor(home)
        accepted = ha.websocket.accepted
    assert done.returncode == 1, done.stdout  # the trigger on an output fails
    assert "Traceback" not in done.stderr
    assert line(done, "trigger light:") == (
        "✗ trigger light: gpio.porch_light is an output; a trigger watches an input "
        f"— fix triggers[2] in {config}; `pinclaw run` refuses to start with it"
    )
    expected = "✓ trigger door: gpio:door, pin 27, an input; fires when it turns off"
    assert line(done, "trigger door:") == expected
    assert line(done, "trigger doorbell:").startswith("! trigger doorbell: POST http://127.0.0.1:")
    assert "on the loopback: only this machine can call it — " in line(done, "trigger doorbell:")
    assert line(done, "trigger garage:").startswith("✓ trigger garage: ha:cover.garage")
    assert line(done, "Home Assistant WebSocket") == (
        f"✓ Home Assistant WebSocket: Home Assistant 2024.3.3 at "
        f"{ha.url.replace('http://', 'ws://')}/api/websocket accepts the token"
    )
    assert accepted == 1
    assert SECRET not in done.stdout and TOKEN not in done.stdout
    assert done.stdout.splitlines()[-1] == "1 check failed."


def test_doctor_warns_that_nobody_can_call_a_hook_while_the_endpoint_is_off(
    llm: FakeLLM, home: Path
) -> None:
    doorbell = TRIGGER_TABLES.split("[[triggers]]")[1]
    doctor_config(home, llm, web='listen = "off"', triggers=f"[[triggers]]{doorbell}")
    done = doctor(home)
    assert done.returncode == 0, done.stdout
    assert line(done, "trigger doorbell:") == (
        "! trigger doorbell: POST /hooks/doorbell, but the HTTP endpoint is off ([web] listen = "
        '"off"), so nobody can call it — set [web] listen (e.g. "127.0.0.1:8765" behind a '
        "reverse proxy)"
    )
    assert "Home Assistant WebSocket" not in done.stdout  # no trigger follows an entity


@pytest.mark.parametrize("wrong", ["token", "url", "refusing"])
async def test_the_websocket_check_says_what_is_wrong_with_home_assistant(wrong: str) -> None:
    with FakeHomeAssistant.running() as ha:
        ha.refuse_websockets(wrong == "refusing")
        url = f"http://127.0.0.1:{closed_port()}" if wrong == "url" else ha.url
        token = "not-the-token" if wrong == "token" else TOKEN
        settings = HomeAssistantConfig(url=url, token=SecretStr(token))
        found: Finding = await home_assistant(settings, 5.0)
    assert found.status == "fail"
    where = f"{url.replace('http://', 'ws://')}/api/websocket"
    if wrong == "token":
        assert (
            found.text == f"Home Assistant WebSocket: Home Assistant at {where} refused the token"
        )
        assert "long-lived access token" in found.fix
    elif wrong == "url":
        assert found.text.startswith(f"Home Assistant WebSocket: cannot reach {where} (")
    else:
        assert found.text == f"Home Assistant WebSocket: {where} answered HTTP 503, not a WebSocket"
    assert "not-the-token" not in found.text + found.fix
