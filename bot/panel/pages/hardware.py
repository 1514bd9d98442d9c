"""The Hardware page: named devices with their state, sensor readings and charts, actuation.

The devices are those of ``[hardware]``, read through the daemon's own banks
(the ``GpioBank`` behind the GPIO tools, the ``SensorBank`` behind
``sensor_read``), as ``pinclaw hardware`` reads them, so the page never opens a
pin a tool holds. Sensor values come from the readings history; a chart is
drawn from it by ``bot.hardware.chart`` straight into the response, no file.

Switching a device and reading a sensor now are tool calls put through the
policy gate as the logged-in person (``bot.panel.tool_calls``): the policy
decides, an approval is asked where it says so, and the gate writes the call
to the audit log, next to the panel's own record of who pressed the button.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from aiohttp import web

from bot.agent.tool_registry import ToolRegistry
from bot.config.hardware import HardwareConfig
from bot.core.conversation import ToolCall
from bot.core.errors import PinclawError, UserError
from bot.panel.actions import done, record_action
from bot.panel.context import DEPS, panel_deps
from bot.panel.render import render
from bot.panel.router import PanelRouter
from bot.panel.tool_calls import PanelCall, keep_calls, panel_calls, panel_context
from tools.gpio import GpioTool

if TYPE_CHECKING:  # the hardware modules load when a configuration has hardware
    from bot.hardware.gpio import GpioBank
    from bot.hardware.history import SensorHistory

CHART_HOURS = 24.0
SWITCH_TOOLS = ("gpio_write", "gpio_pwm")


@dataclass(frozen=True, slots=True)
class HardwareDeps:
    """What the Hardware page works with, taken from the running daemon."""

    config: HardwareConfig
    bank: GpioBank | None  # the GPIO tools' bank; None without GPIO tools
    history: SensorHistory | None  # the readings history; None without ``sensor_read``
    offered: frozenset[str]  # the hardware tools the registry has (not disabled)
    zone: ZoneInfo
    cache_dir: Path  # matplotlib's font cache (as for ``sensor_chart``)

    @classmethod
    def of(
        cls,
        config: HardwareConfig,
        tools: ToolRegistry,
        history: SensorHistory | None,
        zone: ZoneInfo,
        cache_dir: Path,
    ) -> HardwareDeps:
        """The deps from the daemon's tool registry and readings history."""
        bank = next(
            (
                t.bank
                for name in ("gpio_list", "gpio_read", *SWITCH_TOOLS)
                if isinstance(t := tools.get(name), GpioTool)
            ),
            None,
        )
        offered = frozenset(name for name in (*SWITCH_TOOLS, "sensor_read") if tools.get(name))
        return cls(config, bank, history, offered, zone, cache_dir)


@dataclass(frozen=True, slots=True)
class GpioRow:
    """One named GPIO device and what it is doing."""

    name: str
    pin: int
    kind: str
    state: str
    on: bool | None
    switchable: bool  # an output or PWM device, and ``gpio_write`` is offered
    dimmable: bool  # a PWM device, and ``gpio_pwm`` is offered


@dataclass(frozen=True, slots=True)
class ValueRow:
    """The latest stored value of one quantity of a sensor."""

    quantity: str
    value: str
    at: float | None
    charted: bool  # there are readings in the chart's window


@dataclass(frozen=True, slots=True)
class SensorRow:
    """One named sensor with its latest values."""

    name: str
    describe: str
    values: tuple[ValueRow, ...]
    readable: bool  # ``sensor_read`` is offered


@dataclass(frozen=True, slots=True)
class HardwareView:
    """Everything the Hardware page shows."""

    simulated: bool
    gpio: tuple[GpioRow, ...]
    gpio_problem: str
    sensors: tuple[SensorRow, ...]
    sensors_off: bool  # sensors are configured, but ``sensor_read`` is turned off
    chart_hours: float
    calls: tuple[PanelCall, ...]  # the latest calls made here, newest first


