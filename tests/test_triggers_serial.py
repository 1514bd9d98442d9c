"""Serial triggers end to end: a device on a pty, the real daemon reading it with the real
pyserial, PTB, and the fake Telegram server as the chat that receives what is said.

The "device" is a pty pair behind a symlink, as ``/dev/serial/by-id/...`` links
point at ``/dev/ttyUSB0``: PinClaw opens the link, the test writes lines on the
master side. Unplugging closes both ends and removes the link; plugging in again
makes a new pty and points the link at it. Ada (7001) is the owner and the chat.
"""

from __future__ import annotations

import asyncio
import os
import tty
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.core.errors import ToolError
from bot.daemon.main import Daemon
from bot.hardware import serial_io
from bot.triggers.sources import SourceState
from tests.daemon_harness import running_daemon
from tests.fake_llm import FakeLLM
from tests.fake_telegram import FakeTelegram
from tests.trigger_harness import OWNER, arrives, telegram_channel, texts, until


class Board:
    """A serial device that speaks first, on a pty behind a stable path."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._master, self._slave = -1, -1

    def plug(self) -> None:
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # bytes as on a wire
        self.path.unlink(missing_ok=True)
        self.path.symlink_to(os.ttyname(self._slave))

    def unplug(self) -> None:
        os.close(self._master)
        os.close(self._slave)
        self._master = self._slave = -1
        self.path.unlink()

    def says(self, *lines: str, ending: str = "\n") -> None:
        os.write(self._master, "".join(line + ending for line in lines).encode())


@contextmanager
def board(tmp_path: Path) -> Iterator[Board]:
    device = Board(tmp_path / "ttyUSB0")
    device.plug()
    try:
        yield device
    finally:
        if device.path.is_symlink():
            device.unplug()


def trigger(name: str, pattern: str, say: str) -> dict[str, Any]:
    return {"name": name, "on": "serial:arduino", "pattern": pattern, "say": say,
            "to": f"telegram:{OWNER}"}  # fmt: skip


GREENHOUSE = trigger("greenhouse", r"temp=(?P<temp>-?\d+)", "Greenhouse at {temp} °C ({port})")
ALARM = trigger("alarm", r"^ALARM\b", "{port} raised: {line}")


@asynccontextmanager
async def daemon_with(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, port: str, *triggers: dict[str, Any]
) -> AsyncIterator[Daemon]:
    hardware = {"serial": {"arduino": {"port": port}}}
    tables = {"heartbeat": {"interval": "0"}, "hardware": hardware, "triggers": list(triggers)}
    channel = telegram_channel(telegram)
    async with running_daemon(tmp_path, llm, {"telegram": channel}, tables=tables) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


def port_state(daemon: Daemon) -> SourceState | None:
    assert daemon.triggers is not None
    return next((s for s in daemon.triggers.states() if s.what == "serial:arduino"), None)


async def reading(daemon: Daemon) -> SourceState:
    state: SourceState = await until(lambda: (s := port_state(daemon)) and s.ok and s)
    return state


async def test_a_matching_line_fires_with_its_group_and_others_do_not(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    with board(tmp_path) as device:
        async with daemon_with(tmp_path, llm, telegram, str(device.path), GREENHOUSE, ALARM) as d:
            state = await reading(d)
            assert state.detail == f"reading {device.path} for the triggers alarm, greenhouse"
            device.says("hello", "humidity=80")
            device.says("temp=3", ending="\r\n")  # Arduino's println
            await arrives(telegram, "Greenhouse at 3 °C (arduino)")
            device.says("ALARM door open")
            await arrives(telegram, "arduino raised: ALARM door open")
            await asyncio.sleep(0.5)
            assert d.triggers is not None
            firings = await d.triggers.store.history()
            assert sorted(f.trigger for f in firings) == ["alarm", "greenhouse"]
            assert all(f.event.untrusted for f in firings)  # text from a device
            [temp] = [f for f in firings if f.trigger == "greenhouse"]
            assert temp.event.fields["line"] == "temp=3" and temp.event.fields["match"] == "temp=3"
    assert texts(telegram) == ["Greenhouse at 3 °C (arduino)", "arduino raised: ALARM door open"]
    assert llm.requests == []


async def test_the_port_vanishing_and_coming_back_resumes(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    with board(tmp_path) as device:
        async with daemon_with(tmp_path, llm, telegram, str(device.path), GREENHOUSE) as d:
            await reading(d)
            device.says("temp=4")
            await arrives(telegram, "Greenhouse at 4 °C (arduino)")
            device.unplug()
            lost = await until(lambda: (s := port_state(d)) and not s.ok and s)
            assert str(device.path) in lost.detail
            await until(lambda: "is not there" in getattr(port_state(d), "detail", ""))
            device.plug()
            await reading(d)
            device.says("temp=5")
            await arrives(telegram, "Greenhouse at 5 °C (arduino)")
    assert texts(telegram) == ["Greenhouse at 4 °C (arduino)", "Greenhouse at 5 °C (arduino)"]


async def test_a_port_that_is_not_there_yet_is_waited_for(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    device = Board(tmp_path / "ttyUSB0")
    async with daemon_with(tmp_path, llm, telegram, str(device.path), GREENHOUSE) as d:
        # The first state is "opening …"; the reader then finds the device missing.
        missing = await until(lambda: (s := port_state(d)) and "not there" in s.detail and s)
        assert not missing.ok
        assert missing.detail.startswith(f"{device.path} is not there; is the device plugged in?")
        device.plug()
        try:
            await reading(d)
            device.says("temp=-2")
            await arrives(telegram, "Greenhouse at -2 °C (arduino)")
        finally:
            device.unplug()


async def test_the_serial_tool_refuses_a_port_a_trigger_reads(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    with board(tmp_path) as device:
        async with daemon_with(tmp_path, llm, telegram, str(device.path), GREENHOUSE) as d:
            await reading(d)
            link = serial_io.make_links(d.app.loaded.config.hardware)["arduino"]
            with pytest.raises(ToolError) as refused:
                await link.send("PING")
            assert str(refused.value) == (
                "the serial port arduino is kept open by the trigger greenhouse, which reads "
                "its lines; PinClaw cannot send to it meanwhile (disable or remove that trigger "
                "first)"
            )
        assert serial_io.holder(str(device.path)) is None  # the daemon stopped: free again
