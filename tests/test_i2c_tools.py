"""The I2C bank, the BME280 and SHT31 drivers and the I2C tools, on the real smbus2.

smbus2 runs unchanged; only its ``ioctl`` is replaced by the fake kernel in
``tests/fake_i2c.py``, and each bus is a temp file standing in for /dev/i2c-N.
"""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from smbus2 import I2cFunc, SMBus

from bot.agent.tool_registry import ToolRegistry
from bot.config import LoadedConfig, parse_config
from bot.config.hardware import HardwareConfig
from bot.config.security import SecurityConfig
from bot.core.conversation import ToolCall
from bot.core.errors import Refused, ToolError
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext, ToolResult
from bot.hardware.i2c import I2cBank, describe_os_error
from bot.hardware.sensors import SensorBank
from bot.hardware.sht31 import crc8
from bot.security.kit import build_security
from bot.security.policy import decide
from tests.fake_i2c import FakeBus, FakeI2c
from tests.fake_i2c_chips import (
    BOSCH_EXAMPLE_TRIM,
    FakeBme280,
    FakeSht31,
    HangingChip,
    RegisterChip,
    sensirion_crc,
)
from tools.i2c import build, make_tools

ROOT = Path(__file__).resolve().parent.parent
# The raw values of Bosch's worked example (25.08 °C, 100653.27 Pa), plus a humidity word.
ADC_T, ADC_P, ADC_H = 519888, 415148, 27600
SHT_T, SHT_H = 0x6666, 0x7333

CONFIG = {
    "i2c": {"buses": [1, 2], "addresses": [0x50, 0x76, 0x77]},
    "sensors": {
        "greenhouse": {"driver": "bme280", "bus": 1, "address": 0x76},
        "shed": {"driver": "sht31", "bus": 1, "address": 0x44},
    },
}


def reference_bme280(t: Mapping[str, int], adc_t: int, adc_p: int, adc_h: int) -> tuple[float, ...]:
    """The datasheet's double-precision formulas (section 8.1): °C, hPa, %RH."""
    var1 = (adc_t / 16384.0 - t["T1"] / 1024.0) * t["T2"]
    var2 = (adc_t / 131072.0 - t["T1"] / 8192.0) ** 2 * t["T3"]
    t_fine = int(var1 + var2)
    temperature = (var1 + var2) / 5120.0
    var1 = t_fine / 2.0 - 64000.0
    var2 = var1 * var1 * t["P6"] / 32768.0 + var1 * t["P5"] * 2.0
    var2 = var2 / 4.0 + t["P4"] * 65536.0
    var1 = (t["P3"] * var1 * var1 / 524288.0 + t["P2"] * var1) / 524288.0
    var1 = (1.0 + var1 / 32768.0) * t["P1"]
    p = ((1048576.0 - adc_p) - var2 / 4096.0) * 6250.0 / var1
    pressure = p + (t["P9"] * p * p / 2147483648.0 + p * t["P8"] / 32768.0 + t["P7"]) / 16.0
    h = t_fine - 76800.0
    h = (adc_h - (t["H4"] * 64.0 + t["H5"] / 16384.0 * h)) * (
        t["H2"] / 65536.0 * (1.0 + t["H6"] / 67108864.0 * h * (1.0 + t["H3"] / 67108864.0 * h))
    )
    h *= 1.0 - t["H1"] * h / 524288.0
    return temperature, pressure / 100, min(max(h, 0.0), 100.0)


@dataclass
class Rig:
    fake: FakeI2c
    bus: FakeBus
    bme: FakeBme280
    sht: FakeSht31
    eeprom: RegisterChip
    bank: I2cBank
    sensors: SensorBank
    tools: ToolRegistry

    async def call(self, name: str, **arguments: Any) -> ToolResult:
        ctx = ToolContext(SessionKey("test", "1"), self.fake.root, ZoneInfo("UTC"))
        return await self.tools.execute(ToolCall("1", name, arguments), ctx)


def make_rig(fake: FakeI2c, config: dict[str, Any]) -> Rig:
    bus = fake.add_bus(1)
    bme = FakeBme280(BOSCH_EXAMPLE_TRIM, adc_t=ADC_T, adc_p=ADC_P, adc_h=ADC_H)
    sht, eeprom = FakeSht31(SHT_T, SHT_H), RegisterChip()
    bus.attach(0x76, bme)
    bus.attach(0x44, sht)
    bus.attach(0x50, eeprom)
    bus.attach(0x68, RegisterChip())  # an RTC bound to a kernel driver: "UU" in i2cdetect
    bus.claimed.add(0x68)
    hardware = HardwareConfig.model_validate(config)
    bank = I2cBank(hardware, device_path=fake.path_pattern)
    sensors = SensorBank(hardware, bank)
    registry = ToolRegistry(make_tools(bank, sensors, hardware.call_timeout_s))
    return Rig(fake, bus, bme, sht, eeprom, bank, sensors, registry)


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeI2c:
    kernel = FakeI2c(tmp_path)
    kernel.install(monkeypatch)
    return kernel


