"""Slack formats: markdown rendered as mrkdwn, splitting after rendering, Block Kit buttons
(checked against Slack's block rules), Slack markup read back as plain text, and how
Slack's errors are classified for retries (through the real client and the fake Slack)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import aiohttp
import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.core.delivery import Retry
from bot.core.messages import Button
from channels.slack.format import (
    MESSAGE_LIMIT,
    button_blocks,
    plain_text,
    split_for_slack,
    to_mrkdwn,
)
from channels.slack.send import SlackRefused, call, classify
from tests.fake_slack import ALICE_DM, FakeSlack
from tests.fake_slack.message_rules import blocks_problems


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("**bold**, *italic*, _also_, ~~gone~~", "*bold*, _italic_, _also_, ~gone~"),
        ("a & b <c> `x<y`", "a &amp; b &lt;c&gt; `x&lt;y`"),
        (
            "[docs & more](https://x.com/?a=1&b=2|3)",
            "<https://x.com/?a=1&amp;b=2%7C3|docs &amp; more>",
        ),
        ("# Title\n## **Bold** heading", "*Title*\n*Bold heading*"),
        ("- one\n  - two", "• one\n  • two"),
        ("```python\nif a < b:\n    s = '```'\n```", "```\nif a &lt; b:\n    s = '`\u200b``'\n```"),
    ],
)
def test_markdown_renders_as_mrkdwn(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


def test_splitting_measures_after_escaping_and_keeps_fences_balanced() -> None:
    text = "&" * 2500 + "\n\n```\n" + "\n".join(f"x < {i}" for i in range(800)) + "\n```"
    pieces = split_for_slack(text)
    assert len(pieces) > 3
    assert all(len(piece) <= MESSAGE_LIMIT for piece in pieces)
    assert all(piece.count("```") % 2 == 0 for piece in pieces)
    assert "".join(pieces).count("&amp;") == 2500
    numbers = [int(n) for n in re.findall(r"x &lt; (\d+)", "".join(pieces))]
    assert numbers == list(range(800))
    assert split_for_slack("") == [] and split_for_slack("  \n\n ") == []


def test_buttons_become_valid_block_kit() -> None:
    buttons = [Button(f"Option {i} " + "x" * (i * 3), f"pick:{i}") for i in range(30)]
    blocks = button_blocks("Pick *one*", buttons)
    assert blocks_problems(blocks) == []
    section, first, second = blocks
    assert section == {"type": "section", "text": {"type": "mrkdwn", "text": "Pick *one*"}}
    assert len(first["elements"]) == 25 and len(second["elements"]) == 5
    assert first["block_id"] != second["block_id"]
    labels = [e["text"]["text"] for e in first["elements"] + second["elements"]]
    assert max(len(label) for label in labels) == 75 and labels[-1].endswith("…")
    actions = [e["action_id"] for e in first["elements"] + second["elements"]]
    assert actions == [f"pick:{i}" for i in range(30)]
    assert button_blocks("", buttons[:1])[0]["type"] == "actions"  # no empty section


def test_slack_markup_reads_back_as_what_was_typed() -> None:
    text, mentioned = plain_text(
        "<@U0BOT> compare &lt;a&gt; &amp; <@U0BOB|bob>, see <#C1|general>, "
        "<https://x.com|the site>, <https://y.com>, <mailto:a@b.c|a@b.c> <!here> "
        "<!subteam^S1|@devs> <@U0ANA>",
        "U0BOT",
    )
    assert mentioned
    assert text == (
        "compare <a> & @bob, see #general, the site (https://x.com), https://y.com, "
        "a@b.c @here @devs @U0ANA"
    )
    assert plain_text("hey <@U0BOT>, what now", "U0BOT") == ("hey what now", True)
    assert plain_text("<@U0BOT>: /new", "U0BOT") == ("/new", True)
    assert plain_text("talk to <@U0BOB>", "U0BOT") == ("talk to @U0BOB", False)


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    """A fake Slack for the error cases."""
    with FakeSlack.running() as fake:
        yield fake


async def test_errors_are_classified_from_real_responses(slack: FakeSlack) -> None:
    client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url, retry_handlers=[])
    slack.fail("chat.postMessage", "ratelimited", status=429, retry_after=7)
    with pytest.raises(SlackRefused) as limited:
        await call("chat.postMessage", client.chat_postMessage(channel=ALICE_DM, text="hi"))
    assert (limited.value.status, limited.value.retry_after) == (429, 7.0)
    assert classify(limited.value) == Retry(after_s=7.0)

    with pytest.raises(SlackRefused) as missing:
        await call("chat.postMessage", client.chat_postMessage(channel="C0NOPE", text="hi"))
    assert classify(missing.value) is None
    assert str(missing.value) == (
        "chat.postMessage: the conversation does not exist or the app cannot see it "
        "(channel_not_found)"
    )

    slack.fail("chat.postMessage", "internal_error", status=500)
    with pytest.raises(SlackRefused) as hiccup:
        await call("chat.postMessage", client.chat_postMessage(channel=ALICE_DM, text="hi"))
    assert classify(hiccup.value) == Retry()

    slack.unreachable()
    with pytest.raises(aiohttp.ClientError) as offline:
        await call("auth.test", client.auth_test())
    assert classify(offline.value) == Retry()
    assert classify(ValueError("a bug")) is None
