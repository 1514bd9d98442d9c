"""The GPIO tools on gpiozero's mock pins: what the pins did, what the model reads.

The tools are built the way the daemon builds them (a config, ``build_security``,
``tools.gpio.build``) and run through the real registry or the policy gate.
gpiozero runs for real on ``MockFactory(pin_class=MockPWMPin)``: outputs are
observed on the pins (``pin.state``, ``pin.states``), inputs are driven with
``drive_high``/``drive_low``. Each bank is closed after its test and gpiozero's
global factory is reset, so no pin state leaks from one test to the next.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from gpiozero import Device, DigitalOutputDevice
from gpiozero.pins.mock import MockFactory, MockPin, MockPWMPin

from bot.agent.tool_registry import ToolRegistry
from bot.config import LoadedConfig, parse_config
from bot.config.security import SecurityConfig
from bot.core.conversation import ToolCall
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext, ToolResult
from bot.hardware.gpio import SIMULATED, GpioBank
from bot.security.approval import ApprovalOutcome, ApprovalRequest
from bot.security.audit import AuditLog
from bot.security.gate import PolicyGate
from bot.security.kit import build_security
from bot.security.redact import Redactor
from tools.gpio import GpioTool, build

DEVICES = {
    "porch_light": {"pin": 17},
    "door_sensor": {"pin": 27, "kind": "input", "pull_up": True},
    "desk_lamp": {"pin": 18, "kind": "pwm"},
}
Call = Callable[..., Awaitable[ToolResult]]


def loaded_config(tmp_path: Path, hardware: dict[str, Any] | None) -> LoadedConfig:
    raw: dict[str, Any] = {"provider": {"kind": "ollama", "model": "m"}}
    if hardware is not None:
        raw["hardware"] = hardware
    return LoadedConfig(parse_config(raw, {}), tmp_path / "c.toml", tmp_path)


@pytest.fixture(autouse=True)
def gpiozero_state() -> Iterator[None]:
    """gpiozero's global factory is unset before each test and reset after it."""
    Device.pin_factory = None
    yield
    if Device.pin_factory is not None:
        Device.pin_factory.reset()
        Device.pin_factory.close()
        Device.pin_factory = None


@pytest.fixture
def global_mock() -> MockFactory:
    """A mock factory as gpiozero's default (what ``pin_factory = ""`` then uses)."""
    Device.pin_factory = MockFactory(pin_class=MockPWMPin)
    return Device.pin_factory


@pytest.fixture
async def make_tools(tmp_path: Path) -> AsyncIterator[Callable[..., list[GpioTool]]]:
    """Build the GPIO tools for a ``[hardware]`` table; their bank is closed afterwards."""
    banks: list[GpioBank] = []

    def make(**hardware: Any) -> list[GpioTool]:
        loaded = loaded_config(tmp_path, {"pin_factory": "mock", **hardware})
        tools = build(loaded, build_security(loaded))
        assert all(isinstance(item, GpioTool) for item in tools)
        gpio = [item for item in tools if isinstance(item, GpioTool)]
        banks.append(gpio[0].bank)
        return gpio

    yield make
    for bank in banks:
        await bank.close()


def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(SessionKey("test", "1"), tmp_path, ZoneInfo("UTC"), sender_id="ada")


def caller(tools: list[GpioTool], tmp_path: Path) -> Call:
    registry = ToolRegistry(tools)

    async def call(name: str, **arguments: Any) -> ToolResult:
        return await registry.execute(ToolCall("1", name, arguments), ctx(tmp_path))

    return call


def pin(tools: list[GpioTool], number: int) -> MockPWMPin:
    """The mock pin the tools' bank drives."""
    factory = tools[0].bank.factory
    assert isinstance(factory, MockFactory)
    mock: MockPWMPin = factory.pin(number)
    return mock


def history(mock: MockPin) -> list[float]:
    return [float(change.state) for change in mock.states]


async def test_no_devices_means_no_tools(tmp_path: Path) -> None:
    tables: list[dict[str, Any] | None] = [None, {"pin_factory": "mock"}, {"gpio": {}}]
    for hardware in tables:
        loaded = loaded_config(tmp_path, hardware)
        assert build(loaded, build_security(loaded)) == []