@pytest.fixture
def rig(fake: FakeI2c) -> Rig:
    return make_rig(fake, CONFIG)


async def test_scan_finds_exactly_the_devices_on_the_bus(rig: Rig) -> None:
    assert await rig.bank.scan(1) == [0x44, 0x50, 0x76]
    assert rig.eeprom.quick_writes == 0  # 0x50-0x5f are probed with a read, as i2cdetect does
    result = await rig.call("i2c_scan", bus=1)
    assert result.output == "bus 1: 3 device(s) answered: 0x44, 0x50, 0x76"


async def test_registers_round_trip(rig: Rig) -> None:
    await rig.bank.write(1, 0x50, 0x10, b"\x01\x02\x03")
    assert rig.eeprom.memory[0x10:0x13] == b"\x01\x02\x03"
    assert await rig.bank.read(1, 0x50, 0x10, 3) == b"\x01\x02\x03"
    assert await rig.bank.read(1, 0x76, 0xD0) == b"\x60"  # the BME280's chip id


async def test_tools_accept_hex_strings(rig: Rig) -> None:
    written = await rig.call("i2c_write", bus=1, address="0x50", register="0x20", data="0xde 0xad")
    assert written.output == "wrote 2 byte(s) to register 0x20 of 0x50 on bus 1: 0xde 0xad"
    await rig.call("i2c_write", bus=1, address=80, register=0x22, data=["0xbe", 239])
    result = await rig.call("i2c_read", bus="1", address="0x50", register=32, length=4)
    assert result.output == "bus 1, device 0x50, register 0x20, 4 byte(s): 0xde 0xad 0xbe 0xef"
    bad = await rig.call("i2c_read", bus=1, address="0x80", register=0)
    assert not bad.ok
    assert "'address'" in (bad.error or "")


async def test_allowlists_refuse_before_touching_the_bus(rig: Rig) -> None:
    with pytest.raises(Refused, match="may not use I2C bus 3; the buses it may use: 1, 2"):
        await rig.bank.scan(3)
    with pytest.raises(Refused, match="may not read or write the device at 0x44"):
        await rig.bank.read(1, 0x44, 0)  # present, but only the sensor driver may use it
    result = await rig.call("i2c_write", bus=1, address="0x44", register=0x24, data=[0])
    assert not result.ok
    assert rig.bus.log == []


async def test_absent_device_says_nothing_answered(rig: Rig) -> None:
    result = await rig.call("i2c_read", bus=1, address="0x77", register=0xD0)
    assert result.error == ("nothing answered at 0x77 on bus 1 — check the wiring and the address")


async def test_missing_bus_device_says_how_to_enable_i2c(rig: Rig) -> None:
    result = await rig.call("i2c_scan", bus=2)  # allowed, but there is no /dev/i2c-2
    assert result.error is not None
    assert result.error.startswith("I2C bus 2 is not there")
    assert result.error.endswith("enable I2C with raspi-config")


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (errno.EREMOTEIO, "nothing answered at 0x76 on bus 1 — check the wiring and the address"),
        (errno.ENXIO, "nothing answered at 0x76 on bus 1 — check the wiring and the address"),
        (errno.EACCES, "add the user it runs as to the i2c group"),
        (errno.EBUSY, "in use by a kernel driver"),
        (errno.ETIMEDOUT, "I2C bus 1 timed out at 0x76"),
    ],
)
def test_kernel_errors_become_sentences(code: int, expected: str) -> None:
    exc = OSError(code, os.strerror(code))
    assert expected in describe_os_error(exc, bus=1, address=0x76, path="/dev/i2c-1")


async def test_bme280_matches_the_datasheet(rig: Rig) -> None:
    reading = await rig.sensors.read_sensor("greenhouse")
    temperature, pressure, humidity = reference_bme280(BOSCH_EXAMPLE_TRIM, ADC_T, ADC_P, ADC_H)
    assert reading.temperature_c == pytest.approx(25.08, abs=0.005)  # the datasheet's example
    assert reading.pressure_hpa == pytest.approx(1006.5327, abs=0.001)  # 100653.27 Pa
    assert reading.temperature_c == pytest.approx(temperature, abs=0.005)
    assert reading.pressure_hpa == pytest.approx(pressure, abs=0.001)
    assert reading.humidity_pct == pytest.approx(humidity, abs=0.005)
    assert reading.text() == (
        f"greenhouse (BME280 at 0x76, bus 1): 25.1 °C, {humidity:.1f} %RH, 1006.5 hPa"
    )
    assert rig.bme.status_reads >= rig.bme.measuring_reads + 1  # it waited for the bit