async def hardware_view(
    deps: HardwareDeps, calls: Sequence[PanelCall] = (), now: float | None = None
) -> HardwareView:
    """Every configured device with its live state, every sensor with its latest values."""
    config = deps.config
    rows: list[GpioRow] = []
    problem = ""
    readings = {}
    if deps.bank is not None:
        try:
            readings = {r.target.name: r for r in await deps.bank.readings()}
        except PinclawError as exc:
            problem = str(exc)
    for name, spec in config.gpio.items():
        reading = readings.get(name)
        rows.append(
            GpioRow(
                name=name,
                pin=spec.pin,
                kind=spec.kind,
                state=reading.state() if reading else "unknown",
                on=reading.on if reading else None,
                switchable=spec.kind in ("output", "pwm") and "gpio_write" in deps.offered,
                dimmable=spec.kind == "pwm" and "gpio_pwm" in deps.offered,
            )
        )
    sensors = await _sensor_rows(deps, (now or time.time()) - CHART_HOURS * 3600)
    return HardwareView(
        config.pin_factory == "mock",
        tuple(rows),
        problem,
        sensors,
        bool(config.sensors) and deps.history is None,
        CHART_HOURS,
        tuple(calls),
    )


async def _sensor_rows(deps: HardwareDeps, since: float) -> tuple[SensorRow, ...]:
    """Each sensor with the latest stored value of each quantity (charted if since ``since``)."""
    if deps.history is None:
        return ()
    bank, rows = deps.history.sensors, []
    for name in bank.names:
        values = []
        for quantity in bank.quantities(name):
            latest = await deps.history.latest(name, quantity)
            shown = f"{latest.value:.1f} {latest.unit}" if latest else "no readings yet"
            at = latest.at if latest else None
            values.append(ValueRow(quantity, shown, at, at is not None and at >= since))
        readable = "sensor_read" in deps.offered
        rows.append(SensorRow(name, bank.describe(name), tuple(values), readable))
    return tuple(rows)


async def chart(
    deps: HardwareDeps, sensor: str, quantity: str, hours: float = CHART_HOURS
) -> bytes:
    """A PNG of one quantity of ``sensor`` over the last ``hours``; ``UserError`` if there is
    no such series, no readings in that time, or no matplotlib."""
    history = deps.history
    if history is None or sensor not in history.sensors.names:
        raise UserError(f"there is no sensor called {sensor!r}")
    if quantity not in history.sensors.quantities(sensor):
        raise UserError(f"{sensor} does not measure {quantity}")
    end = datetime.now(deps.zone)
    start = end - timedelta(hours=hours)
    points = await history.series(sensor, quantity, start.timestamp())
    if not points:
        raise UserError(f"{sensor} has no {quantity} readings from the last {hours:g} h")
    from bot.hardware.chart import ChartsMissing, png_bytes

    try:
        return await asyncio.to_thread(
            png_bytes,
            points,
            title=f"{sensor} {quantity}, last {hours:g} h",
            window=(start, end),
            zone=deps.zone,
            config_dir=deps.cache_dir,
        )
    except ChartsMissing as exc:
        raise UserError(str(exc)) from None


def switch_call(deps: HardwareDeps, device: str, on: bool) -> ToolCall:
    """The ``gpio_write`` call that switches ``device``; ``UserError`` if it cannot be."""
    _device(deps, device, "gpio_write", ("output", "pwm"))
    return ToolCall(_call_id(), "gpio_write", {"device": device, "on": on})


def dim_call(deps: HardwareDeps, device: str, percent: float) -> ToolCall:
    """The ``gpio_pwm`` call that sets ``device`` to ``percent`` duty."""
    _device(deps, device, "gpio_pwm", ("pwm",))
    if not 0 <= percent <= 100:
        raise UserError(f"the duty cycle goes from 0 to 100 %, not {percent:g}")
    return ToolCall(_call_id(), "gpio_pwm", {"device": device, "duty_percent": percent})


def read_call(deps: HardwareDeps, sensor: str) -> ToolCall:
    """The ``sensor_read`` call that reads ``sensor`` now (and records the reading)."""
    if "sensor_read" not in deps.offered or deps.history is None:
        raise UserError("sensors cannot be read: the sensor_read tool is not available")
    if sensor not in deps.history.sensors.names:
        raise UserError(f"there is no sensor called {sensor!r}")
    return ToolCall(_call_id(), "sensor_read", {"sensor": sensor})


