"""GPIO edges as events: ``on = "gpio:DEVICE"`` watches an input of ``[hardware.gpio]``.

``when`` picks the edge: ``on`` (the default), ``off`` or ``change``. With
``for``, the input must stay in that state that long before the trigger fires
(a timer the opposite edge cancels): "the garage door has been open for 10
minutes". Only edges count: an input already on when PinClaw starts does not
fire. Debouncing is the device's ``bounce_ms`` (gpiozero's ``bounce_time``).

The devices are the GPIO tools' own (their ``GpioBank``), so a pin is opened
once and the tools can still read it; without GPIO tools the source opens a
bank of its own and closes it on stop. gpiozero calls back from its own thread;
each edge is handed to the event loop and the events go to the service one at a
time, in the order the edges came. The values for ``say`` are ``{device}``,
``{state}`` ("on" or "off"), ``{pin}`` and, with ``for``, ``{held_s}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.core.durations import format_duration
from bot.core.errors import ToolError, log_bug
from bot.hardware.gpio import GpioBank
from bot.triggers.sources import Emit, SourceDeps, SourceState, cancel_all
from bot.triggers.spec import Event, Trigger

log = logging.getLogger(__name__)

GPIO_TOOLS = ("gpio_read", "gpio_list", "gpio_write", "gpio_pulse", "gpio_pwm")


@dataclass(slots=True)
class _Device:
    """One watched input: its triggers, whether it could be opened, and pending holds."""

    name: str
    triggers: list[Trigger]
    pin: int | None = None  # set once the input is open and watched
    problem: str = ""
    holds: dict[str, asyncio.TimerHandle] = field(default_factory=dict)


class GpioSource:
    """The inputs the current GPIO triggers name, each watched once."""

    kind = "gpio"

    def __init__(self, emit: Emit, bank: GpioBank, *, owns_bank: bool) -> None:
        self._emit = emit
        self._bank = bank
        self._owns_bank = owns_bank
        self._devices: dict[str, _Device] = {}
        self._events: asyncio.Queue[tuple[str, Event]] = asyncio.Queue()
        self._sender: asyncio.Task[None] | None = None
        self._started = False

    async def start(self) -> None:
        """Open and watch the inputs; one that cannot be opened says why in ``states``."""
        if self._started:
            return
        self._started = True
        self._sender = asyncio.create_task(self._send_loop(), name="gpio trigger events")
        for device in list(self._devices.values()):
            await self._open(device)

    async def stop(self) -> None:
        """Stop the callbacks and the hold timers; close the bank if it is this source's."""
        if not self._started:
            return
        self._started = False
        for device in self._devices.values():
            await self._close(device)
        if self._sender is not None:
            await cancel_all([self._sender])
            self._sender = None
        if self._owns_bank:
            await self._bank.close()

    async def watch(self, triggers: Sequence[Trigger]) -> None:
        """Watch the inputs these triggers name, and stop watching the others."""
        wanted: dict[str, list[Trigger]] = {}
        for trigger in triggers:
            wanted.setdefault(trigger.subject.lower(), []).append(trigger)
        for name in [n for n in self._devices if n not in wanted]:
            device = self._devices.pop(name)
            if self._started:
                await self._close(device)
        for name, found in wanted.items():
            known = self._devices.get(name)
            if known is None:
                device = self._devices[name] = _Device(name, found)
                if self._started:
                    await self._open(device)
            else:
                device = known
                device.triggers = found
                for held in [n for n in device.holds if n not in {t.name for t in found}]:
                    device.holds.pop(held).cancel()
                if self._started and device.pin is None:
                    await self._open(device)  # it failed before: try again

    def states(self) -> list[SourceState]:
        """One line per watched input: its pin and the edges it waits for, or why not."""
        found = []
        for name, device in sorted(self._devices.items()):
            if device.pin is None:
                found.append(SourceState(f"gpio:{name}", False, device.problem or "not open yet"))
                continue
            edges = ", ".join(sorted({_edge_words(t) for t in device.triggers}))
            found.append(
                SourceState(f"gpio:{name}", True, f"pin {device.pin} claimed, watching for {edges}")
            )
        return found

    # -- opening and closing --------------------------------------------------------

    async def _open(self, device: _Device) -> None:
        loop = asyncio.get_running_loop()

        def changed(on: bool) -> None:  # in gpiozero's thread
            at = time.time()
            with contextlib.suppress(RuntimeError):  # a closed loop: PinClaw is stopping
                loop.call_soon_threadsafe(self._edge, device.name, on, at)

        try:
            target = await self._bank.watch(device.name, changed)
        except ToolError as exc:
            device.problem = f"could not watch it: {exc}"
            log.warning("GPIO trigger source: %s %s", device.name, device.problem)
            return
        except Exception as exc:
            error_id = log_bug(log, f"watching the GPIO input {device.name} failed", exc)
            device.problem = f"could not watch it because of an internal error (id {error_id})"
            return
        device.pin, device.problem = target.spec.pin, ""
        log.info("GPIO trigger source: watching %s", target.label)

    async def _close(self, device: _Device) -> None:
        for hold in device.holds.values():
            hold.cancel()
        device.holds.clear()
        if device.pin is None:
            return
        device.pin = None
        try:
            await self._bank.watch(device.name, None)
        except ToolError as exc:  # the bank is shut down already: its devices are closed
            log.debug("GPIO trigger source: unwatching %s: %s", device.name, exc)

    # -- edges ----------------------------------------------------------------------

    def _edge(self, name: str, on: bool, at: float) -> None:
        device = self._devices.get(name)
        if device is None or device.pin is None:
            return
        for trigger in device.triggers:
            pending = device.holds.pop(trigger.name, None)
            if pending is not None:
                pending.cancel()  # any edge ends a hold: the state it waited on is over
            wanted = trigger.when or "on"
            if wanted != "change" and (wanted == "on") != on:
                continue
            if trigger.for_s:
                device.holds[trigger.name] = asyncio.get_running_loop().call_later(
                    trigger.for_s, self._held, device, trigger, on
                )
            else:
                self._queue(device, trigger, on, at)

    def _held(self, device: _Device, trigger: Trigger, on: bool) -> None:
        device.holds.pop(trigger.name, None)
        self._queue(device, trigger, on, time.time(), held_s=trigger.for_s)

    def _queue(
        self, device: _Device, trigger: Trigger, on: bool, at: float, held_s: float = 0.0
    ) -> None:
        state = "on" if on else "off"
        fields: dict[str, Any] = {"device": device.name, "state": state, "pin": device.pin}
        summary = f"{device.name} turned {state}"
        if held_s:
            fields["held_s"] = held_s
            summary = f"{device.name} has been {state} for {_duration(held_s)}"
        self._events.put_nowait((trigger.name, Event(summary, fields, at=at)))

    async def _send_loop(self) -> None:
        while True:
            name, event = await self._events.get()
            try:
                await self._emit(name, event)
            except Exception as exc:
                log_bug(log, f"the GPIO event for trigger {name} was lost", exc)


def _edge_words(trigger: Trigger) -> str:
    words = trigger.when or "on"
    return f"{words} held {_duration(trigger.for_s)}" if trigger.for_s else words


def _duration(seconds: float) -> str:
    return f"{seconds:g} s" if seconds < 60 else format_duration(seconds)


def shared_bank(tools: Any) -> GpioBank | None:
    """The bank behind the daemon's GPIO tools, if it has any."""
    for name in GPIO_TOOLS:
        bank = getattr(tools.get(name), "bank", None)
        if isinstance(bank, GpioBank):
            return bank
    return None


def build(deps: SourceDeps, emit: Emit) -> GpioSource:
    """The GPIO source, on the GPIO tools' bank (or a bank of its own without them)."""
    bank = shared_bank(deps.app.tools)
    if bank is not None:
        return GpioSource(emit, bank, owns_bank=False)
    return GpioSource(emit, GpioBank(deps.app.loaded.config.hardware), owns_bank=True)