async def test_bme280_sign_extends_the_humidity_trimming(fake: FakeI2c) -> None:
    trim = {**BOSCH_EXAMPLE_TRIM, "H2": -362, "H4": -200, "H5": -75, "H6": -30}
    rig = make_rig(fake, CONFIG)
    rig.bus.attach(0x76, FakeBme280(trim, adc_t=480000, adc_p=380000, adc_h=40000))
    reading = await rig.sensors.read_sensor("greenhouse")
    temperature, pressure, humidity = reference_bme280(trim, 480000, 380000, 40000)
    assert (reading.temperature_c, reading.pressure_hpa, reading.humidity_pct) == pytest.approx(
        (temperature, pressure, humidity), abs=0.005
    )


async def test_bme280_problems_are_explained(rig: Rig) -> None:
    rig.bme.stuck = True
    with pytest.raises(ToolError, match="0x76 did not finish its measurement within 100 ms"):
        await rig.sensors.read_sensor("greenhouse")
    rig.bus.attach(0x76, FakeBme280(BOSCH_EXAMPLE_TRIM, adc_t=1, adc_p=1, adc_h=1, chip_id=0x58))
    with pytest.raises(ToolError, match=r"not a BME280: its chip id is 0x58 \(a BMP280\)"):
        await rig.sensors.read_sensor("greenhouse")


async def test_sht31_reading_and_checksum(rig: Rig) -> None:
    assert crc8(b"\xbe\xef") == sensirion_crc(b"\xbe\xef") == 0x92  # the datasheet's example
    reading = await rig.sensors.read_sensor("shed")
    assert reading.temperature_c == pytest.approx(-45 + 175 * SHT_T / 65535, abs=1e-9)
    assert reading.humidity_pct == pytest.approx(100 * SHT_H / 65535, abs=1e-9)
    assert reading.pressure_hpa is None
    assert reading.text() == "shed (SHT31 at 0x44, bus 1): 25.0 °C, 45.0 %RH"
    assert rig.sht.commands == [0x2400]
    rig.sht.corrupt_crc = True
    result = await rig.call("sensor_read", sensor="shed")
    assert result.error == (
        "the SHT31 at 0x44 sent a reading that failed its checksum; check the wiring"
    )


async def test_sht31_waits_while_it_is_still_converting(rig: Rig) -> None:
    rig.sht.busy_reads = 2  # the sensor NACKs reads until the conversion is done
    reading = await rig.sensors.read_sensor("shed")
    assert reading.humidity_pct == pytest.approx(100 * SHT_H / 65535)


async def test_concurrent_reads_on_one_bus_are_serialised(rig: Rig) -> None:
    readings = await asyncio.gather(
        rig.sensors.read_sensor("greenhouse"),
        rig.sensors.read_sensor("shed"),
        rig.sensors.read_sensor("greenhouse"),
        rig.bank.read(1, 0x76, 0xD0),
    )
    temperature, _, humidity = reference_bme280(BOSCH_EXAMPLE_TRIM, ADC_T, ADC_P, ADC_H)
    for reading in (readings[0], readings[2]):
        assert reading.temperature_c == pytest.approx(temperature, abs=0.005)
        assert reading.humidity_pct == pytest.approx(humidity, abs=0.005)
    assert readings[1].humidity_pct == pytest.approx(100 * SHT_H / 65535)
    assert readings[3] == b"\x60"
    assert rig.bme.measurements == 2
    assert not rig.bus.interleaved()


def test_the_interleaving_check_sees_unserialised_callers(fake: FakeI2c) -> None:
    bus = fake.add_bus(1)
    bus.attach(0x50, RegisterChip())
    with SMBus(str(bus.path)) as first, SMBus(str(bus.path)) as second:
        first.read_byte_data(0x50, 0)
        second.read_byte_data(0x50, 0)
        first.read_byte_data(0x50, 1)
    assert bus.interleaved()


def test_the_fake_kernel_decodes_every_smbus_transfer(fake: FakeI2c) -> None:
    bus = fake.add_bus(1, funcs=int(I2cFunc.I2C | I2cFunc.SMBUS_EMUL | I2cFunc.SMBUS_BLOCK_DATA))
    chip = RegisterChip()
    bus.attach(0x50, chip)
    with SMBus(str(bus.path)) as smbus:
        smbus.write_quick(0x50)
        smbus.write_byte_data(0x50, 0x30, 0xAB)
        smbus.write_byte(0x50, 0x30)  # a lone byte moves the pointer back to 0x30
        assert smbus.read_byte(0x50) == 0xAB
        smbus.write_word_data(0x50, 0x40, 0x1234)
        assert chip.memory[0x40:0x42] == b"\x34\x12"
        assert smbus.read_word_data(0x50, 0x40) == 0x1234
        smbus.write_block_data(0x50, 0x60, [3, 4])
        assert chip.memory[0x60:0x63] == b"\x02\x03\x04"  # count first, as on the wire
        assert smbus.read_block_data(0x50, 0x60) == [3, 4]
        smbus.write_i2c_block_data(0x50, 0x70, [9, 8, 7])
        assert smbus.read_i2c_block_data(0x50, 0x70, 3) == [9, 8, 7]
        with pytest.raises(OSError) as nack:
            smbus.read_byte_data(0x51, 0)
        assert nack.value.errno == errno.EREMOTEIO
    assert chip.quick_writes == 1