def _device(deps: HardwareDeps, device: str, tool: str, kinds: tuple[str, ...]) -> None:
    spec = deps.config.gpio.get(device)
    if spec is None:
        raise UserError(f"there is no GPIO device called {device!r}")
    if tool not in deps.offered:
        raise UserError(f"{device} cannot be changed here: the {tool} tool is turned off")
    if spec.kind not in kinds:
        raise UserError(f"{device} is an {spec.kind} and cannot be changed that way")


_ids = itertools.count(1)


def _call_id() -> str:
    return f"panel-{int(time.time())}-{next(_ids)}"


def routes(router: PanelRouter) -> None:
    """``/hardware``, its charts, and switching, dimming and reading through the gate."""
    keep_calls(router.app, router.app[DEPS].app.gate)
    router.get("/hardware", page)
    router.get("/hardware/chart/{sensor}/{quantity}.png", chart_png)
    router.post("/hardware/gpio/{device}/switch", switch)
    router.post("/hardware/gpio/{device}/dim", dim)
    router.post("/hardware/sensor/{sensor}/read", read)


async def page(request: web.Request) -> web.StreamResponse:
    """Every device and sensor, and the latest calls made here."""
    view = await hardware_view(hardware_deps(request), panel_calls(request).recent)
    return render(request, "hardware.html", title="Hardware", view=view)


async def chart_png(request: web.Request) -> web.StreamResponse:
    """A sensor's recent values as a PNG (404 with the reason when there is none)."""
    try:
        hours = float(request.query.get("hours", CHART_HOURS))
        if not 0 < hours <= 24 * 366:
            raise ValueError
    except ValueError:
        raise web.HTTPBadRequest(text="hours: a number of hours, more than 0") from None
    try:
        png = await chart(
            hardware_deps(request),
            request.match_info["sensor"],
            request.match_info["quantity"],
            hours,
        )
    except UserError as exc:
        raise web.HTTPNotFound(text=f"No chart: {exc}.") from None
    return web.Response(body=png, content_type="image/png")


async def switch(request: web.Request) -> web.StreamResponse:
    """Switch a GPIO output on or off, through the gate."""
    form = await request.post()
    device = request.match_info["device"]
    on = str(form.get("on", "")) == "1"
    return await _through_gate(request, lambda deps: switch_call(deps, device, on))


async def dim(request: web.Request) -> web.StreamResponse:
    """Set a PWM device's duty cycle, through the gate."""
    form = await request.post()
    device = request.match_info["device"]
    try:
        percent = float(str(form.get("percent", "")))
    except ValueError:
        percent = -1.0  # refused with the reason by ``dim_call``
    return await _through_gate(request, lambda deps: dim_call(deps, device, percent))


async def read(request: web.Request) -> web.StreamResponse:
    """Read a sensor now (the reading is recorded for the charts), through the gate."""
    sensor = request.match_info["sensor"]
    return await _through_gate(request, lambda deps: read_call(deps, sensor))


def hardware_deps(request: web.Request) -> HardwareDeps:
    """The Hardware page's view of the running daemon."""
    app = panel_deps(request).app
    return HardwareDeps.of(
        app.loaded.config.hardware,
        app.tools,
        app.readings,
        app.loaded.timezone(),
        app.loaded.data_dir / "cache" / "matplotlib",
    )


async def _through_gate(
    request: web.Request, make: Callable[[HardwareDeps], ToolCall]
) -> web.StreamResponse:
    """Make the call (or refuse it plainly), put it through the gate, record who asked."""
    action = f"hardware.{request.path.rsplit('/', 1)[1]}"
    try:
        call = make(hardware_deps(request))
    except UserError as exc:
        await record_action(
            request, action, outcome="refused", error=str(exc), **request.match_info
        )
        done(request, "/hardware", f"Not done: {exc}.")
    record = await panel_calls(request).submit(call, panel_context(request))
    await record_action(
        request, action, outcome=record.state, tool=call.name, arguments=call.arguments
    )
    if record.state == "waiting":
        notice = (
            f"{call.name} ({record.arguments}) is waiting for an approval: decide on the "
            "Approvals page or in your chat. This page shows how it went."
        )
    elif record.state == "done":
        notice = record.result
    else:
        notice = f"{call.name} did not run: {record.result}"
    done(request, "/hardware", notice)
