"""The GPIO pin library: pyproject's lgpio marker, the install hint and the docs in step.

The marker decides where ``pip install .`` brings lgpio; ``lgpio_comes_with_install``
is what the error hints rely on, and the hints name the install path that
docs/raspberry-pi.md gives. The reports run the real ``pinclaw hardware`` and the
doctor's check on this (x86) machine: once as it is (no pin library), once with a
stand-in ``lgpio`` package on the path, as on the arm64 smoke's emulated board,
which has no GPIO chip.
"""

from __future__ import annotations

import itertools
import json
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from bot.cli.doctor.gpio import gpio
from bot.config.hardware import HardwareConfig
from bot.hardware import pin_library
from bot.hardware.pin_library import Platform, install_hint, lgpio_comes_with_install
from tests.cli_helpers import local_config, run, write_config
from tests.fake_llm import FakeLLM

ROOT = Path(__file__).parent.parent
DOOR = '[hardware.gpio.door_sensor]\npin = 27\nkind = "input"\npull_up = true\n'
NO_DEVICE_HERE = bool(pin_library.chips()) or bool(pin_library.found())


def lgpio_requirement() -> Requirement:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = [Requirement(line) for line in project["dependencies"]]
    (lgpio,) = [r for r in found if r.name == "lgpio"]
    return lgpio


def marker_says(where: Platform) -> bool:
    marker = lgpio_requirement().marker
    assert marker is not None
    return marker.evaluate(  # the rest of the environment is this machine's
        {
            "sys_platform": where.system,
            "platform_system": {"linux": "Linux", "darwin": "Darwin", "win32": "Windows"}[
                where.system
            ],
            "platform_machine": where.machine,
            "python_version": "{}.{}".format(*where.python),
            "python_full_version": "{}.{}.0".format(*where.python),
        }
    )


def test_lgpio_comes_with_the_install_on_64_bit_arm_linux_only() -> None:
    assert marker_says(Platform("linux", "aarch64", (3, 11)))  # 64-bit Raspberry Pi OS Bookworm
    assert marker_says(Platform("linux", "aarch64", (3, 12)))
    assert not marker_says(Platform("linux", "aarch64", (3, 13)))  # no cp313 wheel on PyPI
    assert not marker_says(Platform("linux", "armv7l", (3, 11)))  # 32-bit: Debian's package
    assert not marker_says(Platform("linux", "armv6l", (3, 11)))
    assert not marker_says(Platform("linux", "x86_64", (3, 11)))
    assert not marker_says(Platform("darwin", "arm64", (3, 11)))


def test_the_hint_and_the_marker_agree_everywhere() -> None:
    grid = itertools.product(
        ["linux", "darwin", "win32"],
        ["aarch64", "arm64", "armv7l", "armv6l", "x86_64", "AMD64", "riscv64"],
        [(3, 11), (3, 12), (3, 13), (3, 14)],
    )
    for system, machine, python in grid:
        where = Platform(system, machine, python)
        assert marker_says(where) == lgpio_comes_with_install(where), where


def test_the_version_range_skips_the_empty_placeholder_release() -> None:
    specifier = lgpio_requirement().specifier
    assert "0.0.0.2" not in specifier  # PyPI's lgpio 0.0.0.2 is an empty lgpio.py
    assert "0.2.2.0" in specifier  # the release with aarch64 wheels


def test_each_hint_is_the_path_the_raspberry_pi_page_gives() -> None:
    readme = (ROOT / "docs" / "raspberry-pi.md").read_text()
    pi64 = install_hint(Platform("linux", "aarch64", (3, 11)))
    assert pi64 == pin_library.REINSTALL
    assert ".venv/bin/pip install ." in pi64
    for where in [Platform("linux", "armv7l", (3, 11)), Platform("linux", "aarch64", (3, 13))]:
        hint = install_hint(where)
        assert hint == pin_library.SYSTEM_LGPIO
        for command in ["sudo apt install python3-lgpio", "--system-site-packages"]:
            assert command in hint
            assert command in readme, command
    assert "python3 -m venv --system-site-packages .venv" in readme
    assert "python3 -m venv --system-site-packages .venv" in " ".join(
        pin_library.SYSTEM_LGPIO.split()
    )
    laptop = install_hint(Platform("linux", "x86_64", (3, 11)))
    assert laptop == pin_library.NOT_A_PI
    assert 'pin_factory = "mock"' in laptop