async def test_a_hung_bus_times_out_through_the_gate(fake: FakeI2c) -> None:
    rig = make_rig(fake, {**CONFIG, "call_timeout_s": 0.2})
    hanging = HangingChip()
    rig.bus.attach(0x50, hanging)
    with pytest.raises(ToolError, match=r"I2C bus 1 did not answer within 0\.2 s"):
        await rig.bank.read(1, 0x50, 0)
    with pytest.raises(ToolError, match="still busy with an earlier call"):
        await rig.sensors.read_sensor("shed")
    hanging.release.set()
    for _ in range(200):  # the stuck worker thread returns, and the bus is free again
        try:
            reading = await rig.sensors.read_sensor("shed")
            break
        except ToolError:
            await asyncio.sleep(0.01)
    assert reading.humidity_pct == pytest.approx(100 * SHT_H / 65535)


def loaded(tmp_path: Path, hardware: dict[str, Any]) -> LoadedConfig:
    raw = {"provider": {"kind": "ollama", "model": "m"}, "hardware": hardware}
    return LoadedConfig(parse_config(raw, {}), tmp_path / "c.toml", tmp_path)


@pytest.mark.parametrize(
    ("hardware", "names"),
    [
        ({}, []),
        ({"gpio": {"fan": {"pin": 17}}}, []),
        ({"i2c": {"buses": [1]}}, ["i2c_scan"]),
        (CONFIG, ["i2c_scan", "i2c_read", "i2c_write", "sensor_read"]),
    ],
)
def test_build_offers_only_what_is_configured(
    tmp_path: Path, hardware: dict[str, Any], names: list[str]
) -> None:
    config = loaded(tmp_path, hardware)
    assert [t.name for t in build(config, build_security(config))] == names


def test_sensor_names_are_an_enum_for_the_model(tmp_path: Path) -> None:
    config = loaded(tmp_path, CONFIG)
    tools = {t.name: t for t in build(config, build_security(config))}
    sensor = tools["sensor_read"].spec().parameters["properties"]["sensor"]
    assert sensor["enum"] == ["greenhouse", "shed"]
    assert "0x76" in tools["i2c_write"].description
    address = tools["i2c_read"].spec().parameters["properties"]["address"]
    assert (address["minimum"], address["maximum"]) == (0x03, 0x77)


def test_only_i2c_write_asks_in_supervised_mode(tmp_path: Path) -> None:
    config = loaded(tmp_path, CONFIG)
    tools = {t.name: t for t in build(config, build_security(config))}
    ctx = ToolContext(SessionKey("test", "1"), tmp_path, ZoneInfo("UTC"))
    calls: dict[str, dict[str, Any]] = {
        "i2c_scan": {"bus": 1},
        "i2c_read": {"bus": 1, "address": "0x76", "register": 0xD0},
        "i2c_write": {"bus": 1, "address": "0x76", "register": 0xF4, "data": [0x25]},
        "sensor_read": {"sensor": "greenhouse"},
    }

    def action(name: str, security: SecurityConfig) -> str:
        item = tools[name]
        return decide(security, item, item.assess(ctx, item.validate(calls[name]))).action

    supervised, readonly = SecurityConfig(), SecurityConfig(autonomy="readonly")
    assert {name: action(name, supervised) for name in calls} == {
        "i2c_scan": "allow",
        "i2c_read": "allow",
        "i2c_write": "ask",
        "sensor_read": "allow",
    }
    assert action("i2c_write", readonly) == "block"
    assert action("sensor_read", readonly) == "allow"
    assert tools["i2c_write"].approval_fields == ("bus", "address")


def test_building_the_tools_does_not_load_smbus2(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from bot.config import LoadedConfig, parse_config\n"
        "from bot.security.kit import build_security\n"
        "from tools.i2c import build\n"
        f"raw = {{'provider': {{'kind': 'ollama', 'model': 'm'}}, 'hardware': {CONFIG!r}}}\n"
        "loaded = LoadedConfig(parse_config(raw, {}), Path('c.toml'), Path('.'))\n"
        "assert len(build(loaded, build_security(loaded))) == 4\n"
        "print('smbus2' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
