"""GPIO end to end: a chat message switches a (simulated) porch light after an approval.

The real daemon runs on the fake Telegram with ``[hardware]`` set to gpiozero's
mock pins and one output, ``porch_light`` on pin 17. The fake LLM asks for
``gpio_write``; the supervised policy puts it to Ada (the first of
``allowed_users``, so the approver). The test taps what a person would and
checks the chat, what the model was told, and mock pin 17 itself.

The pins are reached through the daemon's own tool registry: ``gpio_write`` is
a ``GpioTool`` whose ``bank.factory`` is the mock factory PinClaw made on first
use (None until then, which shows that nothing touched a pin before approval).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from gpiozero.pins.mock import MockFactory

from bot.daemon.main import Daemon
from bot.hardware.gpio import GpioBank
from tests.daemon_harness import running_daemon
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.fake_telegram import FakeTelegram
from tests.telegram_taps import button, request_in, said, tap
from tools.gpio import GpioTool

OWNER = 7001
GROUP = -1001234567
ADA = FakeTelegram.user(OWNER, "Ada", "ada")
BEN = FakeTelegram.user(7003, "Ben", "ben")
HARDWARE = {"pin_factory": "mock", "gpio": {"porch_light": {"pin": 17}}}
SWITCH_ON = CallTools([("gpio_write", {"device": "porch_light", "on": True})])


@asynccontextmanager
async def porch_daemon(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> AsyncIterator[Daemon]:
    """The daemon with a simulated porch light, Ada its approver, once Telegram is connected."""
    table = {
        "token": telegram.token,
        "api_base_url": telegram.url,
        "allowed_users": [OWNER],
        "allowed_groups": [GROUP],
        "poll_timeout_s": 1,
    }
    channels = {"telegram": table}
    async with running_daemon(tmp_path, llm, channels, tables={"hardware": HARDWARE}) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


def gpio_bank(daemon: Daemon) -> GpioBank:
    """The GPIO bank behind the daemon's GPIO tools."""
    tool = daemon.app.tools.get("gpio_write")
    assert isinstance(tool, GpioTool), "tools.gpio is not in bot.agent.tool_registry.TOOL_MODULES"
    return tool.bank


async def test_ada_allows_once_and_the_porch_light_goes_on(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(SWITCH_ON, Say("The porch light is on."))
    async with porch_daemon(tmp_path, llm, telegram) as daemon:
        bank = gpio_bank(daemon)
        telegram.user_sends(GROUP, ADA, "@pinclaw_bot turn on the porch light")
        request = await request_in(telegram, GROUP)
        assert "gpio_write" in request.text and "device=porch_light, on=true" in request.text
        assert "medium risk: switches porch_light (pin 17) on" in request.text

        refused = await tap(telegram, GROUP, BEN, button(request, "once"), request.message_id)
        assert refused["text"] == "Only the owner can decide on this request."
        assert bank.factory is None  # no pin touched before the approval

        allowed = await tap(telegram, GROUP, ADA, button(request, "once"), request.message_id)
        assert allowed["text"] == "Allowed once."
        await said(telegram, GROUP, "The porch light is on.")
        assert isinstance(bank.factory, MockFactory)
        pin = bank.factory.pin(17)
        assert pin.state == 1
        assert [float(change.state) for change in pin.states] == [0, 1]  # off, then on
    offered = set(llm.requests[0].view.tool_names)
    assert {"gpio_list", "gpio_read", "gpio_write", "gpio_pulse"} <= offered
    assert "gpio_pwm" not in offered  # no PWM device is configured
    assert llm.requests[1].view.last_text == "porch_light (pin 17) is now on."
    assert llm.tool_results() == ["porch_light (pin 17) is now on."]


async def test_ada_denies_and_the_porch_light_stays_off(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(SWITCH_ON, Say("I did not switch it on."))
    async with porch_daemon(tmp_path, llm, telegram) as daemon:
        bank = gpio_bank(daemon)
        telegram.user_sends(OWNER, ADA, "turn on the porch light")
        request = await request_in(telegram, OWNER)
        denied = await tap(telegram, OWNER, ADA, button(request, "deny"), request.message_id)
        assert denied["text"] == "Denied."
        await said(telegram, OWNER, "I did not switch it on.")
        assert bank.factory is None  # pin 17 was never even set up, let alone switched
        assert await bank.states() == {"porch_light": "not switched yet (starts off)"}
    assert llm.tool_results() == ["Error: not run: Ada denied the gpio_write call"]
