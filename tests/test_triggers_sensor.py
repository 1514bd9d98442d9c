"""Sensor-threshold triggers end to end: the real daemon reads an SHT31 through the real
smbus2 over the fake I2C kernel, and the fake Telegram server is the chat that hears it.

Ada (7001) is the owner. The greenhouse sensor is an SHT31 at 0x44 on bus 1; the
test sets its raw words and waits for the sensor to be measured again, so no
assertion depends on how fast anything runs. smbus2 opens ``/dev/i2c-1``: the
open of that path (the kernel boundary, like the ioctls) lands on the fake's file.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import smbus2.smbus2 as kernel_abi

from bot.daemon.main import Daemon
from tests.daemon_harness import running_daemon
from tests.fake_i2c import FakeI2c
from tests.fake_i2c_chips import FakeSht31
from tests.fake_llm import FakeLLM
from tests.fake_telegram import FakeTelegram
from tests.trigger_harness import OWNER, arrives, telegram_channel, texts

ADDRESS = 0x44
HARDWARE = {
    "i2c": {"buses": [1]},
    "sensors": {"greenhouse": {"driver": "sht31", "bus": 1, "address": ADDRESS}},
}
SAY = "{sensor} {quantity} is {value} {unit}, {condition}"


def raw_t(celsius: float) -> int:
    return round((celsius + 45) * 65535 / 175)


def raw_h(percent: float) -> int:
    return round(percent * 65535 / 100)


class DevI2c:
    """smbus2's ``os``: opening ``/dev/i2c-N`` opens the fake kernel's file for bus N."""

    def __init__(self, kernel: FakeI2c) -> None:
        self._pattern = kernel.path_pattern

    def open(self, path: str, flags: int, mode: int = 0o777) -> int:
        if path.startswith("/dev/i2c-"):
            path = self._pattern.format(bus=path.removeprefix("/dev/i2c-"))
        return os.open(path, flags, mode)

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


@pytest.fixture
def chip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSht31]:
    """The greenhouse SHT31, at 10 °C and 60 %RH."""
    kernel = FakeI2c(tmp_path)
    kernel.install(monkeypatch)
    monkeypatch.setattr(kernel_abi, "os", DevI2c(kernel))
    sht31 = FakeSht31(raw_t(10.0), raw_h(60.0))
    kernel.add_bus(1).attach(ADDRESS, sht31)
    yield sht31


def frost(**extra: Any) -> dict[str, Any]:
    return {
        "name": "frost",
        "on": "sensor:greenhouse.temperature",
        "when": "below 5",
        "every": "0.1s",
        "to": f"telegram:{OWNER}",
        "say": SAY,
        **extra,
    }


@asynccontextmanager
async def daemon_with(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, *triggers: dict[str, Any]
) -> AsyncIterator[Daemon]:
    tables = {
        "heartbeat": {"interval": "0"},
        "hardware": HARDWARE,
        "triggers": list(triggers) or [frost()],
    }
    channel = telegram_channel(telegram)
    async with running_daemon(tmp_path, llm, {"telegram": channel}, tables=tables) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


async def measured(chip: FakeSht31, count: int = 2) -> None:
    """Wait until the sensor was measured ``count`` more times (the first of them may have
    started before a value changed; the ones after it have the new value and were judged)."""
    target = chip.commands.count(0x2400) + count
    deadline = time.monotonic() + 10
    while chip.commands.count(0x2400) < target:
        assert time.monotonic() < deadline, "the sensor was not read"
        await asyncio.sleep(0.02)


async def set_and_read(chip: FakeSht31, *celsius: float) -> None:
    """Give the sensor each temperature in turn, each for at least one full reading."""
    for value in celsius:
        chip.raw_t = raw_t(value)
        await measured(chip)


async def delivered(daemon: Daemon) -> None:
    """Wait until no firing waits for delivery (so a restart does not send one again)."""
    assert daemon.triggers is not None
    deadline = time.monotonic() + 10
    while await daemon.triggers.store.pending():
        assert time.monotonic() < deadline, "a firing was not marked delivered"
        await asyncio.sleep(0.05)


async def events(daemon: Daemon, name: str = "frost") -> list[str]:
    """The summaries of the events the trigger took, oldest first."""
    assert daemon.triggers is not None
    firings = await daemon.triggers.store.history(name)
    return [f.event.summary for f in reversed(firings) if f.kind == "event"]


async def test_crossing_the_threshold_fires_once_with_the_value(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, chip: FakeSht31
) -> None:
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        await measured(chip, 3)
        assert await events(daemon) == []
        chip.raw_t = raw_t(4.8)
        await arrives(telegram, "greenhouse temperature is 4.8 °C, below 5")
        await measured(chip, 5)  # still cold: nothing more
        assert await events(daemon) == ["greenhouse temperature 4.8 °C, below 5"]
        assert daemon.triggers is not None
        [state] = daemon.triggers.states()
        assert state.what == "sensor:greenhouse.temperature" and state.ok
        assert state.detail == "frost: 4.8 °C, fired (below 5); armed again at 5.5 °C or more"
    assert texts(telegram) == ["greenhouse temperature is 4.8 °C, below 5"]
    assert llm.requests == []


async def test_a_value_hovering_at_the_threshold_fires_once(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, chip: FakeSht31
) -> None:
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        await set_and_read(chip, 4.8, 5.2, 4.9, 5.4, 4.7, 5.3, 4.9, 5.1)
        assert await events(daemon) == ["greenhouse temperature 4.8 °C, below 5"]
        await arrives(telegram, "greenhouse temperature is 4.8 °C, below 5")
        await asyncio.sleep(0.3)
    assert texts(telegram) == ["greenhouse temperature is 4.8 °C, below 5"]


async def test_back_past_the_hysteresis_and_below_again_fires_again(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, chip: FakeSht31
) -> None:
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        await set_and_read(chip, 4.8, 5.6, 4.6)
        await arrives(telegram, "greenhouse temperature is 4.6 °C, below 5")
        assert await events(daemon) == [
            "greenhouse temperature 4.8 °C, below 5",
            "greenhouse temperature 4.6 °C, below 5",
        ]
    assert texts(telegram) == [
        "greenhouse temperature is 4.8 °C, below 5",
        "greenhouse temperature is 4.6 °C, below 5",
    ]


async def test_a_dip_shorter_than_for_does_not_fire_and_a_long_one_does(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, chip: FakeSht31
) -> None:
    async with daemon_with(tmp_path, llm, telegram, frost(**{"for": "3s"})) as daemon:
        dipped = time.monotonic()
        await set_and_read(chip, 4.8, 4.8, 10.0)
        short = time.monotonic() - dipped
        await measured(chip, 3)
        assert short < 3  # the dip really was shorter than "for"
        assert await events(daemon) == []
        held = time.monotonic()
        chip.raw_t = raw_t(4.8)
        await arrives(telegram, "greenhouse temperature is 4.8 °C, below 5")
        assert time.monotonic() - held >= 3
    assert texts(telegram) == ["greenhouse temperature is 4.8 °C, below 5"]


async def test_above_fires_and_arms_again_below_the_threshold_minus_the_hysteresis(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, chip: FakeSht31
) -> None:
    damp = frost(
        name="damp", on="sensor:greenhouse.humidity", when="above 80", hysteresis=5,
        say="Humid: {value} {unit} ({condition}, threshold {threshold})",
    )  # fmt: skip
    async with daemon_with(tmp_path, llm, telegram, damp) as daemon:
        for percent in (85.0, 77.0, 83.0, 74.0, 86.0):
            chip.raw_h = raw_h(percent)
            await measured(chip)
        assert await events(daemon, "damp") == [
            "greenhouse humidity 85.0 %RH, above 80",
            "greenhouse humidity 86.0 %RH, above 80",
        ]
        await arrives(telegram, "Humid: 86.0 %RH (above 80, threshold 80)")
    assert texts(telegram) == [
        "Humid: 85.0 %RH (above 80, threshold 80)",
        "Humid: 86.0 %RH (above 80, threshold 80)",
    ]


async def test_a_restart_announces_a_new_crossing_but_not_the_same_cold_again(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, chip: FakeSht31
) -> None:
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        chip.raw_t = raw_t(4.8)
        await arrives(telegram, "greenhouse temperature is 4.8 °C, below 5")
        await delivered(daemon)
    async with daemon_with(tmp_path, llm, telegram) as daemon:  # still cold: not again
        await measured(chip, 4)
        assert len(await events(daemon)) == 1
        await set_and_read(chip, 7.0)  # warm when it stops
    chip.raw_t = raw_t(4.5)  # and cold again while it is down
    async with daemon_with(tmp_path, llm, telegram):
        await arrives(telegram, "greenhouse temperature is 4.5 °C, below 5")
    assert texts(telegram) == [
        "greenhouse temperature is 4.8 °C, below 5",
        "greenhouse temperature is 4.5 °C, below 5",
    ]


async def test_failed_readings_change_nothing_and_are_logged_once(
    tmp_path: Path,
    llm: FakeLLM,
    telegram: FakeTelegram,
    chip: FakeSht31,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        chip.raw_t = raw_t(4.8)
        await arrives(telegram, "greenhouse temperature is 4.8 °C, below 5")
        assert daemon.triggers is not None
        caplog.set_level(logging.WARNING, logger="bot.triggers.sources.sensor")
        chip.corrupt_crc = True  # every reading fails its checksum now
        chip.raw_t = raw_t(9.0)  # (which would arm it again, were it read)
        await measured(chip, 4)
        [state] = daemon.triggers.states()
        assert not state.ok
        assert state.detail.startswith("frost: the last reading failed: the SHT31 at 0x44")
        chip.raw_t = raw_t(4.8)
        chip.corrupt_crc = False
        await measured(chip, 3)
        assert await events(daemon) == ["greenhouse temperature 4.8 °C, below 5"]
        assert daemon.triggers.states()[0].ok
    failures = [r for r in caplog.records if "for its triggers failed" in r.getMessage()]
    assert len(failures) == 1, [r.getMessage() for r in failures]
    assert texts(telegram) == ["greenhouse temperature is 4.8 °C, below 5"]
