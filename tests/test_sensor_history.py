"""The readings history and ``sensor_chart``: sensors read through the fake I2C kernel,
readings stored in SQLite, charts drawn by the real matplotlib, the agent end to end.

Sensors are read by the real smbus2 over ``tests/fake_i2c.py``; the history is
opened by ``open_sensor_history``, the same call the composition root makes.
PNGs are checked byte by byte (signature, IHDR size) and decoded by matplotlib.
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.agent.tool_registry import ToolRegistry
from bot.config import LoadedConfig, parse_config
from bot.config.hardware import HardwareConfig
from bot.core.conversation import ToolCall
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext, ToolResult
from bot.hardware.chart import HEIGHT_PX, WIDTH_PX
from bot.hardware.history import DAY_S, SensorHistory
from bot.hardware.i2c import I2cBank
from bot.hardware.sensors import Reading, SensorBank
from bot.store.db import Database
from bot.store.readings import Measurement, ReadingStore
from tests.cli_helpers import local_config, run, write_config
from tests.daemon_harness import running_daemon
from tests.fake_i2c import FakeBus, FakeI2c
from tests.fake_i2c_chips import BOSCH_EXAMPLE_TRIM, FakeBme280, FakeSht31
from tests.fake_llm import CallTools, FakeLLM, Say
from tools.i2c import make_tools
from tools.sensor_chart import open_sensor_history

ROOT = Path(__file__).resolve().parent.parent
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ZONE = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 11, 25, 16, 10, tzinfo=UTC)  # 17:10 in Berlin
HARDWARE: dict[str, Any] = {
    "i2c": {"buses": [1]},
    "sensors": {
        "greenhouse": {"driver": "bme280", "bus": 1, "address": 0x76},
        "shed": {"driver": "sht31", "bus": 1, "address": 0x44},
    },
}
SHT_T, SHT_H = 0x6666, 0x7333  # 25.0 °C, 45.0 %RH


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk, after checking the signature."""
    assert data[:8] == PNG_SIGNATURE
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (length, kind) == (13, b"IHDR")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def loaded_config(tmp_path: Path, hardware: dict[str, Any], **tables: Any) -> LoadedConfig:
    raw = {"provider": {"kind": "ollama", "model": "m"}, "hardware": hardware, **tables}
    return LoadedConfig(parse_config(raw, {}), tmp_path / "c.toml", tmp_path / "state")


@dataclass
class Rig:
    bus: FakeBus
    db: Database
    store: ReadingStore
    history: SensorHistory
    tools: ToolRegistry
    workspace: Path

    async def call(self, name: str, now: datetime = NOW, **arguments: Any) -> ToolResult:
        ctx = ToolContext(SessionKey("test", "1"), self.workspace, ZONE, now=lambda: now)
        return await self.tools.execute(ToolCall("1", name, arguments), ctx)

    async def rows(self) -> list[tuple[Any, ...]]:
        found = await self.db.conn.execute_fetchall(
            "SELECT sensor, quantity, value, unit, at FROM sensor_readings ORDER BY id"
        )
        return [tuple(row) for row in found]


@pytest.fixture
async def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Rig]:
    """The I2C sensor tools on a fake bus, with the history opened as the daemon opens it."""
    kernel = FakeI2c(tmp_path)
    kernel.install(monkeypatch)
    bus = kernel.add_bus(1)
    bus.attach(0x76, FakeBme280(BOSCH_EXAMPLE_TRIM, adc_t=519888, adc_p=415148, adc_h=27600))
    bus.attach(0x44, FakeSht31(SHT_T, SHT_H))
    loaded = loaded_config(tmp_path, HARDWARE)
    hardware = loaded.config.hardware
    bank = I2cBank(hardware, device_path=kernel.path_pattern)
    tools = ToolRegistry(make_tools(bank, SensorBank(hardware, bank), hardware.call_timeout_s))
    db = Database(tmp_path / "pinclaw.db")
    await db.open()
    try:
        history = await open_sensor_history(db, loaded, tools)
        assert history is not None
        workspace = tmp_path / "workspace"
        workspace.mkdir()
        yield Rig(bus, db, ReadingStore(db), history, tools, workspace)
    finally:
        await db.close()


