"""Home Assistant triggers end to end: the real daemon holds a WebSocket to the fake Home
Assistant (which speaks the documented WebSocket API), and the fake Telegram server is
the chat that receives what the trigger says.

Ada (7001) is the owner. The fake home has ``cover.garage`` ("Garage door"),
closed at the start, and ``light.kitchen``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest

from bot.daemon.main import Daemon
from bot.triggers.sources import SourceState
from bot.triggers.spec import Trigger
from tests.daemon_harness import running_daemon
from tests.fake_home_assistant import TOKEN, FakeHomeAssistant
from tests.fake_llm import FakeLLM
from tests.fake_telegram import FakeTelegram
from tests.trigger_harness import OWNER, arrives, telegram_channel, texts


@pytest.fixture
def ha() -> Iterator[FakeHomeAssistant]:
    with FakeHomeAssistant.running() as server:
        yield server


def garage(**extra: Any) -> dict[str, Any]:
    return {
        "name": "garage",
        "on": "ha:cover.garage",
        "when": "open",
        "to": f"telegram:{OWNER}",
        "say": "{name} is {state} (was {old_state})",
        **extra,
    }


@asynccontextmanager
async def daemon_with(
    tmp_path: Path,
    llm: FakeLLM,
    telegram: FakeTelegram,
    ha: FakeHomeAssistant,
    *triggers: dict[str, Any],
    token: str = TOKEN,
) -> AsyncIterator[Daemon]:
    tables = {
        "heartbeat": {"interval": "0"},
        "home_assistant": {"url": ha.url, "token": token, "allow": ["cover", "light.kitchen"]},
        "triggers": list(triggers) or [garage()],
    }
    channel = telegram_channel(telegram)
    async with running_daemon(tmp_path, llm, {"telegram": channel}, tables=tables) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


def ha_states(daemon: Daemon) -> list[SourceState]:
    assert daemon.triggers is not None
    return [s for s in daemon.triggers.states() if s.what.startswith("ha:")]


async def eventually(predicate: Callable[[], bool], within: float = 10.0) -> None:
    """Poll state that has nothing to wait on (a source's state, log records)."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(0.02)


async def connected(daemon: Daemon) -> None:
    """Until the source has read the states over an authenticated connection."""
    await eventually(lambda: bool(ha_states(daemon)) and all(s.ok for s in ha_states(daemon)))


async def test_a_change_to_the_when_state_is_said_in_the_chat_once(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, ha: FakeHomeAssistant
) -> None:
    opened = garage(say="{name} is {state} at {attributes.current_position}% (was {old_state})")
    async with daemon_with(tmp_path, llm, telegram, ha, opened) as daemon:
        await connected(daemon)
        [state] = ha_states(daemon)
        assert (state.what, state.detail) == (
            "ha:cover.garage",
            f"connected to {ha.url.replace('http', 'ws')}/api/websocket; now closed",
        )
        async with httpx.AsyncClient() as client:  # opened through Home Assistant's REST API
            answer = await client.post(
                f"{ha.url}/api/services/cover/open_cover",
                json={"entity_id": "cover.garage"},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
        assert answer.status_code == 200
        await arrives(telegram, "Garage door is open at 100% (was closed)")
        await asyncio.sleep(0.5)
        assert daemon.triggers is not None
        [firing] = await daemon.triggers.store.history()
        assert firing.event.summary == "cover.garage changed from closed to open"
        assert firing.event.untrusted
    assert texts(telegram) == ["Garage door is open at 100% (was closed)"]
    assert llm.requests == []  # say needs no model
    sent = ha.websocket.messages()
    assert sent[0] == {"type": "auth", "access_token": TOKEN}
    assert {"id": 1, "type": "subscribe_events", "event_type": "state_changed"} in sent
    assert {"id": 2, "type": "get_states"} in sent


async def test_attribute_changes_other_entities_and_unavailable_blips_do_not_fire(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, ha: FakeHomeAssistant
) -> None:
    moves = garage(name="garage-moves", when="", say="{entity}: {old_state} to {state}")
    async with daemon_with(tmp_path, llm, telegram, ha, moves) as daemon:
        await connected(daemon)
        ha.set_state("cover.garage", "closed", current_position=3)  # attributes only
        ha.set_state("light.kitchen", "off")  # not watched
        ha.set_state("cover.garage", "unavailable")  # Home Assistant lost the device...
        ha.set_state("cover.garage", "closed")  # ...and found it as it was
        ha.set_state("cover.garage", "open")  # the one real change, sent last
        await arrives(telegram, "cover.garage: closed to open")
        await asyncio.sleep(0.5)
        assert daemon.triggers is not None
        assert [f.outcome for f in await daemon.triggers.store.history()] == ["fired"]
    assert texts(telegram) == ["cover.garage: closed to open"]


async def test_a_wrong_token_is_logged_in_one_clear_line_and_nothing_fires(
    tmp_path: Path,
    llm: FakeLLM,
    telegram: FakeTelegram,
    ha: FakeHomeAssistant,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.triggers.sources.ha")
    wrong = "not-the-token-0123456789"
    async with daemon_with(tmp_path, llm, telegram, ha, garage(), token=wrong) as daemon:
        await eventually(lambda: "refused the access token" in caplog.text)
        [state] = ha_states(daemon)
        assert not state.ok and state.detail.startswith("auth refused:")
        ha.set_state("cover.garage", "open")
        await asyncio.sleep(1.0)
        assert daemon.triggers is not None
        assert await daemon.triggers.store.history() == []
    refusals = [r for r in caplog.records if "refused the access token" in r.getMessage()]
    assert len(refusals) == 1
    assert "[home_assistant] token" in refusals[0].getMessage()
    assert wrong not in caplog.text
    assert texts(telegram) == []
    assert ha.websocket.accepted == 0


async def test_a_change_while_the_connection_was_down_is_caught_up_once(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, ha: FakeHomeAssistant
) -> None:
    async with daemon_with(tmp_path, llm, telegram, ha) as daemon:
        await connected(daemon)
        ha.refuse_websockets(True)
        ha.drop_connections()
        await eventually(lambda: ha_states(daemon)[0].detail.startswith("reconnecting to"))
        ha.set_state("cover.garage", "open")  # nobody is subscribed to hear it
        ha.set_state("light.kitchen", "off")
        ha.refuse_websockets(False)
        await arrives(telegram, "Garage door is open (was closed)")
        await connected(daemon)
        assert daemon.triggers is not None
        [firing] = await daemon.triggers.store.history()
        assert firing.event.summary == (
            "cover.garage changed from closed to open "
            "(caught up after reconnecting to Home Assistant)"
        )
        ha.set_state("cover.garage", "closed")  # the new subscription hears live changes
        ha.set_state("cover.garage", "open")
        await telegram.await_until(lambda: len(texts(telegram)) == 2 or None)
        await asyncio.sleep(0.5)
    assert texts(telegram) == ["Garage door is open (was closed)"] * 2
    assert ha.websocket.accepted == 2


async def test_for_a_state_that_flips_back_quickly_does_not_fire(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, ha: FakeHomeAssistant
) -> None:
    held = garage(**{"for": "1s"}, say="{name} has stayed {state}")
    async with daemon_with(tmp_path, llm, telegram, ha, held) as daemon:
        await connected(daemon)
        ha.set_state("cover.garage", "open")
        ha.set_state("cover.garage", "closed")  # back at once: the wait is cancelled
        await asyncio.sleep(1.5)
        assert texts(telegram) == []
        ha.set_state("cover.garage", "open")  # and this time it stays
        await arrives(telegram, "Garage door has stayed open")
        assert daemon.triggers is not None
        [firing] = await daemon.triggers.store.history()
        assert firing.event.summary == (
            "cover.garage changed from closed to open, and it has been open for 1s"
        )
        await asyncio.sleep(0.5)
    assert texts(telegram) == ["Garage door has stayed open"]


async def test_a_trigger_added_later_is_watched_on_the_same_connection(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, ha: FakeHomeAssistant
) -> None:
    kitchen = Trigger(
        name="kitchen",
        on="ha:light.kitchen",
        when="off",
        to=f"telegram:{OWNER}",
        say="{name} went {state}",
        made_by="cli",
    )
    async with daemon_with(tmp_path, llm, telegram, ha) as daemon:
        await connected(daemon)
        assert daemon.triggers is not None
        await daemon.triggers.store.add(kitchen)  # as `pinclaw triggers add` stores it
        await daemon.triggers.reload()
        assert [s.what for s in ha_states(daemon)] == ["ha:cover.garage", "ha:light.kitchen"]
        ha.set_state("light.kitchen", "off")
        await arrives(telegram, "Kitchen light went off")
    assert ha.websocket.accepted == 1


async def test_the_fake_answers_the_other_documented_commands(ha: FakeHomeAssistant) -> None:
    url = f"{ha.url.replace('http', 'ws')}/api/websocket"
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        assert (await ws.receive_json())["type"] == "auth_required"
        await ws.send_json({"type": "auth", "access_token": TOKEN})
        assert (await ws.receive_json())["type"] == "auth_ok"
        await ws.send_json({"id": 1, "type": "ping"})
        assert await ws.receive_json() == {"id": 1, "type": "pong"}
        await ws.send_json({"id": 2, "type": "subscribe_events", "event_type": "state_changed"})
        assert (await ws.receive_json())["success"] is True
        ha.set_state("light.porch", "on")
        event = await ws.receive_json()
        assert (event["id"], event["type"], event["event"]["event_type"]) == (
            2, "event", "state_changed"
        )  # fmt: skip
        data = event["event"]["data"]
        assert (data["entity_id"], data["old_state"]["state"], data["new_state"]["state"]) == (
            "light.porch", "off", "on"
        )  # fmt: skip
        await ws.send_json({"id": 3, "type": "unsubscribe_events", "subscription": 2})
        assert (await ws.receive_json())["success"] is True
        await ws.send_json({"id": 3, "type": "ping"})
        assert (await ws.receive_json())["error"]["code"] == "id_reuse"
        await ws.send_json({"id": 4, "type": "no_such_command"})
        assert (await ws.receive_json())["error"]["code"] == "unknown_command"
        ha.set_state("light.porch", "off")  # unsubscribed: no event any more
        await ws.send_json({"id": 5, "type": "ping"})
        assert await ws.receive_json() == {"id": 5, "type": "pong"}
