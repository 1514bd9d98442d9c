"""Home Assistant triggers against a real Home Assistant core (``tests/real_home_assistant``).

The first run installs Home Assistant into a cached virtual environment (two to five
minutes); later runs start it in a couple of seconds. The real daemon watches
``input_boolean.garage_door`` over HA's WebSocket API; the test flips the helper through
HA's REST API, and the fake Telegram server is the chat that receives what the trigger says.
``Gate`` is a TCP pass-through between the daemon and HA that can be shut like a network
outage, so the catch-up after a reconnect is tested without depending on timing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.daemon.main import Daemon
from tests.daemon_harness import running_daemon
from tests.fake_llm import FakeLLM
from tests.fake_telegram import FakeTelegram
from tests.real_home_assistant import RealHomeAssistant, ensure_installed
from tests.trigger_harness import OWNER, telegram_channel, texts

GARAGE = "input_boolean.garage_door"


@pytest.fixture
async def real_ha(tmp_path: Path) -> AsyncIterator[RealHomeAssistant]:
    """A started Home Assistant core with a long-lived token; stopped afterwards."""
    hass = await asyncio.to_thread(ensure_installed)
    ha = RealHomeAssistant(hass, tmp_path / "ha")
    try:
        await ha.start()
        yield ha
    finally:
        await ha.stop()


def garage(**extra: Any) -> dict[str, Any]:
    return {
        "name": "garage",
        "on": f"ha:{GARAGE}",
        "when": "on",
        "to": f"telegram:{OWNER}",
        "say": "Garage: {state}",
        **extra,
    }


class Gate:
    """127.0.0.1:``port`` passed through to HA; ``shut`` drops every connection and holds
    new ones unanswered until ``open`` (then they go through, as after an outage)."""

    def __init__(self, target_port: int) -> None:
        self._target = target_port
        self._passing = asyncio.Event()
        self._passing.set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> Gate:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def shut(self) -> None:
        self._passing.clear()
        for writer in self._writers:
            writer.transport.abort()

    def open(self) -> None:
        self._passing.set()

    async def stop(self) -> None:
        self.shut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            await self._passing.wait()
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target)
            self._writers.add(up_writer)
            await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
        except OSError:
            writer.transport.abort()
        finally:
            self._writers.discard(writer)


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except OSError:
        pass
    finally:
        sink.transport.abort()


@asynccontextmanager
async def daemon_with(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, ha: RealHomeAssistant, url: str = ""
) -> AsyncIterator[Daemon]:
    tables = {
        "heartbeat": {"interval": "0"},
        "home_assistant": {"url": url or ha.url, "token": ha.token},
        "triggers": [garage()],
    }
    channel = telegram_channel(telegram)
    async with running_daemon(
        tmp_path / "pinclaw", llm, {"telegram": channel}, tables=tables
    ) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


def source_states(daemon: Daemon) -> str:
    assert daemon.triggers is not None
    return repr([s for src in daemon.triggers.sources.values() for s in src.states()])


async def delivered(telegram: FakeTelegram, ha: RealHomeAssistant, daemon: Daemon) -> None:
    """Wait for "Garage: on" in the chat; on a timeout, say what the source and HA did."""
    try:
        await telegram.await_until(lambda: "Garage: on" in texts(telegram) or None, timeout=30)
    except TimeoutError:
        raise AssertionError(
            f"nothing delivered; source: {source_states(daemon)}\nHA log:\n{ha.log_tail()}"
        ) from None


async def connected(daemon: Daemon) -> None:
    """Wait until the HA source says it is connected and watching the garage door."""
    assert daemon.triggers is not None
    for _ in range(300):
        source = daemon.triggers.sources.get("ha")
        if source is not None and any(s.ok and GARAGE in s.what for s in source.states()):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the HA source never connected: {source_states(daemon)}")


async def test_home_assistant_starts_and_its_token_passes_the_websocket_handshake(
    real_ha: RealHomeAssistant,
) -> None:
    frames: list[dict[str, Any]] = []
    async with aiohttp.ClientSession() as session, session.ws_connect(real_ha.ws_url) as ws:
        frames.append(await ws.receive_json(timeout=10))
        await ws.send_json({"type": "auth", "access_token": real_ha.token})
        frames.append(await ws.receive_json(timeout=10))
        await ws.send_json({"id": 1, "type": "get_states"})
        frames.append(await ws.receive_json(timeout=10))
        await ws.send_json({"type": "auth", "access_token": "not-a-token"})
    assert [f["type"] for f in frames] == ["auth_required", "auth_ok", "result"]
    assert frames[1]["ha_version"] == "2024.3.3"
    states = {s["entity_id"]: s["state"] for s in frames[2]["result"]}
    assert states[GARAGE] == "off"
    await real_ha.set_boolean(GARAGE, True)
    assert await real_ha.state(GARAGE) == "on"

    async with aiohttp.ClientSession() as session, session.ws_connect(real_ha.ws_url) as ws:
        await ws.receive_json(timeout=10)
        await ws.send_json({"type": "auth", "access_token": "not-a-token"})
        refused = await ws.receive_json(timeout=10)
    assert refused["type"] == "auth_invalid"


async def test_turning_the_boolean_on_in_home_assistant_tells_the_chat_once(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, real_ha: RealHomeAssistant
) -> None:
    async with daemon_with(tmp_path, llm, telegram, real_ha) as daemon:
        await connected(daemon)
        await real_ha.set_boolean(GARAGE, True)
        await delivered(telegram, real_ha, daemon)
        await asyncio.sleep(1.0)  # a second message would have come by now
    assert texts(telegram) == ["Garage: on"]
    assert llm.requests == []


async def test_a_change_right_after_home_assistant_restarts_is_caught_up(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, real_ha: RealHomeAssistant
) -> None:
    gate = await Gate(real_ha.port).start()
    try:
        async with daemon_with(
            tmp_path, llm, telegram, real_ha, f"http://127.0.0.1:{gate.port}"
        ) as daemon:
            await connected(daemon)
            gate.shut()  # the daemon loses HA, and its next try hangs until the gate opens
            await real_ha.stop()
            await real_ha.start()
            assert await real_ha.state(GARAGE) == "off"  # restored from before the restart
            await real_ha.set_boolean(GARAGE, True)  # the door opens while we are cut off
            gate.open()
            await delivered(telegram, real_ha, daemon)
            await asyncio.sleep(1.0)
            assert daemon.triggers is not None
            [firing] = await daemon.triggers.store.history()
        assert firing.event.fields["caught_up"] is True, firing
        assert firing.event.fields["old_state"] == "off"
        assert texts(telegram) == ["Garage: on"]
    finally:
        await gate.stop()


async def test_a_change_while_home_assistant_is_down_arrives_when_it_is_back(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, real_ha: RealHomeAssistant
) -> None:
    async with daemon_with(tmp_path, llm, telegram, real_ha) as daemon:
        await connected(daemon)
        await real_ha.stop()
        # HA comes back with the door already open (set before its HTTP server listens),
        # and the daemon reconnects on its own backoff, with no gate in between.
        await real_ha.start(garage_initially_on=True)
        assert await real_ha.state(GARAGE) == "on"
        await delivered(telegram, real_ha, daemon)
        await asyncio.sleep(1.0)
    assert texts(telegram) == ["Garage: on"]
