"""Pairing codes and the access decision for every kind of sender and chat."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.config.channel import ChannelSettings
from bot.core.messages import InboundMessage
from bot.daemon.access import AccessControl
from bot.store.db import Database
from bot.store.pairing import ALPHABET, MAX_PENDING_PER_CHANNEL, PairingStore, normalize_code


@pytest.fixture
async def pairing(tmp_path: Path) -> AsyncIterator[PairingStore]:
    db = Database(tmp_path / "pinclaw.db")
    await db.open()
    store = PairingStore(db)
    await store.setup()
    yield store
    await db.close()


def test_codes_avoid_look_alike_characters() -> None:
    assert not set("01OIL") & set(ALPHABET)
    assert normalize_code(" abcd-efgh ") == "ABCDEFGH"


async def test_one_code_per_stranger_and_at_most_three_waiting(pairing: PairingStore) -> None:
    first = await pairing.request("telegram", "u1", "Eve", "c1", now=1000)
    assert first.kind == "new" and first.request is not None
    code = first.request.code
    assert len(code) == 8 and set(code) <= set(ALPHABET)
    again = await pairing.request("telegram", "u1", "Eve", "c1", now=1001)
    assert again.kind == "waiting" and again.request is not None and again.request.code == code
    for user in range(2, MAX_PENDING_PER_CHANNEL + 1):
        assert (await pairing.request("telegram", f"u{user}", "x", "c", now=1002)).kind == "new"
    assert (await pairing.request("telegram", "u9", "x", "c", now=1003)).kind == "full"
    assert (await pairing.request("discord", "u9", "x", "c", now=1003)).kind == "new"


async def test_codes_expire_after_an_hour(pairing: PairingStore) -> None:
    outcome = await pairing.request("slack", "U1", "Eve", "D1", now=1000)
    assert outcome.request is not None
    assert await pairing.approve(outcome.request.code, now=1000 + 3601) is None
    assert await pairing.pending(now=1000 + 3601) == []
    fresh = await pairing.request("slack", "U1", "Eve", "D1", now=1000 + 3602)
    assert fresh.kind == "new"


async def test_approve_and_revoke(pairing: PairingStore) -> None:
    outcome = await pairing.request("telegram", "42", "Eve", "42")
    assert outcome.request is not None
    user = await pairing.approve(outcome.request.code.lower())
    assert user is not None and (user.channel, user.user_id, user.user_name) == (
        "telegram",
        "42",
        "Eve",
    )
    assert await pairing.is_paired("telegram", "42")
    assert not await pairing.is_paired("discord", "42")
    assert await pairing.pending() == []
    assert [u.user_id for u in await pairing.paired()] == ["42"]
    assert await pairing.approve(outcome.request.code) is None
    assert await pairing.revoke("telegram", "42")
    assert not await pairing.is_paired("telegram", "42")
    assert not await pairing.revoke("telegram", "42")


def message(**fields: Any) -> InboundMessage:
    base: dict[str, Any] = {"channel": "tg", "chat_id": "c", "sender_id": "ana", "text": "hi"}
    base.update(fields)
    return InboundMessage(**base)


SETTINGS = ChannelSettings(
    allowed_users=["ana"], allowed_groups=["family"], keywords=["claw", "bot please"]
)


@pytest.mark.parametrize(
    ("fields", "action", "reason"),
    [
        ({}, "accept", ""),
        ({"sender_id": "eve"}, "pair", "unknown sender eve"),
        ({"is_direct": False, "chat_id": "family", "sender_id": "eve"}, "drop", "not addressed"),
        (
            {"is_direct": False, "chat_id": "family", "sender_id": "eve", "mentioned": True},
            "accept",
            "",
        ),
        ({"is_direct": False, "chat_id": "family", "reply_to_bot": True}, "accept", ""),
        ({"is_direct": False, "chat_id": "family", "text": "Hey Claw!"}, "accept", ""),
        (
            {"is_direct": False, "chat_id": "family", "text": "clawing at it"},
            "drop",
            "not addressed",
        ),
        ({"is_direct": False, "chat_id": "family", "text": "bot please help"}, "accept", ""),
        ({"is_direct": False, "chat_id": "work", "mentioned": True}, "accept", ""),
        ({"is_direct": False, "chat_id": "work"}, "drop", "not addressed"),
        (
            {"is_direct": False, "chat_id": "work", "sender_id": "eve", "mentioned": True},
            "drop",
            "sender eve is not allowed in group work",
        ),
        ({"channel": "other"}, "drop", "channel other has no settings"),
    ],
)
async def test_access_decisions(
    pairing: PairingStore, fields: dict[str, Any], action: str, reason: str
) -> None:
    decision = await AccessControl({"tg": SETTINGS}, pairing).decide(message(**fields))
    assert decision.action == action
    assert reason in decision.reason


async def test_group_mode_all_and_pairing_off(pairing: PairingStore) -> None:
    open_groups = SETTINGS.model_copy(update={"group_mode": "all", "pairing": False})
    access = AccessControl({"tg": open_groups}, pairing)
    chatter = message(is_direct=False, chat_id="family", sender_id="eve", text="lunch?")
    assert (await access.decide(chatter)).action == "accept"
    stranger = await access.decide(message(sender_id="eve"))
    assert (stranger.action, stranger.reason) == ("drop", "unknown sender eve and pairing is off")


async def test_paired_users_are_accepted(pairing: PairingStore) -> None:
    outcome = await pairing.request("tg", "eve", "Eve", "c")
    assert outcome.request is not None
    await pairing.approve(outcome.request.code)
    access = AccessControl({"tg": SETTINGS}, pairing)
    assert (await access.decide(message(sender_id="eve"))).action == "accept"
