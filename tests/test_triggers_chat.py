"""Triggers made from the chat, end to end: the real daemon, the policy gate and approvals,
PTB, the fake Telegram and the fake model asking for ``trigger_add``.

Ada (7001) is the owner and the approver, in her private chat. The default
autonomy, ``supervised``, puts ``trigger_add`` to her: the card must show the
whole trigger, Deny stores nothing, Allow stores it as made by her. The headline
check: "tell me when the door sensor opens" becomes a trigger on a mock GPIO
input (gpiozero's ``MockFactory`` behind ``[hardware] pin_factory = "mock"``),
and the next edge on that pin puts the message into the chat. A turn a trigger
started cannot make triggers, and ``pinclaw triggers test`` against a running
daemon is delivered once.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from bot.config import load_config
from bot.daemon.main import Daemon
from bot.triggers.service import TriggerService
from tests.browser import free_port
from tests.cli_helpers import run, write_config
from tests.daemon_harness import running_daemon
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.fake_telegram import FakeTelegram
from tests.telegram_taps import button, request_in, said, tap
from tests.trigger_harness import OWNER, telegram_channel, texts
from tools.gpio import GpioTool

ADA = FakeTelegram.user(OWNER, "Ada", "ada")
DOOR = {"pin": 27, "kind": "input", "pull_up": True}  # on = the pin pulled low
HARDWARE = {"pin_factory": "mock", "gpio": {"door_sensor": DOOR}}
ADD_DOOR = CallTools(
    [
        (
            "trigger_add",
            {
                "name": "door-open",
                "on": "gpio:door_sensor",
                "when": "on",
                "say": "🚪 The door opened ({device} is {state})",
                "cooldown": "1m",
            },
        )
    ]
)
WHOLE = (
    "door-open: on gpio:door_sensor, when on, say '🚪 The door opened ({device} is {state})', "
    f"to telegram:{OWNER}, cooldown 1m"
)
SECRET = "bell-secret-0123456789abcdef"


@asynccontextmanager
async def daemon_on(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, **tables: Any
) -> AsyncIterator[Daemon]:
    """The daemon with the door sensor on mock pins, once Telegram is connected."""
    channel = telegram_channel(telegram)
    tables = {"heartbeat": {"interval": "0"}, "hardware": HARDWARE, **tables}
    async with running_daemon(tmp_path, llm, {"telegram": channel}, tables=tables) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


def service(daemon: Daemon) -> TriggerService:
    assert daemon.triggers is not None
    return daemon.triggers


def watching(daemon: Daemon, what: str) -> bool:
    """Whether the source of ``what`` ("gpio:door_sensor") reports it watched."""
    return any(state.what == what and state.ok for state in service(daemon).states())


async def test_trigger_add_asks_with_the_whole_trigger_and_deny_stores_nothing(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(ADD_DOOR, Say("All right, no trigger."))
    async with daemon_on(tmp_path, llm, telegram) as daemon:
        telegram.user_sends(OWNER, ADA, "tell me when the door sensor opens")
        request = await request_in(telegram, OWNER)
        denied = await tap(telegram, OWNER, ADA, button(request, "deny"), request.message_id)
        await said(telegram, OWNER, "All right, no trigger.")
        stored = await service(daemon).store.triggers()
        known = set(service(daemon).triggers)
    assert "Approval needed" in request.text and "trigger_add" in request.text
    assert f"medium risk: sets up a trigger that acts on its own: {WHOLE}" in request.text
    assert denied["text"] == "Denied."
    assert stored == [] and known == set()
    assert "denied the trigger_add call" in llm.tool_results()[0]


async def test_allowed_it_is_stored_as_made_by_the_person_and_listed(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(
        ADD_DOOR,
        Say("I will tell you."),
        CallTools([("trigger_list", {})]),
        Say("You have one trigger."),
    )
    async with daemon_on(tmp_path, llm, telegram) as daemon:
        telegram.user_sends(OWNER, ADA, "tell me when the door sensor opens")
        request = await request_in(telegram, OWNER)
        await tap(telegram, OWNER, ADA, button(request, "once"), request.message_id)
        await said(telegram, OWNER, "I will tell you.")
        telegram.user_sends(OWNER, ADA, "which triggers are there?")
        await said(telegram, OWNER, "You have one trigger.")
        [stored] = await service(daemon).store.triggers()
        watched = service(daemon).triggers
    made, listed = llm.tool_results()
    assert made == f"Made the trigger {WHOLE}. It is watching now."
    assert listed == f"{WHOLE} (made in a chat by Ada)"
    assert (stored.made_by, stored.creator_id, stored.creator_name) == ("chat", str(OWNER), "Ada")
    assert stored.to == f"telegram:{OWNER}" and stored.describe() == WHOLE
    assert watched["door-open"] == stored


async def test_tell_me_when_the_door_sensor_opens_fires_on_the_next_edge(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(ADD_DOOR, Say("I will tell you when the door opens."))
    async with daemon_on(tmp_path, llm, telegram) as daemon:
        telegram.user_sends(OWNER, ADA, "tell me when the door sensor opens")
        request = await request_in(telegram, OWNER)
        assert WHOLE in request.text
        await tap(telegram, OWNER, ADA, button(request, "once"), request.message_id)
        await said(telegram, OWNER, "I will tell you when the door opens.")
        await telegram.await_until(lambda: watching(daemon, "gpio:door_sensor") or None)
        assert texts(telegram)[-1] == "I will tell you when the door opens."
        tool = daemon.app.tools.get("gpio_read")  # the source watches on the tools' bank
        assert isinstance(tool, GpioTool) and tool.bank.factory is not None
        pin = tool.bank.factory.pin(27)
        pin.drive_low()  # the door opens: the input turns on
        await said(telegram, OWNER, "🚪 The door opened (door_sensor is on)")
        await asyncio.sleep(0.5)
        [firing] = await service(daemon).store.history("door-open")
    assert texts(telegram).count("🚪 The door opened (door_sensor is on)") == 1
    assert (firing.kind, firing.status) == ("event", "sent")
    assert firing.delivered_to == f"telegram:{OWNER}"
    assert len(llm.requests) == 2  # a say trigger needs no model


async def test_a_turn_a_trigger_started_cannot_add_triggers(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    bell = {
        "name": "bell",
        "on": "webhook",
        "secret": SECRET,
        "to": f"telegram:{OWNER}",
        "ask": "Tell the owner someone rang.",
    }
    llm.queue(ADD_DOOR, Say("Someone rang the bell."))
    web = {"listen": f"127.0.0.1:{free_port()}", "panel": False}
    async with daemon_on(tmp_path, llm, telegram, triggers=[bell], web=web) as daemon:
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                f"{daemon.web.url}/hooks/bell",
                content="ding",
                headers={"Authorization": f"Bearer {SECRET}"},
            )
        assert answer.status_code == 202, answer.text
        await said(telegram, OWNER, "Someone rang the bell.")
        stored = await service(daemon).store.triggers()
    [refused] = llm.tool_results()
    assert refused.startswith("Error: refused: ") and "turn cannot make triggers" in refused
    assert stored == []
    assert [m.buttons for m in telegram.sent(OWNER)] == [[]]  # nobody was asked


async def test_pinclaw_triggers_test_on_a_running_daemon_delivers_once(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    home = tmp_path / "home"
    config = write_config(
        home,
        f'[general]\ndata_dir = "{home / "state"}"\n'
        f'[provider]\nkind = "openai"\nmodel = "fake"\nbase_url = "{llm.url}/v1"\n'
        '[heartbeat]\ninterval = "0"\n[web]\nlisten = "off"\n'
        f'[channels.telegram]\ntoken = "{telegram.token}"\napi_base_url = "{telegram.url}"\n'
        f"allowed_users = [{OWNER}]\npoll_timeout_s = 1\n"
        f'[[triggers]]\nname = "bell"\non = "webhook"\nsecret = "{SECRET}"\n'
        f'to = "telegram:{OWNER}"\nsay = "Ding: {{body}}"\n',
    )
    async with Daemon.open(load_config(config)) as daemon:
        await daemon.start()
        assert await daemon.channels["telegram"].status.wait_connected(30)
        tested = await asyncio.to_thread(run, home, "triggers", "test", "bell")
        assert tested.returncode == 0, tested.stderr
        shown = re.search(r"^It says: (.+)$", tested.stdout, re.MULTILINE)
        assert shown is not None and shown[1].startswith("Ding: ")
        expected = shown[1]  # what the command said is what the chat gets
        await said(telegram, OWNER, expected)
        await asyncio.sleep(2.5)  # more than a poll: the firing is not sent again
        history = await asyncio.to_thread(run, home, "triggers", "history", "bell")
    assert texts(telegram) == [expected]
    assert f"To: telegram:{OWNER}." in tested.stdout
    assert f"  bell  test  sent to telegram:{OWNER}  - " in history.stdout
    assert not llm.requests
