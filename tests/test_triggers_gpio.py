"""GPIO triggers end to end: gpiozero's mock pins, the real daemon, PTB, and the fake
Telegram server as the chat that receives what the trigger says.

``[hardware] pin_factory = "mock"`` makes the daemon's ``GpioBank`` build a
``MockFactory``; the test reaches it through the GPIO tools (``gpio_read`` is a
``GpioTool`` with the bank) and drives the input pin from a worker thread, as
gpiozero's own callback thread would. Ada (7001) is the owner and the chat.

gpiozero's ``MockPin`` stores ``bounce`` but does not apply it (real pin
libraries do), so the chattering test shows that ``bounce_ms`` reaches the pin
and that the trigger's ``cooldown`` turns a burst of edges into one message.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from gpiozero.pins.mock import MockFactory, MockPin

from bot.daemon.main import Daemon
from bot.hardware.gpio import GpioBank
from bot.triggers.sources import SourceState
from tests.daemon_harness import running_daemon
from tests.fake_llm import FakeLLM
from tests.fake_telegram import FakeTelegram
from tests.trigger_harness import OWNER, arrives, telegram_channel, texts, until
from tools.gpio import GpioTool

PIN = 17


def door(**extra: Any) -> dict[str, Any]:
    return {
        "name": "door",
        "on": "gpio:door_sensor",
        "to": f"telegram:{OWNER}",
        "say": "The {device} is {state} (pin {pin})",
        **extra,
    }


@asynccontextmanager
async def daemon_with(
    tmp_path: Path,
    llm: FakeLLM,
    telegram: FakeTelegram,
    *triggers: dict[str, Any],
    **sensor: Any,
) -> AsyncIterator[Daemon]:
    hardware = {
        "pin_factory": "mock",
        "gpio": {"door_sensor": {"pin": PIN, "kind": "input", **sensor}},
    }
    tables = {"heartbeat": {"interval": "0"}, "hardware": hardware, "triggers": list(triggers)}
    channel = telegram_channel(telegram)
    async with running_daemon(tmp_path, llm, {"telegram": channel}, tables=tables) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


def bank_of(daemon: Daemon) -> GpioBank:
    tool = daemon.app.tools.get("gpio_read")
    assert isinstance(tool, GpioTool)
    return tool.bank


def gpio_state(daemon: Daemon) -> SourceState | None:
    assert daemon.triggers is not None
    return next((s for s in daemon.triggers.states() if s.what == "gpio:door_sensor"), None)


async def door_pin(daemon: Daemon) -> MockPin:
    """The input's mock pin, once the trigger source has it open and watched."""
    state = await until(lambda: gpio_state(daemon))
    assert state.ok, state.detail
    factory = bank_of(daemon).factory
    assert isinstance(factory, MockFactory)
    pin: MockPin = factory.pin(PIN)
    return pin


async def drive(pin: MockPin, *levels: bool) -> None:
    """Drive the input to each level in turn, from a thread (gpiozero calls back there)."""

    def run() -> None:
        for level in levels:
            pin.drive_high() if level else pin.drive_low()

    await asyncio.to_thread(run)


@pytest.mark.parametrize(
    ("wiring", "edges"),
    [
        ({}, (True,)),  # pull-down: on = high
        ({"pull_up": True}, (False,)),  # a switch to ground: on = low
        ({"pull_up": True, "active_low": False}, (False, True)),  # normally closed: on = high
    ],
    ids=["pull-down", "pull-up", "normally-closed"],
)
async def test_an_edge_puts_the_text_into_the_chat_once(
    tmp_path: Path,
    llm: FakeLLM,
    telegram: FakeTelegram,
    wiring: dict[str, Any],
    edges: tuple[bool, ...],
) -> None:
    async with daemon_with(tmp_path, llm, telegram, door(), **wiring) as daemon:
        pin = await door_pin(daemon)
        state = gpio_state(daemon)
        assert state is not None and state.detail == f"pin {PIN} claimed, watching for on"
        await drive(pin, *edges)
        await arrives(telegram, f"The door_sensor is on (pin {PIN})")
        # The tools read the very device the trigger watches: the pin is open once.
        assert (await bank_of(daemon).read("door_sensor")).on is True
        await drive(pin, not edges[-1])  # the off edge: this trigger waits for on only
        await asyncio.sleep(0.5)
        assert daemon.triggers is not None
        [firing] = await daemon.triggers.store.history()
        assert firing.event.summary == "door_sensor turned on"
        assert firing.event.untrusted is False
    assert texts(telegram) == [f"The door_sensor is on (pin {PIN})"]
    assert llm.requests == []  # say needs no model


async def test_when_off_fires_on_the_falling_edge_only(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with daemon_with(tmp_path, llm, telegram, door(when="off")) as daemon:
        pin = await door_pin(daemon)
        await drive(pin, True)
        await asyncio.sleep(0.3)
        assert texts(telegram) == []
        await drive(pin, False)
        await arrives(telegram, f"The door_sensor is off (pin {PIN})")
        await asyncio.sleep(0.3)
    assert texts(telegram) == [f"The door_sensor is off (pin {PIN})"]


async def test_a_short_press_does_not_fire_and_a_long_hold_does(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    held = door(say="{device} held {state} for {held_s} s", **{"for": "1s"})
    async with daemon_with(tmp_path, llm, telegram, held) as daemon:
        pin = await door_pin(daemon)
        state = gpio_state(daemon)
        assert state is not None and state.detail.endswith("watching for on held 1 s")
        await drive(pin, True)
        await asyncio.sleep(0.4)
        await drive(pin, False)  # let go before the second is up
        await asyncio.sleep(1.2)
        assert texts(telegram) == []
        pressed = time.monotonic()
        await drive(pin, True)
        await arrives(telegram, "door_sensor held on for 1 s")
        assert time.monotonic() - pressed >= 1.0  # not before the hold was complete
        assert daemon.triggers is not None
        [firing] = await daemon.triggers.store.history()
        assert firing.event.summary == "door_sensor has been on for 1 s"
    assert texts(telegram) == ["door_sensor held on for 1 s"]


async def test_a_chattering_switch_sends_one_message(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with daemon_with(tmp_path, llm, telegram, door(cooldown="1m"), bounce_ms=50) as daemon:
        pin = await door_pin(daemon)
        assert pin.bounce == 0.05  # bounce_ms became gpiozero's bounce_time on the pin
        await drive(pin, *[True, False] * 6)
        await arrives(telegram, f"The door_sensor is on (pin {PIN})")
        firings = await until_history(daemon, 6)  # six on edges, each judged
        assert sorted(f.outcome for f in firings) == ["cooldown"] * 5 + ["fired"]
        await asyncio.sleep(0.5)
        assert daemon.triggers is not None
        assert len(await daemon.triggers.store.history()) == 6
    assert texts(telegram) == [f"The door_sensor is on (pin {PIN})"]


async def until_history(daemon: Daemon, count: int) -> list[Any]:
    assert daemon.triggers is not None
    deadline = time.monotonic() + 10
    while len(found := await daemon.triggers.store.history()) < count:
        assert time.monotonic() < deadline, f"{len(found)} firings, not {count}"
        await asyncio.sleep(0.05)
    return found