async def seed(
    store: ReadingStore, sensor: str, quantity: str, values: list[tuple[float, float]]
) -> None:
    """Store ``(hours before NOW, value)`` pairs."""
    unit = {"temperature": "°C", "humidity": "%RH", "pressure": "hPa"}[quantity]
    for hours_ago, value in values:
        at = (NOW - timedelta(hours=hours_ago)).timestamp()
        await store.add(sensor, [Measurement(quantity, value, unit)], at)


async def test_every_sensor_read_is_stored_with_its_values_and_time(rig: Rig) -> None:
    before = time.time()
    greenhouse = await rig.call("sensor_read", sensor="greenhouse")
    shed = await rig.call("sensor_read", sensor="shed")
    after = time.time()
    assert greenhouse.ok and shed.ok, (greenhouse, shed)
    rows = await rig.rows()
    assert [(r[0], r[1], r[3]) for r in rows] == [
        ("greenhouse", "temperature", "°C"),
        ("greenhouse", "humidity", "%RH"),
        ("greenhouse", "pressure", "hPa"),
        ("shed", "temperature", "°C"),
        ("shed", "humidity", "%RH"),
    ]
    assert rows[0][2] == pytest.approx(25.08, abs=0.005)  # Bosch's worked example
    assert rows[2][2] == pytest.approx(1006.5327, abs=0.001)
    assert rows[3][2] == pytest.approx(-45 + 175 * SHT_T / 65535)
    assert rows[4][2] == pytest.approx(100 * SHT_H / 65535)
    # The text the model got shows the same values that were stored.
    assert f"{rows[0][2]:.1f} °C, {rows[1][2]:.1f} %RH, {rows[2][2]:.1f} hPa" in greenhouse.output
    assert rows[0][4] == rows[1][4] == rows[2][4]  # one reading, one time
    assert before <= rows[0][4] <= rows[3][4] <= after


async def test_a_failed_read_stores_nothing(rig: Rig) -> None:
    rig.bus.chips.pop(0x44)
    result = await rig.call("sensor_read", sensor="shed")
    assert result.error == "nothing answered at 0x44 on bus 1 — check the wiring and the address"
    assert await rig.rows() == []


async def test_the_chart_is_a_png_of_the_stored_readings_with_a_summary(rig: Rig) -> None:
    await seed(
        rig.store,
        "greenhouse",
        "temperature",
        [(30, 5.0), (20, 18.5), (12, 24.9), (6, 16.2), (1, 21.05), (0.5, 22.1)],
    )
    await seed(rig.store, "greenhouse", "humidity", [(2, 99.0)])  # another series
    result = await rig.call("sensor_chart", sensor="greenhouse", quantity="temperature")
    assert result.ok, result.error
    path = "charts/greenhouse-temperature-20261125-1710.png"  # the local time, Berlin
    assert result.output.splitlines() == [
        f"Chart saved as {path} (a PNG image, 1000x500 pixels).",
        "greenhouse temperature, last 24 h: 5 readings from 2026-11-24 21:10 to "
        "2026-11-25 16:40; lowest 16.2 °C at 2026-11-25 11:10, highest 24.9 °C at "
        "2026-11-25 05:10, latest 22.1 °C at 2026-11-25 16:40.",
        f"To show it to the user, call send_file with path {path}.",
    ]
    data = (rig.workspace / path).read_bytes()
    assert png_size(data) == (WIDTH_PX, HEIGHT_PX) == (1000, 500)
    from matplotlib.image import imread

    pixels = imread(str(rig.workspace / path))
    assert pixels.shape[:2] == (500, 1000)
    red, green, blue = pixels[..., 0], pixels[..., 1], pixels[..., 2]
    line = (blue > 0.6) & (red < 0.3) & (green < 0.6)  # matplotlib's tab:blue
    assert line.sum() > 500  # the line was drawn, not just the axes
    assert [p.name for p in (rig.workspace / "charts").iterdir()] == [Path(path).name]


async def test_the_window_and_the_quantity_choose_the_readings(rig: Rig) -> None:
    await seed(rig.store, "shed", "humidity", [(100, 80.0), (50, 60.0), (3, 40.0)])
    result = await rig.call("sensor_chart", sensor="shed", quantity="humidity", hours=72)
    assert "shed humidity, last 3 days: 2 readings" in result.output
    assert "lowest 40.0 %RH" in result.output and "highest 60.0 %RH" in result.output
    assert "charts/shed-humidity-20261125-1710.png" in result.output
    wrong = await rig.call("sensor_chart", sensor="shed", quantity="pressure")
    assert wrong.error == "shed does not measure pressure; it measures temperature and humidity"
    too_long = await rig.call("sensor_chart", sensor="shed", hours=24 * 31)
    assert too_long.error is not None and "'hours'" in too_long.error


