"""Which GPIO pin library this machine has, and how to get one.

gpiozero drives the pins through a pin library; with ``hardware.pin_factory = ""``
it tries lgpio, RPi.GPIO and pigpio in that order, then its own "native" code
(which needs ``/dev/gpiomem``). PinClaw's install brings lgpio where PyPI has a
wheel for it: 64-bit ARM Linux with Python below 3.13. ``lgpio_comes_with_install``
says the same as the environment marker on pyproject's ``lgpio`` line (a test
keeps the two in step), and ``install_hint`` gives the path docs/raspberry-pi.md gives for
every other machine. Nothing here imports a pin library: it only looks.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

LIBRARIES = (
    ("lgpio", "lgpio", "lgpio"),
    ("rpigpio", "RPi", "RPi.GPIO"),
    ("pigpio", "pigpio", "pigpio"),
)
"""gpiozero's factories with a library of their own, in its order: (factory, module, package)."""

SYSTEM_LGPIO = (
    "install Debian's lgpio (sudo apt install python3-lgpio) and let PinClaw's "
    "virtual environment see it: in PinClaw's folder, python3 -m venv "
    "--system-site-packages .venv, then .venv/bin/pip install ."
)
REINSTALL = "lgpio comes with PinClaw's install: in PinClaw's folder, run .venv/bin/pip install ."
NOT_A_PI = (
    "lgpio, the Raspberry Pi's pin library, is for ARM Linux; on this computer "
    'set hardware.pin_factory = "mock" to simulate the pins'
)


@dataclass(frozen=True, slots=True)
class Platform:
    """What pip's environment markers see: ``sys_platform``, ``platform_machine``, Python."""

    system: str
    machine: str
    python: tuple[int, int]

    @classmethod
    def here(cls) -> Platform:
        """This machine."""
        return cls(sys.platform, platform.machine(), sys.version_info[:2])


def lgpio_comes_with_install(where: Platform) -> bool:
    """Whether ``pip install .`` brings lgpio (pyproject's marker for it says the same)."""
    return where.system == "linux" and where.machine == "aarch64" and where.python < (3, 13)


def install_hint(where: Platform | None = None) -> str:
    """How to get a pin library on this machine, as docs/raspberry-pi.md says."""
    where = where or Platform.here()
    if lgpio_comes_with_install(where):
        return REINSTALL
    if where.system == "linux" and where.machine.startswith(("arm", "aarch")):
        return SYSTEM_LGPIO
    return NOT_A_PI


def found() -> dict[str, str]:
    """The pin libraries installed here, in gpiozero's order: module -> ``lgpio 0.2.2.0``."""
    names = {}
    for _, module, package in LIBRARIES:
        if importlib.util.find_spec(module) is None:
            continue
        try:
            names[module] = f"{package} {importlib.metadata.version(package)}"
        except importlib.metadata.PackageNotFoundError:  # e.g. a library without metadata
            names[module] = package
    return names


def library_of(factory: str) -> str | None:
    """The module a ``hardware.pin_factory`` needs (None: built into gpiozero, or any)."""
    return next((module for name, module, _ in LIBRARIES if name == factory), None)


def missing(factory: str) -> str:
    """The sentence for a ``hardware.pin_factory`` whose library is not installed."""
    if factory == "lgpio":
        return f"the GPIO pin library lgpio is not installed: {install_hint()}"
    package = next((package for name, _, package in LIBRARIES if name == factory), factory)
    return (
        f"the GPIO pin library {package} (hardware.pin_factory = {factory!r}) is not "
        "installed in PinClaw's virtual environment; leave hardware.pin_factory empty to use lgpio"
    )


def chips(dev: Path = Path("/dev")) -> tuple[str, ...]:
    """The GPIO character devices the kernel offers (``/dev/gpiochip0`` on a Pi)."""
    return tuple(str(path) for path in sorted(dev.glob("gpiochip*")))


def no_chip() -> str:
    """The sentence for a machine whose kernel offers no GPIO chip."""
    return (
        "this computer has no GPIO chip (no /dev/gpiochip0), so there are no pins to drive: "
        "on a Raspberry Pi, check that it runs Raspberry Pi OS; elsewhere set "
        'hardware.pin_factory = "mock"'
    )


def summary(factory: str) -> str:
    """One line for ``pinclaw hardware``: the pin library found and the GPIO chips.

    How to install a missing library is said where a device needs it.
    """
    libraries = found()
    wanted = library_of(factory)
    if wanted and wanted not in libraries:
        library = f"{factory} not installed"
    else:
        library = ", ".join(libraries.values()) or "none found"
    return f"pin library: {library}; GPIO chips: {', '.join(chips()) or 'none'}"
