"""Named GPIO devices on gpiozero: opened on first use, driven off the event loop.

``GpioBank`` owns the gpiozero devices of ``[hardware.gpio]`` (and, with
``allow_raw_pins``, ad-hoc devices on bare BCM numbers such as ``GPIO17``).
gpiozero is not imported and no pin is touched until the first call; every
gpiozero call then runs through one ``DeviceGate`` ("GPIO"): in a worker
thread, one at a time, within ``call_timeout_s``.

What "on" means. Outputs and PWM: ``active_low`` inverts the pin (on = low), as
gpiozero's ``active_high=False``. Inputs: gpiozero ties the active level to the
pull resistor; PinClaw keeps it explicit:

- ``pull_up = true``: internal pull-up, and on = low (a switch to ground), unless
  ``active_low = false`` is written out (a normally-closed switch: on = high);
- ``pull_up = false`` (default): internal pull-down, and on = high;
- ``pull_up = false, active_low = true``: no internal resistor (the circuit holds
  the line high itself, as many sensor modules do), and on = low.

Outputs are never opened just to be read: opening one drives it to its
``initial`` state, so an output not switched yet reads "not switched yet".

Devices are closed by ``close()`` or, failing that, when the process exits
(a ``weakref.finalize``), since the tools have no shutdown hook of their own.

``watch`` hands an input's edges to a callback (the GPIO trigger source), on the
same device the tools read, so a pin is never opened twice; an input's
``bounce_ms`` becomes gpiozero's ``bounce_time`` when it is opened.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import re
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from bot.config.hardware import GpioDevice, HardwareConfig
from bot.core.errors import ToolError
from bot.hardware import pin_library
from bot.hardware.blocking import DeviceGate

log = logging.getLogger(__name__)

T = TypeVar("T")
Kind = Literal["output", "input", "pwm"]
Use = Literal["read", "switch", "pwm"]
"""What a call does: read a device, switch it on or off (output or PWM), or dim it (PWM)."""

SIMULATED = 'GPIO pins are simulated (hardware.pin_factory = "mock"); nothing physical will switch'
_FACTORIES = {
    "lgpio": ("gpiozero.pins.lgpio", "LGPIOFactory"),
    "rpigpio": ("gpiozero.pins.rpigpio", "RPiGPIOFactory"),
    "pigpio": ("gpiozero.pins.pigpio", "PiGPIOFactory"),
    "native": ("gpiozero.pins.native", "NativeFactory"),
}
_ACCEPTS: dict[Use, frozenset[Kind]] = {
    "read": frozenset({"output", "input", "pwm"}),
    "switch": frozenset({"output", "pwm"}),
    "pwm": frozenset({"pwm"}),
}
_RAW_KIND: dict[Use, Kind] = {"read": "input", "switch": "output", "pwm": "pwm"}
_RAW_PIN = re.compile(r"(?:gpio|bcm|pin)?\s*(\d{1,3})", re.IGNORECASE)
_MAX_PIN = 53


@dataclass(frozen=True, slots=True)
class Target:
    """The device a call is for: a configured one, or a bare pin (``raw``)."""

    name: str
    spec: GpioDevice
    raw: bool = False

    @property
    def label(self) -> str:
        """How people and the model see it: ``porch_light (pin 17)`` or ``GPIO17``."""
        return self.name if self.raw else f"{self.name} (pin {self.spec.pin})"


@dataclass(frozen=True, slots=True)
class GpioReading:
    """What one device is doing now; ``on`` is None for an output not switched yet."""

    target: Target
    on: bool | None
    level: bool | None = None  # inputs: the electrical level, True = high
    duty: float | None = None  # PWM: the share of the time it is on, 0..1
    frequency: float | None = None

    def state(self) -> str:
        """A few words: ``on``, ``off``, ``on at 40% (100 Hz)``, ``on (reads low)``."""
        if self.on is None:
            return f"not switched yet (starts {'on' if self.target.spec.initial else 'off'})"
        word = "on" if self.on else "off"
        if self.level is not None:
            return f"{word} (reads {'high' if self.level else 'low'})"
        if self.duty is not None and 0 < self.duty < 1:
            return f"on at {self.duty * 100:.3g}% ({self.frequency or 0:g} Hz)"
        return word


def input_active_low(spec: GpioDevice) -> bool:
    """Whether an input is on when low: ``active_low`` if written out, else ``pull_up``."""
    return spec.active_low if "active_low" in spec.model_fields_set else spec.pull_up


class _Opened:
    """The gpiozero objects a bank opened; apart from it, so the exit hook holds no bank."""

    def __init__(self) -> None:
        self.factory: Any = None
        self.owns_factory = False
        self.devices: dict[str, tuple[Target, Any]] = {}

    def close(self) -> None:
        """Close every device, then the factory if the bank made it."""
        for name, (_, device) in list(self.devices.items()):
            try:
                device.close()
            except Exception:
                log.warning("closing GPIO device %s failed", name, exc_info=True)
        self.devices.clear()
        if self.owns_factory and self.factory is not None:
            try:
                self.factory.close()
            except Exception:
                log.warning("closing the GPIO pin factory failed", exc_info=True)
        self.factory = None


class GpioBank:
    """The GPIO devices PinClaw may use: opened on first use, driven one call at a time."""

    def __init__(self, config: HardwareConfig) -> None:
        self.config = config
        self._gate = DeviceGate("GPIO", config.call_timeout_s)
        self._opened = _Opened()
        self._pulsing: set[str] = set()
        self._closed = False
        self._close_now = weakref.finalize(self, self._opened.close)
        if config.pin_factory == "mock":
            log.warning(SIMULATED)

    @property
    def factory(self) -> Any:
        """The gpiozero pin factory in use: None before the first call and after ``close``."""
        return self._opened.factory

    def target(self, device: str, use: Use = "read") -> Target:
        """The device ``device`` names, fit for ``use``; else ``ToolError`` saying why."""
        name = device.strip()
        spec = self.config.gpio.get(name.lower())
        found = Target(name.lower(), spec) if spec is not None else self._raw(name, use)
        if found.spec.kind not in _ACCEPTS[use]:
            raise ToolError(_wrong_kind(found))
        return found

    async def read(self, device: str) -> GpioReading:
        """The device's state (an output not switched yet is not opened to be read)."""
        target = self.target(device, "read")
        return await self._run(target, self._read_now, target)

    async def write(self, device: str, on: bool) -> GpioReading:
        """Switch an output (or a PWM device, fully) on or off."""
        target = self._changeable(device, "switch")
        return await self._run(target, self._switch_now, target, on)

    async def pwm(self, device: str, duty: float, frequency: float | None = None) -> GpioReading:
        """Set a PWM device's duty cycle (0..1, after ``active_low``) and maybe its frequency."""
        if not 0 <= duty <= 1:
            raise ToolError(f"the duty cycle goes from 0 (off) to 1 (fully on), not {duty:g}")
        if frequency is not None and not 0 < frequency <= 100_000:
            raise ToolError(f"the PWM frequency goes up to 100000 Hz, not {frequency:g}")
        target = self._changeable(device, "pwm")
        return await self._run(target, self._pwm_now, target, duty, frequency)

    async def pulse(self, device: str, seconds: float) -> GpioReading:
        """Switch on, wait ``seconds`` (at most ``max_pulse_s``), switch off; return after."""
        limit = self.config.max_pulse_s
        if not 0 < seconds <= limit:
            raise ToolError(f"a pulse lasts more than 0 and at most {limit:g} s, not {seconds:g}")
        target = self._changeable(device, "switch")
        self._pulsing.add(target.name)
        try:
            # The wait is on the loop, not in the thread: the gate stays free for
            # other devices meanwhile. Shielded, the switch-off also happens when
            # the call fails, times out or is cancelled half-way.
            try:
                await self._run(target, self._switch_now, target, True)
                await asyncio.sleep(seconds)
            except BaseException:
                try:
                    await asyncio.shield(self._run(target, self._switch_now, target, False))
                except Exception as exc:
                    log.warning("%s may still be on after a failed pulse: %s", target.label, exc)
                raise
            return await asyncio.shield(self._run(target, self._switch_now, target, False))
        finally:
            self._pulsing.discard(target.name)

    async def watch(self, device: str, changed: Callable[[bool], None] | None) -> Target:
        """Open the input ``device`` and call ``changed(on)`` on each of its edges, from
        gpiozero's thread (``on`` follows the wiring rules above); None stops that."""
        target = self.target(device, "read")
        if target.spec.kind != "input":
            raise ToolError(f"{target.label} is an {target.spec.kind}; only inputs have edges")
        await self._run(target, self._watch_now, target, changed)
        return target

    async def readings(self) -> list[GpioReading]:
        """Every configured device, then every raw pin in use (inputs are read, see above)."""
        return await self._run(None, self._read_all_now)

    async def states(self) -> dict[str, str]:
        """Device name to its state in a few words (for ``gpio_list`` and ``pinclaw hardware``)."""
        return {reading.target.name: reading.state() for reading in await self.readings()}

    async def close(self) -> None:
        """Close the devices, and the pin factory if the bank made it (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._gate.run(self._close_now)
        except ToolError:
            log.warning("GPIO devices did not close in time; they are closed at exit")

    def _raw(self, text: str, use: Use) -> Target:
        names = ", ".join(self.config.gpio)
        match = _RAW_PIN.fullmatch(text)
        if match is None:
            pins = " or a pin number such as GPIO17" if self.config.allow_raw_pins else ""
            listed = f"the devices are: {names}" if names else "no devices are configured"
            raise ToolError(f"there is no GPIO device named {text!r}; {listed}{pins}")
        if not self.config.allow_raw_pins:
            raise ToolError(f"only the devices named in [hardware.gpio] can be used: {names}")
        pin = int(match.group(1))
        for name, spec in self.config.gpio.items():
            if spec.pin == pin:
                return Target(name, spec)
        if pin > _MAX_PIN:
            raise ToolError(f"GPIO pins are numbered 0 to {_MAX_PIN} (BCM numbering), not {pin}")
        return Target(f"GPIO{pin}", GpioDevice(pin=pin, kind=_RAW_KIND[use]), raw=True)

    def _changeable(self, device: str, use: Use) -> Target:
        target = self.target(device, use)
        if target.name in self._pulsing:
            raise ToolError(f"{target.label} is in the middle of a pulse; try again after it")
        return target

    async def _run(self, target: Target | None, func: Callable[..., T], *args: object) -> T:
        if self._closed:
            raise ToolError("GPIO access has been shut down because PinClaw is stopping")
        try:
            return await self._gate.run(func, *args)
        except ToolError:
            raise
        except Exception as exc:
            where = target.label if target else "a GPIO pin"
            message = _explain(exc, where, self.config.pin_factory)
            if message is None:
                raise
            log.warning("GPIO call on %s failed: %r", where, exc)
            raise ToolError(message) from None

    # Everything below runs in the gate's worker thread, one call at a time.

    def _device(self, target: Target, use: Use) -> tuple[Target, Any]:
        opened = self._opened
        held = opened.devices.get(target.name)
        if held is not None:
            if held[0].spec.kind in _ACCEPTS[use]:
                return held
            held[1].close()  # only a raw pin changes kind, e.g. read as input, then switched
            del opened.devices[target.name]
        if opened.factory is None:
            opened.factory, opened.owns_factory = _make_factory(self.config.pin_factory)
        opened.devices[target.name] = (target, _open(opened.factory, target.spec))
        log.info("GPIO: opened %s as %s", target.label, target.spec.kind)
        return opened.devices[target.name]

    def _read_now(self, target: Target) -> GpioReading:
        held = self._opened.devices.get(target.name)
        if held is None and target.spec.kind != "input":
            return GpioReading(target, on=None)
        return _reading(*(held or self._device(target, "read")))

    def _read_all_now(self) -> list[GpioReading]:
        targets = [Target(name, spec) for name, spec in self.config.gpio.items()]
        targets += [target for target, _ in self._opened.devices.values() if target.raw]
        return [self._read_now(target) for target in targets]

    def _watch_now(self, target: Target, changed: Callable[[bool], None] | None) -> None:
        if changed is None:
            held = self._opened.devices.get(target.name)
            if held is not None:
                held[1].when_activated = held[1].when_deactivated = None
            return
        _, device = self._device(target, "read")
        # gpiozero's "active" is the level its pull sets; PinClaw's "on" differs from it
        # only for a pull-up input with active_low = false written out (normally closed).
        flip = target.spec.pull_up and not input_active_low(target.spec)
        device.when_activated = lambda: changed(not flip)
        device.when_deactivated = lambda: changed(flip)

    def _switch_now(self, target: Target, on: bool) -> GpioReading:
        held, device = self._device(target, "switch")
        if on:
            device.on()
        else:
            device.off()
        return _reading(held, device)

    def _pwm_now(self, target: Target, duty: float, frequency: float | None) -> GpioReading:
        held, device = self._device(target, "pwm")
        if frequency is not None:
            device.frequency = frequency
        device.value = duty
        return _reading(held, device)


def _make_factory(name: str) -> tuple[Any, bool]:
    """The pin factory for ``hardware.pin_factory``, and whether the bank owns it."""
    if name == "":
        from gpiozero import Device

        # gpiozero's own choice, GPIOZERO_PIN_FACTORY included. Its warning for each
        # library it falls back from goes to the debug log: a failure is explained instead.
        with warnings.catch_warnings(record=True) as fallbacks:
            warnings.simplefilter("always")
            Device.ensure_pin_factory()
        for fallback in fallbacks:
            log.debug("gpiozero: %s", fallback.message)
        return Device.pin_factory, False
    if name == "mock":
        from gpiozero.pins.mock import MockFactory, MockPWMPin

        return MockFactory(pin_class=MockPWMPin), True
    module, cls = _FACTORIES[name]
    return getattr(importlib.import_module(module), cls)(), True


def _open(factory: Any, spec: GpioDevice) -> Any:
    import gpiozero

    active_high = not spec.active_low
    if spec.kind == "output":
        return gpiozero.DigitalOutputDevice(
            spec.pin, active_high=active_high, initial_value=spec.initial, pin_factory=factory
        )
    if spec.kind == "pwm":
        return gpiozero.PWMOutputDevice(
            spec.pin,
            active_high=active_high,
            initial_value=float(spec.initial),
            frequency=spec.frequency,
            pin_factory=factory,
        )
    bounce = spec.bounce_ms / 1000 if spec.bounce_ms else None
    if spec.pull_up or not input_active_low(spec):
        return gpiozero.DigitalInputDevice(
            spec.pin, pull_up=spec.pull_up, bounce_time=bounce, pin_factory=factory
        )
    return gpiozero.DigitalInputDevice(
        spec.pin, pull_up=None, active_state=False, bounce_time=bounce, pin_factory=factory
    )


def _reading(target: Target, device: Any) -> GpioReading:
    if target.spec.kind == "input":
        level = bool(device.pin.state)  # the level itself: "on" follows input_active_low
        return GpioReading(target, level != input_active_low(target.spec), level=level)
    if target.spec.kind == "pwm":
        duty = float(device.value)
        return GpioReading(target, duty > 0, duty=duty, frequency=device.frequency)
    return GpioReading(target, bool(device.value))


def _wrong_kind(target: Target) -> str:
    if target.spec.kind == "input":
        return f"{target.label} is an input: it can be read, not switched"
    return (
        f"{target.label} is a plain on/off output: switch it on or off instead "
        f'(dimming needs kind = "pwm" in [hardware.gpio.{target.name}])'
    )


def _explain(exc: Exception, where: str, factory: str) -> str | None:
    """A sentence for a hardware failure; None when the failure is a bug."""
    text = str(exc)
    chip_trouble = re.search(r"gpiochip|/dev/(gpio)?mem|permission", text, re.IGNORECASE)
    if chip_trouble and not isinstance(exc, PermissionError) and not pin_library.chips():
        return pin_library.no_chip()  # lgpio says "can not open gpiochip" for both
    if isinstance(exc, PermissionError) or chip_trouble:
        return (
            "PinClaw may not open the GPIO chip: on a Raspberry Pi, add the user it runs as "
            "to the gpio group (sudo usermod -aG gpio USER), then restart PinClaw"
        )
    from gpiozero import exc as gz  # a failure here means gpiozero itself was loaded

    if isinstance(exc, gz.BadPinFactory):
        if not pin_library.found():
            return f"no GPIO pin library is installed: {pin_library.install_hint()}"
        if not pin_library.chips():
            return pin_library.no_chip()
        return (
            f"no GPIO driver could start (found {', '.join(pin_library.found().values())}): "
            "on a Raspberry Pi, add the user PinClaw runs as to the gpio group "
            "(sudo usermod -aG gpio USER), then restart PinClaw"
        )
    if isinstance(exc, ImportError):
        return pin_library.missing(factory)
    if isinstance(exc, gz.PinUnknownPi):
        return (
            "this computer does not look like a Raspberry Pi, so the GPIO driver finds no "
            'pins; set hardware.pin_factory = "mock" to simulate them'
        )
    if isinstance(exc, gz.GPIOPinInUse) or "busy" in text.lower():
        return f"{where} is already in use by another program or device"
    if isinstance(exc, gz.PinInvalidPin):
        return f"{where}: that pin is not a GPIO pin on this board"
    if isinstance(exc, gz.PinPWMError):
        return f"{where}: this GPIO driver cannot do PWM on that pin"
    if isinstance(exc, gz.GPIOZeroError | OSError | RuntimeError) or type(
        exc
    ).__module__.startswith(("lgpio", "RPi", "pigpio")):
        return f"the GPIO hardware failed on {where}: {text or type(exc).__name__}"
    return None