async def test_no_readings_give_a_clear_answer_and_no_file(rig: Rig) -> None:
    result = await rig.call("sensor_chart", sensor="greenhouse")
    assert result.ok
    assert result.output == (
        "There are no recorded temperature readings of greenhouse yet, so there is no "
        "chart. Readings are recorded each time sensor_read is used; read the sensor "
        "first, or chart again later."
    )
    await seed(rig.store, "greenhouse", "temperature", [(50, 19.0)])
    older = await rig.call("sensor_chart", sensor="greenhouse", hours=24)
    assert older.output == (
        "There are no temperature readings of greenhouse from the last 24 h, so there is "
        "no chart. The latest is from 2026-11-23 15:10; ask for a longer period."
    )
    assert not (rig.workspace / "charts").exists()


async def test_read_then_chart_shows_the_reading_just_taken(rig: Rig) -> None:
    await rig.call("sensor_read", sensor="shed")
    result = await rig.call("sensor_chart", sensor="shed", now=datetime.now(UTC))
    assert ": 1 reading from " in result.output
    assert "latest 25.0 °C" in result.output


async def test_without_matplotlib_the_numbers_still_come_back(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    await seed(rig.store, "greenhouse", "pressure", [(2, 1001.0), (1, 1003.5)])
    for name in [m for m in sys.modules if m.partition(".")[0] == "matplotlib"] or ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)  # as if it were not installed
    result = await rig.call("sensor_chart", sensor="greenhouse", quantity="pressure")
    assert result.ok
    first, second = result.output.splitlines()
    assert first == (
        "No chart was drawn: charts need matplotlib, an optional extra: in PinClaw's "
        "folder, in its virtual environment, run pip install '.[charts]', then restart "
        "PinClaw."
    )
    assert second.startswith("greenhouse pressure, last 24 h: 2 readings")
    assert "highest 1003.5 hPa" in second
    assert not (rig.workspace / "charts").exists()


async def test_a_charts_link_out_of_the_workspace_is_refused(rig: Rig, tmp_path: Path) -> None:
    await seed(rig.store, "greenhouse", "temperature", [(1, 20.0)])
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (rig.workspace / "charts").symlink_to(outside)
    result = await rig.call("sensor_chart", sensor="greenhouse")
    assert result.error == (
        "the charts folder in the workspace leads outside it; remove or rename it and try again"
    )
    assert list(outside.iterdir()) == []


async def test_pruning_keeps_only_the_retention(tmp_path: Path) -> None:
    db = Database(tmp_path / "pinclaw.db")
    await db.open()
    try:
        store = ReadingStore(db)
        await store.setup()
        clock = [NOW.timestamp()]
        history = SensorHistory(
            store,
            SensorBank(HardwareConfig(), I2cBank(HardwareConfig())),
            keep_days=30,
            clock=lambda: clock[0],
        )
        for days_ago in (45, 31, 29, 1):
            at = NOW.timestamp() - days_ago * DAY_S
            await store.add("greenhouse", [Measurement("temperature", days_ago, "°C")], at)
        assert await history.prune() == 2
        left = await store.series("greenhouse", "temperature", 0)
        assert [p.value for p in left] == [29, 1]
        # Recording prunes again once a day has passed since the last time.
        clock[0] += 2 * DAY_S  # the 29-day-old value is now 31 days old
        await history.record(reading("greenhouse", 20.0))
        assert [p.value for p in await store.series("greenhouse", "temperature", 0)] == [1, 20.0]
    finally:
        await db.close()


def reading(name: str, celsius: float) -> Reading:
    return Reading(name, "sht31", 1, 0x44, celsius, 50.0)


async def test_sampling_reads_every_sensor_and_goes_on_past_a_failure(rig: Rig) -> None:
    rig.bus.chips.pop(0x76)  # the greenhouse sensor is unplugged
    await rig.history.sample()
    assert [(r[0], r[1]) for r in await rig.rows()] == [
        ("shed", "temperature"),
        ("shed", "humidity"),
    ]


def test_sample_every_is_checked() -> None:
    assert HardwareConfig().sample_every_s == 0
    assert HardwareConfig(sample_every="10m").sample_every_s == 600
    with pytest.raises(ValueError, match=r"the shortest interval is 1m.*'20s'"):
        HardwareConfig(sample_every="20s")
    with pytest.raises(ValueError, match="has no unit"):
        HardwareConfig(sample_every="10")
    with pytest.raises(ValueError, match="keep_readings_days"):
        HardwareConfig(keep_readings_days=0)


