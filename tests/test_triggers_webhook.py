"""Webhook triggers end to end: real HTTP POSTs to the daemon's endpoint, the real daemon,
PTB, and the fake Telegram server as the chat that receives what the trigger says.

Ada (7001) is the owner. The ``doorbell`` trigger is the issue's example: a
Bearer secret, a ``say`` text with the body in it, delivered to Ada's chat.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.daemon.main import Daemon
from tests.browser import free_port
from tests.daemon_harness import running_daemon
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.fake_telegram import FakeTelegram
from tests.trigger_harness import OWNER, arrives, telegram_channel, texts

SECRET = "doorbell-secret-0123456789"


def doorbell(**extra: Any) -> dict[str, Any]:
    return {
        "name": "doorbell",
        "on": "webhook",
        "secret": SECRET,
        "to": f"telegram:{OWNER}",
        "say": "Someone rang: {body}",
        **extra,
    }


@asynccontextmanager
async def daemon_with(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, *triggers: dict[str, Any]
) -> AsyncIterator[Daemon]:
    tables = {
        "heartbeat": {"interval": "0"},
        "web": {"listen": f"127.0.0.1:{free_port()}", "panel": False},
        "triggers": list(triggers) or [doorbell()],
    }
    channel = telegram_channel(telegram)
    async with running_daemon(tmp_path, llm, {"telegram": channel}, tables=tables) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


async def post(
    daemon: Daemon, body: str | bytes, *, name: str = "doorbell", **headers: str
) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.post(f"{daemon.web.url}/hooks/{name}", content=body, headers=headers)


def bearer(secret: str = SECRET) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def test_the_right_secret_puts_the_text_into_the_chat_once(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        answer = await post(daemon, "front door", **bearer())
        assert answer.status_code == 202, answer.text
        assert answer.json() == {"trigger": "doorbell", "outcome": "fired"}
        await arrives(telegram, "Someone rang: front door")
        await asyncio.sleep(0.5)
    assert texts(telegram) == ["Someone rang: front door"]
    assert llm.requests == []  # say needs no model


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Bearer wrong-secret-0123456789"},
        {"Authorization": f"Basic {SECRET}"},
        {"Authorization": f"Bearer {SECRET[:-1]}"},
        {},
    ],
    ids=["wrong", "not-bearer", "prefix", "none"],
)
async def test_a_wrong_secret_gets_401_and_nothing_is_sent(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, headers: dict[str, str]
) -> None:
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        answer = await post(daemon, "front door", **headers)
        assert answer.status_code == 401
        assert SECRET not in answer.text
        await asyncio.sleep(1.0)
        assert daemon.triggers is not None
        assert await daemon.triggers.store.history() == []
    assert texts(telegram) == []


async def test_the_same_idempotency_key_fires_once(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        first = await post(daemon, "ding", **bearer(), **{"Idempotency-Key": "delivery-1"})
        again = await post(daemon, "ding", **bearer(), **{"Idempotency-Key": "delivery-1"})
        other = await post(daemon, "dong", **bearer(), **{"Idempotency-Key": "delivery-2"})
        assert (first.status_code, again.status_code, other.status_code) == (202, 200, 202)
        assert again.json()["outcome"] == "duplicate"
        await arrives(telegram, "Someone rang: dong")
        await asyncio.sleep(0.5)
    assert sorted(texts(telegram)) == ["Someone rang: ding", "Someone rang: dong"]


async def test_an_hmac_signature_is_accepted_and_a_bad_one_refused(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    hook = doorbell(signature_header="X-Hub-Signature-256", say="Push to {repository.name}")
    body = json.dumps({"repository": {"name": "pinclaw"}}).encode()
    good = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    async with daemon_with(tmp_path, llm, telegram, hook) as daemon:
        bad = await post(daemon, body, **{"X-Hub-Signature-256": good[:-2] + "00"})
        plain = await post(daemon, body, **bearer())  # a signed hook wants the signature
        ok = await post(daemon, body, **{"X-Hub-Signature-256": good})
        assert (bad.status_code, plain.status_code, ok.status_code) == (401, 401, 202)
        await arrives(telegram, "Push to pinclaw")
    assert texts(telegram) == ["Push to pinclaw"]


async def test_a_body_above_the_cap_is_refused(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with daemon_with(tmp_path, llm, telegram, doorbell(max_bytes=1024)) as daemon:
        answer = await post(daemon, b"x" * 5000, **bearer())
        assert answer.status_code == 413
        unknown = await post(daemon, "x", name="nope", **bearer())
        assert unknown.status_code == 404
        await asyncio.sleep(0.5)
    assert texts(telegram) == []


async def test_a_post_while_the_chat_is_down_arrives_once_when_it_is_back(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        telegram.unreachable(True)
        telegram.drop_polls()
        status = daemon.channels["telegram"].status
        for _ in range(200):
            if status.state != "connected":
                break
            await asyncio.sleep(0.05)
        answer = await post(daemon, "while down", **bearer())
        assert answer.status_code == 202
        await asyncio.sleep(1.5)
        assert texts(telegram) == []
        telegram.unreachable(False)
        await arrives(telegram, "Someone rang: while down")
        await asyncio.sleep(1.0)
    assert texts(telegram) == ["Someone rang: while down"]


async def test_a_firing_not_delivered_before_a_restart_arrives_once_after_it(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        telegram.unreachable(True)
        telegram.drop_polls()
        answer = await post(daemon, "across a restart", **bearer())
        assert answer.status_code == 202
        await asyncio.sleep(1.0)
    assert texts(telegram) == []
    # The stop cut the send that waited to retry: nothing of the first daemon goes on
    # to send the message again once the chat is back (its cancel came twice).
    left = [t for t in asyncio.all_tasks() if "_send_and_mark" in repr(t.get_coro())]
    assert left == []
    telegram.unreachable(False)
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        await arrives(telegram, "Someone rang: across a restart")
        await asyncio.sleep(1.0)
        assert daemon.triggers is not None
        [firing] = await daemon.triggers.store.history()
        assert firing.status == "sent"
    assert texts(telegram) == ["Someone rang: across a restart"]


async def test_an_ask_trigger_runs_a_turn_whose_tool_calls_are_audited_as_the_trigger(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(CallTools([("clock", {})]), Say("Parcel at the door, noted at noon."))
    hook = doorbell(say="", ask="Tell me about this delivery in one line.")
    async with daemon_with(tmp_path, llm, telegram, hook) as daemon:
        answer = await post(daemon, '{"carrier": "DHL"}', **bearer())
        assert answer.status_code == 202
        await arrives(telegram, "Parcel at the door, noted at noon.")
        await asyncio.sleep(0.5)
    assert texts(telegram) == ["Parcel at the door, noted at noon."]
    asked = json.dumps(llm.requests[0].body)
    assert "Tell me about this delivery in one line." in asked and "DHL" in asked
    lines = (tmp_path / "state" / "audit.jsonl").read_text().splitlines()
    [clock] = [json.loads(line) for line in lines if json.loads(line).get("tool") == "clock"]
    assert clock["origin"] == "trigger:doorbell"