async def test_only_the_tools_that_fit_the_devices_are_offered(
    make_tools: Callable[..., list[GpioTool]],
) -> None:
    def names(**hardware: Any) -> list[str]:
        return [item.name for item in make_tools(**hardware)]

    assert names(gpio={"door": {"pin": 4, "kind": "input"}}) == ["gpio_list", "gpio_read"]
    assert names(gpio={"light": {"pin": 4}}) == [
        "gpio_list",
        "gpio_read",
        "gpio_write",
        "gpio_pulse",
    ]
    everything = ["gpio_list", "gpio_read", "gpio_write", "gpio_pulse", "gpio_pwm"]
    assert names(gpio={"lamp": {"pin": 4, "kind": "pwm"}}) == everything
    assert names(allow_raw_pins=True) == everything


def test_building_the_tools_loads_no_gpiozero_and_touches_no_pin(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from bot.config import LoadedConfig, parse_config\n"
        "from bot.security.kit import build_security\n"
        "from tools.gpio import build\n"
        "raw = {'provider': {'kind': 'ollama', 'model': 'm'},\n"
        "       'hardware': {'pin_factory': 'lgpio', 'gpio': {'porch_light': {'pin': 17}}}}\n"
        "loaded = LoadedConfig(parse_config(raw, {}), Path('c.toml'), Path('.'))\n"
        "tools = build(loaded, build_security(loaded))\n"
        "print(len(tools), tools[0].bank.factory, 'gpiozero' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent.parent,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["4", "None", "False"]


async def test_an_output_switches_on_and_off(
    make_tools: Callable[..., list[GpioTool]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    tools = make_tools(gpio=DEVICES)
    call = caller(tools, tmp_path)
    assert caplog.messages.count(SIMULATED) == 1

    assert (await call("gpio_read", device="porch_light")).output == (
        "porch_light (pin 17) is not switched yet (starts off)."
    )
    assert tools[0].bank.factory is None  # reading an output does not open (and drive) it
    on = await call("gpio_write", device="porch_light", on=True)
    assert on.output == "porch_light (pin 17) is now on."
    assert pin(tools, 17).state == 1
    off = await call("gpio_write", device=" Porch_Light ", on=False)
    assert off.output == "porch_light (pin 17) is now off."
    assert history(pin(tools, 17)) == [0, 1, 0]
    assert (await call("gpio_read", device="porch_light")).output == "porch_light (pin 17) is off."


async def test_active_low_inverts_the_pin_and_initial_sets_the_start(
    make_tools: Callable[..., list[GpioTool]], tmp_path: Path
) -> None:
    relay = {"pin": 5, "active_low": True}
    fan = {"pin": 6, "initial": True}
    call = caller(tools := make_tools(gpio={"relay": relay, "fan": fan}), tmp_path)
    assert (await call("gpio_read", device="fan")).output == (
        "fan (pin 6) is not switched yet (starts on)."
    )

    assert (await call("gpio_write", device="relay", on=True)).output == "relay (pin 5) is now on."
    assert history(pin(tools, 5)) == [0, 1, 0]  # opened off (high), then on (low)
    await call("gpio_write", device="relay", on=False)
    assert pin(tools, 5).state == 1
    await call("gpio_write", device="fan", on=True)
    assert history(pin(tools, 6)) == [0, 1]  # it started on: switching on changed nothing


async def test_pwm_sets_the_duty_cycle_and_frequency(
    make_tools: Callable[..., list[GpioTool]], tmp_path: Path
) -> None:
    call = caller(tools := make_tools(gpio=DEVICES), tmp_path)

    dim = await call("gpio_pwm", device="desk_lamp", duty_percent=40)
    assert dim.output == "desk_lamp (pin 18) is now on at 40% (100 Hz)."
    assert pin(tools, 18).state == pytest.approx(0.4)
    assert pin(tools, 18).frequency == 100
    slower = await call("gpio_pwm", device="desk_lamp", duty_percent=12.5, frequency_hz=50)
    assert slower.output == "desk_lamp (pin 18) is now on at 12.5% (50 Hz)."
    assert (pin(tools, 18).state, pin(tools, 18).frequency) == (pytest.approx(0.125), 50)
    full = await call("gpio_write", device="desk_lamp", on=True)  # a PWM device switches too
    assert full.output == "desk_lamp (pin 18) is now on." and pin(tools, 18).state == 1
    off = await call("gpio_pwm", device="desk_lamp", duty_percent=0)
    assert off.output == "desk_lamp (pin 18) is now off." and pin(tools, 18).state == 0

    too_much = await call("gpio_pwm", device="desk_lamp", duty_percent=150)
    assert not too_much.ok and "'duty_percent'" in (too_much.error or "")


async def test_a_pull_up_input_is_on_when_pulled_low(
    make_tools: Callable[..., list[GpioTool]], tmp_path: Path
) -> None:
    call = caller(tools := make_tools(gpio=DEVICES), tmp_path)

    idle = await call("gpio_read", device="door_sensor")
    assert idle.output == "door_sensor (pin 27) is off (reads high)."
    assert pin(tools, 27).pull == "up"
    pin(tools, 27).drive_low()
    closed = await call("gpio_read", device="door_sensor")
    assert closed.output == "door_sensor (pin 27) is on (reads low)."


@pytest.mark.parametrize(
    ("device", "pull", "idle", "driven"),
    [
        ({}, "down", "off (reads low)", "on (reads high)"),
        ({"active_low": True}, "floating", "on (reads low)", "off (reads high)"),
        ({"pull_up": True, "active_low": False}, "up", "on (reads high)", "off (reads low)"),
    ],
)
async def test_input_wiring_decides_what_on_means(
    make_tools: Callable[..., list[GpioTool]],
    tmp_path: Path,
    device: dict[str, Any],
    pull: str,
    idle: str,
    driven: str,
) -> None:
    sensor = {"pin": 22, "kind": "input", **device}
    call = caller(tools := make_tools(gpio={"sensor": sensor}), tmp_path)

    assert (await call("gpio_read", device="sensor")).output == f"sensor (pin 22) is {idle}."
    assert pin(tools, 22).pull == pull
    mock = pin(tools, 22)
    mock.drive_low() if mock.state else mock.drive_high()
    assert (await call("gpio_read", device="sensor")).output == f"sensor (pin 22) is {driven}."


async def test_a_pulse_goes_high_then_low_and_returns_after_it(
    make_tools: Callable[..., list[GpioTool]], tmp_path: Path
) -> None:
    call = caller(tools := make_tools(gpio=DEVICES, max_pulse_s=2), tmp_path)

    result = await call("gpio_pulse", device="porch_light", seconds=0.05)
    assert result.output == "porch_light (pin 17) was on for 0.05 s and is now off."
    assert history(pin(tools, 17)) == [0, 1, 0]

    too_long = await call("gpio_pulse", device="porch_light", seconds=3)
    assert too_long.error == "a pulse lasts more than 0 and at most 2 s, not 3"
    assert history(pin(tools, 17)) == [0, 1, 0]


async def test_a_cancelled_pulse_still_switches_off_and_blocks_writes_meanwhile(
    make_tools: Callable[..., list[GpioTool]], tmp_path: Path
) -> None:
    tools = make_tools(gpio=DEVICES)
    call, bank = caller(tools, tmp_path), tools[0].bank
    pulse = asyncio.create_task(bank.pulse("porch_light", 30))
    for _ in range(500):  # until the pulse has switched the light on
        if bank.factory is not None and pin(tools, 17).state:
            break
        await asyncio.sleep(0.01)

    meanwhile = await call("gpio_write", device="porch_light", on=True)
    assert meanwhile.error == "porch_light (pin 17) is in the middle of a pulse; try again after it"
    pulse.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pulse
    assert history(pin(tools, 17)) == [0, 1, 0]
    assert (await call("gpio_write", device="porch_light", on=True)).ok


async def test_unknown_devices_and_raw_pins_are_refused_by_name(
    make_tools: Callable[..., list[GpioTool]], tmp_path: Path
) -> None:
    call = caller(tools := make_tools(gpio=DEVICES), tmp_path)

    unknown = await call("gpio_write", device="garage_door", on=True)
    assert unknown.error == (
        "there is no GPIO device named 'garage_door'; "
        "the devices are: porch_light, door_sensor, desk_lamp"
    )
    for raw in ("17", "GPIO4", "gpio 4", "pin 4"):
        refused = await call("gpio_write", device=raw, on=True)
        assert refused.error == (
            "only the devices named in [hardware.gpio] can be used: "
            "porch_light, door_sensor, desk_lamp"
        )
    assert tools[0].bank.factory is None  # nothing was opened


async def test_raw_pins_work_when_allowed(
    make_tools: Callable[..., list[GpioTool]], tmp_path: Path
) -> None:
    call = caller(tools := make_tools(gpio=DEVICES, allow_raw_pins=True), tmp_path)

    assert (await call("gpio_write", device="GPIO5", on=True)).output == "GPIO5 is now on."
    assert pin(tools, 5).state == 1
    assert (await call("gpio_read", device="5")).output == "GPIO5 is on."  # still an output
    assert (await call("gpio_pwm", device="bcm5", duty_percent=25)).output == (
        "GPIO5 is now on at 25% (100 Hz)."
    )
    pin(tools, 6).drive_high()
    assert (await call("gpio_read", device="6")).output == "GPIO6 is off (reads low)."
    named = await call("gpio_write", device="17", on=True)  # pin 17 is porch_light
    assert named.output == "porch_light (pin 17) is now on."
    wrong = await call("gpio_write", device="27", on=True)  # pin 27 is door_sensor
    assert wrong.error == "door_sensor (pin 27) is an input: it can be read, not switched"
    assert (await call("gpio_read", device="GPIO99")).error == (
        "GPIO pins are numbered 0 to 53 (BCM numbering), not 99"
    )
    listing = (await call("gpio_list")).output.splitlines()
    assert listing[-3:] == [
        "GPIO5: pwm on pin 5, on at 25% (100 Hz)",
        "GPIO6: input on pin 6, off (reads low)",
        "Raw pins are allowed too: any BCM pin number, such as GPIO17.",
    ]


async def test_a_device_of_the_wrong_kind_says_what_it_is(
    make_tools: Callable[..., list[GpioTool]], tmp_path: Path
) -> None:
    call = caller(make_tools(gpio=DEVICES), tmp_path)

    written = await call("gpio_write", device="door_sensor", on=True)
    assert written.error == "door_sensor (pin 27) is an input: it can be read, not switched"
    pulsed = await call("gpio_pulse", device="door_sensor", seconds=1)
    assert pulsed.error == written.error
    dimmed = await call("gpio_pwm", device="porch_light", duty_percent=50)
    assert dimmed.error == (
        "porch_light (pin 17) is a plain on/off output: switch it on or off instead "
        '(dimming needs kind = "pwm" in [hardware.gpio.porch_light])'
    )


async def test_gpio_list_shows_kind_pin_and_state(
    make_tools: Callable[..., list[GpioTool]], tmp_path: Path
) -> None:
    call = caller(tools := make_tools(gpio=DEVICES), tmp_path)
    await call("gpio_pwm", device="desk_lamp", duty_percent=60)

    assert (await call("gpio_list")).output == (
        "porch_light: output on pin 17, not switched yet (starts off)\n"
        "door_sensor: input on pin 27, off (reads high)\n"
        "desk_lamp: pwm on pin 18, on at 60% (100 Hz)"
    )
    assert await tools[0].bank.states() == {
        "porch_light": "not switched yet (starts off)",
        "door_sensor": "off (reads high)",
        "desk_lamp": "on at 60% (100 Hz)",
    }


class Approver:
    """Answers every approval request with one verdict, recording the requests."""

    def __init__(self, verdict: str) -> None:
        self.verdict = verdict
        self.requests: list[ApprovalRequest] = []

    async def request_approval(self, request: ApprovalRequest) -> ApprovalOutcome:
        self.requests.append(request)
        return ApprovalOutcome(self.verdict, by="Ada")  # type: ignore[arg-type]


def gated(tools: list[GpioTool], tmp_path: Path, approver: Approver, **security: Any) -> Call:
    gate = PolicyGate(
        ToolRegistry(tools),
        config=SecurityConfig(**security),
        audit=AuditLog(tmp_path / "audit.jsonl"),
        redactor=Redactor([]),
    )
    gate.set_approver(approver)

    async def call(name: str, **arguments: Any) -> ToolResult:
        return await gate.execute(ToolCall("1", name, arguments), ctx(tmp_path))

    return call


async def test_supervised_mode_asks_before_switching_and_reads_freely(
    make_tools: Callable[..., list[GpioTool]], tmp_path: Path
) -> None:
    tools = make_tools(gpio=DEVICES)
    call = gated(tools, tmp_path, approver := Approver("denied"))

    assert (await call("gpio_read", device="door_sensor")).ok
    assert (await call("gpio_list")).ok
    assert approver.requests == []
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("gpio_write", {"on": True}, "switches porch_light (pin 17) on"),
        ("gpio_pulse", {"seconds": 2}, "switches porch_light (pin 17) on for 2 s"),
        (
            "gpio_pwm",
            {"device": "desk_lamp", "duty_percent": 30},
            "sets desk_lamp (pin 18) to 30% duty",
        ),
    ]
    for name, arguments, reason in cases:
        result = await call(name, **{"device": "porch_light", **arguments})
        assert result.error == f"not run: Ada denied the {name} call"
        request = approver.requests[-1]
        assert (request.tool, request.risk, request.reason) == (name, "medium", reason)
        assert request.rule_key == f'{{"device": "{arguments.get("device", "porch_light")}"}}'
    states = await tools[0].bank.states()
    assert states["porch_light"] == states["desk_lamp"] == "not switched yet (starts off)"

    unknown = await call("gpio_write", device="garage", on=True)
    assert len(approver.requests) == 3  # refused outright, nobody asked
    assert (unknown.error or "").startswith("refused: there is no GPIO device named 'garage'")


async def test_an_approved_switch_runs_and_readonly_blocks_it(
    make_tools: Callable[..., list[GpioTool]], tmp_path: Path
) -> None:
    tools = make_tools(gpio=DEVICES)
    approved = gated(tools, tmp_path, Approver("approved"))
    assert (await approved("gpio_write", device="porch_light", on=True)).ok
    assert pin(tools, 17).state == 1

    readonly = gated(tools, tmp_path, Approver("approved"), autonomy="readonly")
    blocked = await readonly("gpio_write", device="porch_light", on=False)
    assert (
        blocked.error == "refused: PinClaw may only read here, and gpio_write would operate devices"
    )
    assert (
        await readonly("gpio_read", device="porch_light")
    ).output == "porch_light (pin 17) is on."
    assert pin(tools, 17).state == 1


async def test_hardware_errors_become_sentences(
    tmp_path: Path, global_mock: MockFactory, make_tools: Callable[..., list[GpioTool]]
) -> None:
    call = caller(
        make_tools(pin_factory="", gpio={"bell": {"pin": 23}, "far": {"pin": 40}}), tmp_path
    )
    other = DigitalOutputDevice(23)  # another user of the pin, on gpiozero's default factory
    try:
        busy = await call("gpio_write", device="bell", on=True)
    finally:
        other.close()
    assert busy.error == "bell (pin 23) is already in use by another program or device"
    assert (await call("gpio_write", device="bell", on=True)).ok
    assert global_mock.pin(23).state == 1  # "" is gpiozero's default factory
    invalid = await call("gpio_write", device="far", on=True)
    assert invalid.error == "far (pin 40): that pin is not a GPIO pin on this board"


class NoAccessPin(MockPWMPin):  # type: ignore[misc]
    """A pin the kernel will not let this user have, like /dev/gpiochip0 without the group."""

    def _set_function(self, value: str) -> None:
        if value == "output":
            raise PermissionError(13, "Permission denied", "/dev/gpiochip0")
        super()._set_function(value)


async def test_no_access_to_the_gpio_chip_suggests_the_gpio_group(
    tmp_path: Path, make_tools: Callable[..., list[GpioTool]]
) -> None:
    Device.pin_factory = MockFactory(pin_class=NoAccessPin)
    call = caller(make_tools(pin_factory="", gpio=DEVICES), tmp_path)

    result = await call("gpio_write", device="porch_light", on=True)
    assert result.error == (
        "PinClaw may not open the GPIO chip: on a Raspberry Pi, add the user it runs as "
        "to the gpio group (sudo usermod -aG gpio USER), then restart PinClaw"
    )


async def test_close_closes_the_devices_and_ends_gpio_access(
    make_tools: Callable[..., list[GpioTool]], tmp_path: Path
) -> None:
    call = caller(tools := make_tools(gpio=DEVICES), tmp_path)
    await call("gpio_write", device="porch_light", on=True)
    mock, bank = pin(tools, 17), tools[0].bank

    await bank.close()
    await bank.close()
    assert bank.factory is None and mock.function == "input"
    later = await call("gpio_write", device="porch_light", on=True)
    assert later.error == "GPIO access has been shut down because PinClaw is stopping"