async def test_the_daemon_samples_on_schedule_and_offers_the_chart(
    tmp_path: Path, llm: FakeLLM
) -> None:
    hardware = {"pin_factory": "mock", **HARDWARE, "sample_every": "10m"}
    async with running_daemon(tmp_path, llm, {}, tables={"hardware": hardware}) as daemon:
        assert daemon.scheduling is not None
        job = daemon.scheduling.scheduler.get_job("sensor sampling")
        assert job is not None and job.trigger.interval == timedelta(minutes=10)
        assert daemon.app.readings is not None
        assert daemon.app.tools.get("sensor_chart") is not None
        await daemon.app.readings.sample()  # what the job runs: simulated readings
        rows = await daemon.app.db.conn.execute_fetchall(
            "SELECT sensor, quantity, value FROM sensor_readings ORDER BY id"
        )
    assert [tuple(r) for r in rows] == [
        ("greenhouse", "temperature", 21.5),
        ("greenhouse", "humidity", 48.0),
        ("greenhouse", "pressure", 1013.2),
        ("shed", "temperature", 21.5),
        ("shed", "humidity", 48.0),
    ]


def test_the_agent_reads_charts_and_is_told_the_png_path(llm: FakeLLM, home: Path) -> None:
    extra = (
        '[general]\ntimezone = "Europe/Berlin"\n'
        '[hardware]\npin_factory = "mock"\n'
        "[hardware.i2c]\nbuses = [1]\n"
        '[hardware.sensors.greenhouse]\ndriver = "bme280"\naddress = 0x76\n'
    )
    write_config(home, local_config(llm.url, extra))
    now = time.time()

    async def seed_earlier() -> None:
        db = Database(home / ".pinclaw" / "pinclaw.db")
        await db.open()
        store = ReadingStore(db)
        await store.setup()
        for hours_ago, value in ((5, 17.25), (3, 26.5), (1, 19.0)):
            await store.add(
                "greenhouse", [Measurement("temperature", value, "°C")], now - hours_ago * 3600
            )
        await db.close()

    asyncio.run(seed_earlier())
    llm.queue(
        CallTools([("sensor_read", {"sensor": "greenhouse"})]),
        CallTools([("sensor_chart", {"sensor": "greenhouse", "hours": 6})]),
        Say("Here is the chart."),
    )
    done = run(home, "agent", "-m", "chart the greenhouse temperature")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Here is the chart.\n"
    read, chart = llm.tool_results()
    assert read.startswith("greenhouse (BME280 at 0x76, bus 1, simulated): 21.5 °C")
    first = chart.splitlines()[0]
    assert first.startswith("Chart saved as charts/greenhouse-temperature-")
    relative = first.removeprefix("Chart saved as ").split(" ")[0]
    assert "4 readings" in chart  # three earlier ones and the one just taken
    assert "lowest 17.2 °C" in chart and "highest 26.5 °C" in chart
    assert "latest 21.5 °C" in chart
    assert f"call send_file with path {relative}." in chart
    png = home / ".pinclaw" / "workspace" / relative
    assert png_size(png.read_bytes()) == (1000, 500)
    assert "sensor_chart" in llm.requests[0].view.tool_names


def test_nothing_loads_matplotlib_until_a_chart_is_drawn(tmp_path: Path) -> None:
    probe = (
        "import asyncio, json, sys\n"
        "from pathlib import Path\n"
        "from bot.config import LoadedConfig, parse_config\n"
        "from bot.daemon.app import open_app\n"
        f"raw = {{'provider': {{'kind': 'ollama', 'model': 'm'}}, 'hardware': {HARDWARE!r}}}\n"
        f"loaded = LoadedConfig(parse_config(raw, {{}}), Path('c.toml'), Path({str(tmp_path)!r}))\n"
        "async def main():\n"
        "    async with open_app(loaded) as app:\n"
        "        return app.tools.names()\n"
        "names = asyncio.run(main())\n"
        "print(json.dumps([names, 'matplotlib' in sys.modules]))\n"
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PINCLAW_")}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environ,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    names, loaded_matplotlib = json.loads(done.stdout)
    assert "sensor_chart" in names
    assert loaded_matplotlib is False
