"""What the bot showed on the fake Telegram, Discord and Slack, read alike from each.

Each fake records its own calls; these read them as one list of ``Shown``: the
message a call went to (sent anew or edited), its text as the platform got it, and
when. ``no_repeats`` checks the rule every draft keeps: no call to a message repeats
what the message already shows.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from tests.fake_discord import FakeDiscord
from tests.fake_slack import FakeSlack
from tests.fake_telegram import FakeTelegram


@dataclass(frozen=True)
class Shown:
    """What the bot put in a message: sent anew or edited."""

    at: float  # time.monotonic() as the fake recorded the call
    ref: str  # the message
    text: str


def no_repeats(calls: Sequence[Shown]) -> None:
    """No call to a message repeats what the message already shows."""
    for ref in {c.ref for c in calls}:
        texts = [c.text for c in calls if c.ref == ref]
        repeated = [a for a, b in itertools.pairwise(texts) if a == b]
        assert not repeated, (ref, texts)


def telegram_shown(telegram: FakeTelegram) -> list[Shown]:
    """Every message the bot sent and every edit it made, answered or refused."""
    shown = []
    for call in telegram.calls():
        if call.method == "sendMessage" and call.ok:
            ref = call.result["message_id"]
        elif call.method == "editMessageText":
            ref = call.params["message_id"]
        else:
            continue
        shown.append(Shown(call.at, str(ref), str(call.params["text"])))
    return shown


def discord_shown(fake: FakeDiscord, channel: str) -> list[Shown]:
    """Every message the bot posted in ``channel`` and every edit of one (PATCH)."""
    # Each post carries a nonce, kept with the message it made.
    made = {str(m.get("nonce")): m["id"] for m in fake.sent(channel) if m.get("nonce")}
    shown = []
    for call in fake.calls(None, rf"^/channels/{channel}/messages"):
        if call.method == "POST" and call.status == 200:
            ref = made.get(str((call.json or {}).get("nonce")), "a deleted message")
        elif call.method == "PATCH":
            ref = call.path.rpartition("/")[2]
        else:
            continue
        shown.append(Shown(call.time, ref, str((call.json or {}).get("content") or "")))
    return shown


def slack_shown(slack: FakeSlack) -> list[Shown]:
    """Every message the bot posted and every ``chat.update`` it made."""
    shown = []
    for call in slack.calls():
        if call.method == "chat.postMessage" and call.ok:
            ref = call.response["ts"]
        elif call.method == "chat.update":
            ref = call.args["ts"]
        else:
            continue
        shown.append(Shown(call.at, str(ref), str(call.args.get("text") or "")))
    return shown
