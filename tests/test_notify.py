"""``notify`` end to end: the real daemon, the policy gate and approvals, PTB, the fake
Telegram and the fake model asking for the tool.

Sam (7001) is the approver; Ada (7002) and Cara (7003) are allowed on Telegram too.
Ada becomes a person PinClaw knows by name with her first message. In ``supervised``
mode ``notify`` asks Sam with a card showing the recipient and the whole text; once
allowed, Ada's chat gets one message saying who asked. A name nobody has, or a
person with no account PinClaw may write to, is refused before anyone is asked.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bot.config import LoadedConfig, parse_config
from bot.daemon.app import open_app
from bot.daemon.main import Daemon
from tests.channel_tables import telegram_table
from tests.daemon_harness import daemon_config, running_daemon
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.fake_telegram import FakeTelegram
from tests.telegram_taps import button, request_in, said, tap

SAM_ID, ADA_ID, CARA_ID, DANA_ID, ADA_WORK_ID = 7001, 7002, 7003, 7004, 7005
SAM = FakeTelegram.user(SAM_ID, "Sam", "sam")
ADA = FakeTelegram.user(ADA_ID, "Ada", "ada")
ADA_WORK = FakeTelegram.user(ADA_WORK_ID, "Ada", "ada_work")
DINNER = "dinner is ready"
FROM_SAM = f"From Sam, via PinClaw:\n\n{DINNER}"


def notify(to: str, text: str = DINNER) -> CallTools:
    return CallTools([("notify", {"to": to, "text": text})])


@asynccontextmanager
async def household(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, *script: Any, **security: Any
) -> AsyncIterator[Daemon]:
    """The daemon with Sam, Ada and Cara allowed on Telegram, once connected; Ada has
    said hello (so PinClaw knows her by name). The model answers her, then follows
    ``script``."""
    table = telegram_table(telegram, allowed_users=[SAM_ID, ADA_ID, CARA_ID])
    channels = {"telegram": table}
    tables = {"heartbeat": {"interval": "0"}}
    async with running_daemon(
        tmp_path, llm, channels, security=security or None, tables=tables
    ) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        llm.queue(Say("Hello Ada."), *script)
        telegram.user_sends(ADA_ID, ADA, "hi")
        await said(telegram, ADA_ID, "Hello Ada.")
        yield daemon


def texts(telegram: FakeTelegram, chat: int) -> list[str]:
    return [m.text for m in telegram.sent(chat)]


def cards(telegram: FakeTelegram, chat: int) -> list[str]:
    return [m.text for m in telegram.sent(chat) if m.buttons or "Approval needed" in m.text]


def audited(tmp_path: Path, tool: str) -> list[dict[str, Any]]:
    lines = (tmp_path / "state" / "audit.jsonl").read_text().splitlines()
    return [entry for entry in map(json.loads, lines) if entry["tool"] == tool]


async def test_supervised_asks_with_ada_and_the_text_then_delivers_once_saying_who_asked(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    script = (notify("Ada"), Say("I told Ada."))
    async with household(tmp_path, llm, telegram, *script):
        telegram.user_sends(SAM_ID, SAM, "tell Ada dinner is ready")
        request = await request_in(telegram, SAM_ID)
        before_allowed = texts(telegram, ADA_ID)
        await tap(telegram, SAM_ID, SAM, button(request, "once"), request.message_id)
        await said(telegram, SAM_ID, "I told Ada.")
        to_ada = texts(telegram, ADA_ID)
    assert "Approval needed" in request.text and "notify" in request.text
    assert "Ada" in request.text and DINNER in request.text
    assert "medium risk: sends this message to Ada, saying who asked" in request.text
    assert before_allowed == ["Hello Ada."]  # nothing goes out before Sam allows it
    assert to_ada == ["Hello Ada.", FROM_SAM]  # once, saying who asked
    assert llm.tool_results() == [f"Sent to Ada (telegram:{ADA_ID})."]
    [entry] = audited(tmp_path, "notify")
    assert entry["arguments"] == {"to": "Ada", "text": DINNER}
    assert (entry["decision"], entry["outcome"], entry["sender"]) == (
        "approved",
        "ok",
        str(SAM_ID),
    )


async def test_deny_sends_nothing_and_who_cannot_be_messaged_is_refused_before_asking(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    nobody = ["Zed", "Dana", f"telegram:{DANA_ID}"]
    script = (
        CallTools([("notify", {"to": to, "text": DINNER}) for to in nobody]),
        Say("I cannot reach them."),
        notify("Ada"),
        Say("All right, I won't."),
    )
    async with household(tmp_path, llm, telegram, *script) as daemon:
        # Dana is a person PinClaw knows, but she is neither allowed, paired nor linked.
        await daemon.app.people.person_for("telegram", str(DANA_ID), "Dana")
        telegram.user_sends(SAM_ID, SAM, "tell Zed and Dana dinner is ready")
        await said(telegram, SAM_ID, "I cannot reach them.")
        asked_meanwhile = cards(telegram, SAM_ID)
        telegram.user_sends(SAM_ID, SAM, "tell Ada dinner is ready")
        request = await request_in(telegram, SAM_ID)
        denied = await tap(telegram, SAM_ID, SAM, button(request, "deny"), request.message_id)
        await said(telegram, SAM_ID, "All right, I won't.")
    assert asked_meanwhile == []  # refused before anyone was asked
    assert denied["text"] == "Denied."
    zed, dana, dana_chat, ada = llm.tool_results()
    who = "People who can be messaged: Ada, Sam."
    assert zed.startswith(f"Error: nobody is known as 'Zed'. {who}")
    assert dana.startswith("Error: Dana cannot be messaged: they have no chat account")
    assert who in dana
    assert dana_chat.startswith(f"Error: 'telegram:{DANA_ID}' cannot be messaged")
    assert "denied the notify call" in ada
    assert texts(telegram, ADA_ID) == ["Hello Ada."] and texts(telegram, DANA_ID) == []
    decisions = [(e["arguments"]["to"], e["decision"]) for e in audited(tmp_path, "notify")]
    assert sorted(decisions[:3]) == [  # the calls of one round run side by side
        ("Dana", "invalid"),
        ("Zed", "invalid"),
        (f"telegram:{DANA_ID}", "invalid"),
    ]
    assert decisions[3] == ("Ada", "denied")


async def test_always_for_ada_covers_ada_only_and_a_chat_target_works(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    script = (
        notify("Ada"),
        Say("Told her."),
        notify("ada", "the soup is on the table"),  # the same recipient in other letters
        Say("Told her again."),
        notify(f"telegram:{CARA_ID}"),
        Say("Told Cara."),
    )
    async with household(tmp_path, llm, telegram, *script):
        telegram.user_sends(SAM_ID, SAM, "tell Ada dinner is ready")
        first = await request_in(telegram, SAM_ID)
        await tap(telegram, SAM_ID, SAM, button(first, "person"), first.message_id)
        await said(telegram, SAM_ID, "Told her.")
        telegram.user_sends(SAM_ID, SAM, "and that the soup is on the table")
        await said(telegram, SAM_ID, "Told her again.")
        asked_for_ada = len(cards(telegram, SAM_ID))
        telegram.user_sends(SAM_ID, SAM, "tell Cara too")
        second = await telegram.await_until(
            lambda: next((m for m in telegram.sent(SAM_ID) if m.buttons), None)
        )
        await tap(telegram, SAM_ID, SAM, button(second, "once"), second.message_id)
        await said(telegram, SAM_ID, "Told Cara.")
    assert asked_for_ada == 1  # the rule for Ada let the second message through
    assert f"telegram:{CARA_ID}" in second.text
    assert texts(telegram, ADA_ID) == [
        "Hello Ada.",
        FROM_SAM,
        "From Sam, via PinClaw:\n\nthe soup is on the table",
    ]
    assert texts(telegram, CARA_ID) == [FROM_SAM]
    decisions = [e["decision"] for e in audited(tmp_path, "notify")]
    assert decisions == ["approved", "approved", "approved"]
    assert [e["approved_by"].startswith("rule #") for e in audited(tmp_path, "notify")] == [
        False,
        True,
        False,
    ]


async def test_a_person_is_reached_on_the_account_they_wrote_from_last(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    script = (
        notify("Ada", "first"),
        Say("Sent."),
        Say("Hello again, Ada."),
        notify("Ada", "second"),
        Say("Sent again."),
    )
    async with household(tmp_path, llm, telegram, *script, autonomy="full") as daemon:
        ada = await daemon.app.people.find("Ada")
        assert ada is not None and not isinstance(ada, list)
        code, _ = await daemon.app.people.new_link(ada.id)
        telegram.user_sends(ADA_WORK_ID, ADA_WORK, f"/link {code}")  # her second account
        await telegram.await_until(lambda: texts(telegram, ADA_WORK_ID) or None)
        telegram.user_sends(SAM_ID, SAM, "tell Ada: first")
        await said(telegram, SAM_ID, "Sent.")  # linked last, but she wrote from 7002 last
        telegram.user_sends(ADA_WORK_ID, ADA_WORK, "hello from work")
        await said(telegram, ADA_WORK_ID, "Hello again, Ada.")
        telegram.user_sends(SAM_ID, SAM, "tell Ada: second")
        await said(telegram, SAM_ID, "Sent again.")
    assert texts(telegram, ADA_ID)[-1] == "From Sam, via PinClaw:\n\nfirst"
    assert texts(telegram, ADA_WORK_ID)[0].startswith("Linked: this Telegram account")
    assert texts(telegram, ADA_WORK_ID)[-1] == "From Sam, via PinClaw:\n\nsecond"
    assert "From Sam, via PinClaw:\n\nsecond" not in texts(telegram, ADA_ID)
    assert llm.tool_results() == [
        f"Sent to Ada (telegram:{ADA_ID}).",
        f"Sent to Ada (telegram:{ADA_WORK_ID}).",
    ]


async def test_too_long_a_text_comes_back_to_the_model_and_nothing_is_sent(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    script = (notify("Ada", "x" * 4001), Say("Too long."))
    async with household(tmp_path, llm, telegram, *script):
        telegram.user_sends(SAM_ID, SAM, "tell Ada a very long story")
        await said(telegram, SAM_ID, "Too long.")
    [result] = llm.tool_results()
    assert "invalid arguments for notify" in result and "4000 characters" in result
    assert cards(telegram, SAM_ID) == [] and texts(telegram, ADA_ID) == ["Hello Ada."]


async def test_only_the_daemon_offers_notify(tmp_path: Path, llm: FakeLLM) -> None:
    raw = daemon_config(llm, {})
    loaded = LoadedConfig(parse_config(raw, {}), tmp_path / "config.toml", tmp_path / "state")
    async with open_app(loaded) as app:  # what `pinclaw agent -m` runs on
        assert app.tools.get("notify") is None
        assert app.tools.get("clock") is not None


async def test_a_scheduled_job_says_it_was_a_job_and_who_set_it_up(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    job = {"name": "dinner", "schedule_kind": "after", "schedule": "1h", "prompt": "Tell Ada"}
    script = (
        CallTools([("cron_add", job)]),
        CallTools([("cron_run", {"job_id": 1})]),
        Say("It runs now."),
        notify("Ada"),  # the job's own turn, after the chat's
        Say("Ada knows."),
    )
    async with household(tmp_path, llm, telegram, *script, autonomy="full"):
        telegram.user_sends(SAM_ID, SAM, "in an hour, tell Ada dinner is ready; try it now")
        await said(telegram, SAM_ID, "Ada knows.")
    assert texts(telegram, ADA_ID) == [
        "Hello Ada.",
        f"From a scheduled job set up by Sam, via PinClaw:\n\n{DINNER}",
    ]
    [entry] = audited(tmp_path, "notify")
    assert entry["origin"] == "cron:dinner" and entry["arguments"]["to"] == "Ada"


async def test_the_same_message_in_one_turn_is_sent_once(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    """A turn (or the same turn answered again after a restart) that calls notify twice
    with the same recipient and text sends it once; the model is told."""
    script = (notify("Ada"), notify("ada"), Say("Done."))
    async with household(tmp_path, llm, telegram, *script, autonomy="full"):
        telegram.user_sends(SAM_ID, SAM, "tell Ada dinner is ready")
        await said(telegram, SAM_ID, "Done.")
    assert texts(telegram, ADA_ID) == ["Hello Ada.", FROM_SAM]
    assert llm.tool_results() == [
        f"Sent to Ada (telegram:{ADA_ID}).",
        "Already sent to Ada for this message; not sent twice.",
    ]