@pytest.mark.skipif(NO_DEVICE_HERE, reason="this machine has a pin library or a GPIO chip")
def test_without_a_pin_library_the_report_says_so_and_how(tmp_path: Path) -> None:
    write_config(tmp_path, local_config("http://127.0.0.1:9", DOOR))
    done = run(tmp_path, "hardware")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[:3] == [
        "GPIO (pin factory: gpiozero's default)",
        "  pin library: none found; GPIO chips: none",
        f"  ! no GPIO pin library is installed: {install_hint()}",
    ]
    assert done.stderr == ""  # gpiozero's fallback warnings go to the debug log


def stand_in_lgpio(folder: Path) -> Path:
    """An ``lgpio`` package that fails as the real one does without /dev/gpiochip0."""
    folder.mkdir()
    (folder / "lgpio.py").write_text(
        "SET_PULL_NONE = SET_BIAS_DISABLE = SET_BIAS_PULL_UP = SET_BIAS_PULL_DOWN = 0\n"
        "BOTH_EDGES, RISING_EDGE, FALLING_EDGE = 3, 1, 2\n"
        "class error(Exception):\n    pass\n"
        "def gpiochip_open(chip):\n    raise error('can not open gpiochip')\n"
    )
    info = folder / "lgpio-0.2.2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lgpio\nVersion: 0.2.2.0\n")
    return folder


@pytest.mark.skipif(NO_DEVICE_HERE, reason="this machine has a pin library or a GPIO chip")
@pytest.mark.parametrize("factory", ["", "lgpio"])
def test_with_lgpio_but_no_gpio_chip_the_report_says_so(tmp_path: Path, factory: str) -> None:
    library = stand_in_lgpio(tmp_path / "site")
    write_config(
        tmp_path, local_config("http://127.0.0.1:9", f'[hardware]\npin_factory = "{factory}"\n')
    )
    (tmp_path / ".pinclaw" / "config.toml").write_text(
        (tmp_path / ".pinclaw" / "config.toml").read_text() + DOOR
    )
    done = run(tmp_path, "hardware", env={"PYTHONPATH": str(library)})
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[1] == "  pin library: lgpio 0.2.2.0; GPIO chips: none"
    if factory == "":
        assert lines[2] == f"  ! {pin_library.no_chip()}"
    else:  # gpiozero's LGPIOFactory asks for the board's revision before the chip
        assert lines[2].startswith("  ! this computer does not look like a Raspberry Pi")
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.skipif(NO_DEVICE_HERE, reason="this machine has a pin library or a GPIO chip")
def test_the_doctor_names_the_missing_library_with_the_fix() -> None:
    hardware = HardwareConfig.model_validate({"gpio": {"door": {"pin": 27, "kind": "input"}}})
    finding = gpio(hardware)
    assert (finding.status, finding.text, finding.fix) == (
        "fail",
        "GPIO: no pin library found",
        install_hint(),
    )
    explicit = gpio(hardware.model_copy(update={"pin_factory": "lgpio"}))
    assert explicit.text == f"GPIO: the GPIO pin library lgpio is not installed: {install_hint()}"


def test_the_doctor_checks_the_chip_after_the_library(tmp_path: Path) -> None:
    hardware = HardwareConfig.model_validate(
        {"pin_factory": "native", "gpio": {"door": {"pin": 27, "kind": "input"}}}
    )
    dev = tmp_path / "dev"
    dev.mkdir()
    missing = gpio(hardware, dev)
    assert (missing.status, missing.text) == (
        "fail",
        f"GPIO: gpiozero's native pins, but {pin_library.no_chip()}",
    )
    (dev / "gpiochip0").touch()
    present = gpio(hardware, dev)
    assert (present.status, present.text) == (
        "ok",
        f"GPIO: gpiozero's native pins, {dev}/gpiochip0",
    )


def doctor_gpio(home: Path) -> list[dict[str, str]]:
    done = run(home, "doctor", "--json")
    return [c for c in json.loads(done.stdout)["checks"] if c["check"] == "gpio"]


@pytest.mark.skipif(NO_DEVICE_HERE, reason="this machine has a pin library or a GPIO chip")
def test_the_doctor_checks_gpio_only_for_real_pins(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url, '[hardware]\npin_factory = "mock"\n' + DOOR))
    assert doctor_gpio(home) == []
    write_config(home, local_config(llm.url, DOOR))
    assert doctor_gpio(home) == [
        {
            "check": "gpio",
            "status": "fail",
            "text": "GPIO: no pin library found",
            "fix": install_hint(),
        }
    ]
