"""``pinclaw hardware``: the wiring check, against mock pins, a fake I2C kernel and ptys."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.hardware import HardwareConfig
from bot.hardware import pin_library
from bot.hardware.report import hardware_report
from tests.cli_helpers import local_config, run, write_config
from tests.fake_i2c import FakeI2c
from tests.fake_i2c_chips import BOSCH_EXAMPLE_TRIM, FakeBme280

HARDWARE = {
    "i2c": {"buses": [1]},
    "sensors": {
        "greenhouse": {"driver": "bme280", "bus": 1, "address": 0x76},
        "shed": {"driver": "sht31", "bus": 1, "address": 0x44},
    },
    "serial": {"arduino": {"port": "/dev/ttyPINCLAW9"}, "bench": {"port": "loop://"}},
}


async def test_the_report_shows_states_finds_sensors_and_names_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kernel = FakeI2c(tmp_path)
    kernel.install(monkeypatch)
    kernel.add_bus(1).attach(
        0x76, FakeBme280(BOSCH_EXAMPLE_TRIM, adc_t=519888, adc_p=415148, adc_h=27600)
    )
    code = await hardware_report(
        HardwareConfig.model_validate(HARDWARE), i2c_path=kernel.path_pattern
    )
    out = capsys.readouterr().out
    assert code == 1
    assert (
        f"GPIO (pin factory: gpiozero's default)\n  {pin_library.summary('')}\n"
        "  no devices in [hardware.gpio]"
    ) in out
    assert "  bus 1: 0x76\n" in out
    assert "  ! shed: nothing at 0x44 on bus 1" in out
    assert "greenhouse (BME280 at 0x76, bus 1): 25.1 °C" in out
    assert "  arduino          /dev/ttyPINCLAW9 at 9600 baud: ! not found" in out
    assert "  bench            loop:// at 9600 baud: a URL, checked when used" in out
    assert out.endswith("2 problem(s) found; see the lines marked !\n")


def test_the_command_runs_for_a_new_user_on_a_simulated_board(tmp_path: Path) -> None:
    extra = (
        '[hardware]\npin_factory = "mock"\n'
        "[hardware.gpio.porch_light]\npin = 17\n"
        '[hardware.gpio.door_sensor]\npin = 27\nkind = "input"\npull_up = true\n'
        "[hardware.i2c]\nbuses = [1]\n"
        '[hardware.sensors.greenhouse]\ndriver = "bme280"\naddress = 0x76\n'
        '[hardware.serial.bench]\nport = "loop://"\n'
    )
    write_config(tmp_path, local_config("http://127.0.0.1:9", extra))
    done = run(tmp_path, "hardware")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "GPIO (pin factory: mock, simulated)" in done.stdout
    assert "  porch_light      pin 17  output  " in done.stdout
    assert "  door_sensor      pin 27  input   " in done.stdout
    assert "  bus 1: 0x76\n" in done.stdout
    assert "greenhouse (BME280 at 0x76, bus 1, simulated): 21.5 °C, 48.0 %RH" in done.stdout
    assert "Traceback" not in done.stderr
