"""The GPIO check: a pin library for ``hardware.pin_factory``, and a GPIO chip to open.

It runs only when ``[hardware.gpio]`` names devices and the pins are not
simulated. It looks without opening anything: which pin library is installed
(as gpiozero would pick it) and whether ``/dev/gpiochip*`` exists and this user
may open it.
"""

from __future__ import annotations

import os
from pathlib import Path

from bot.cli.doctor.findings import Finding
from bot.config.hardware import HardwareConfig
from bot.hardware import pin_library

GROUP_FIX = "add yourself to the gpio group (sudo usermod -aG gpio $USER), then log in again"


def gpio(hardware: HardwareConfig, dev: Path = Path("/dev")) -> Finding:
    """Whether the configured GPIO devices can be driven on this machine."""
    libraries = pin_library.found()
    wanted = pin_library.library_of(hardware.pin_factory)
    if hardware.pin_factory == "native":
        library = "gpiozero's native pins"
    elif wanted and wanted not in libraries:
        return Finding("gpio", "fail", "GPIO: " + pin_library.missing(hardware.pin_factory))
    elif libraries:
        library = libraries[wanted] if wanted else next(iter(libraries.values()))
    else:
        return Finding("gpio", "fail", "GPIO: no pin library found", pin_library.install_hint())
    chips = pin_library.chips(dev)
    if not chips:
        return Finding("gpio", "fail", f"GPIO: {library}, but {pin_library.no_chip()}")
    closed = [chip for chip in chips if not os.access(chip, os.R_OK | os.W_OK)]
    if closed:
        return Finding(
            "gpio", "fail", f"GPIO: {library}; {closed[0]} is not open to you", GROUP_FIX
        )
    return Finding("gpio", "ok", f"GPIO: {library}, {', '.join(chips)}")
