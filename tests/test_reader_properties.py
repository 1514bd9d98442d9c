"""Every platform's reader, as property tests: any text is read, cleaned, and kept.

Random text mixes any Unicode with lone surrogates (half an emoji, as Telegram's and
Discord's JSON can carry them), NUL and the other control characters. Each reader
gets what its library hands PinClaw: a ``telegram.Update`` parsed from the update's
JSON, a ``discord.Message`` from a gateway payload of the fake Discord (over the
real gateway), a Slack event dict as Socket Mode delivers it, and the web chat's
form fields. Always: an ``InboundMessage`` comes out, its text, names and titles
encode as UTF-8, and every character is kept, except each lone surrogate and
control character (but tab, line feed, carriage return), which becomes U+FFFD.
"""

from __future__ import annotations

import html
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from slack_sdk.web.async_client import AsyncWebClient
from telegram import Bot, Update

from bot.core.messages import InboundMessage, one_line_name
from channels.discord.channel import DiscordChannel
from channels.discord.settings import DiscordSettings
from channels.slack.events import BotIdentity as SlackIdentity
from channels.slack.events import Directory, Normaliser, ThreadMemory
from channels.telegram.events import BotIdentity, normalise
from channels.telegram.reading import read_update
from channels.web.events import inbound as web_inbound
from tests.adapter_harness import ScriptedInbox, channel_deps, connected
from tests.fake_discord import FakeDiscord
from tests.fake_discord.payloads import user as discord_user
from tests.fake_slack import FakeSlack
from tests.fake_slack.payloads import message_event

PROPERTY = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
OVER_THE_WIRE = settings(PROPERTY, max_examples=40)  # each example goes over a socket
KEPT_CONTROLS = "\t\n\r"
CHARACTER = st.one_of(
    st.characters(),
    st.characters(categories=["Cs"]),  # lone surrogates
    st.characters(max_codepoint=0x1F),  # NUL and the other C0 controls
)
TEXT = st.text(CHARACTER, min_size=1, max_size=60)
NAME = st.text(CHARACTER, min_size=1, max_size=20)
ME = BotIdentity(id=999, username="pinclaw_bot")


def expected(text: str) -> str:
    """``text`` as a reader must give it: each unfit character replaced, all else kept."""
    return "".join("\ufffd" if _unfit(c) else c for c in text)


def expected_name(text: str) -> str:
    """A name as a reader that applies ``cleaned`` (Discord's) must give it: as
    ``expected``, on one line (the router does the same for every channel)."""
    return one_line_name(expected(text))


def _unfit(char: str) -> bool:
    code = ord(char)
    return 0xD800 <= code <= 0xDFFF or (code < 0x20 and char not in KEPT_CONTROLS)


def assert_fit(message: InboundMessage) -> None:
    """Everything a person wrote or is called encodes as UTF-8 (what the store needs)."""
    for value in (message.text, message.sender_name, message.chat_title, message.quotes):
        value.encode("utf-8")
    message.to_json().encode("utf-8")


def utf16_units(text: str) -> int:
    """Telegram's length of ``text``: a lone surrogate is one UTF-16 unit, like any BMP one."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def over_the_wire(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` as JSON carries it (lone surrogates as ``\\udXXX`` escapes) and Python reads it."""
    decoded: dict[str, Any] = json.loads(json.dumps(data))
    return decoded


def no_spaces(text: str) -> str:
    return "".join(c for c in text if not c.isspace())


# -- Telegram ------------------------------------------------------------------------------


def telegram_update(
    text: str, first: str, last: str, *, group_title: str | None, caption: bool
) -> dict[str, Any]:
    sender = {"id": 5, "is_bot": False, "first_name": first, "last_name": last}
    chat = (
        {"id": 5, "type": "private", "first_name": first}
        if group_title is None
        else {"id": -1001, "type": "supergroup", "title": group_title}
    )
    message: dict[str, Any] = {
        "message_id": 7,
        "date": 1_700_000_000,
        "chat": chat,
        "from": sender,
        "forward_origin": {"type": "hidden_user", "sender_user_name": last, "date": 0},
    }
    if caption:
        photo = {"file_id": "p", "file_unique_id": "u", "width": 2, "height": 2}
        message.update(photo=[photo], caption=text)
    else:
        message["text"] = text
    return {"update_id": 1, "message": message}


@PROPERTY
@given(text=TEXT, first=NAME, last=NAME, caption=st.booleans())
def test_a_telegram_direct_message_keeps_every_character(
    text: str, first: str, last: str, caption: bool
) -> None:
    assume(expected(text).strip() or caption)
    data = over_the_wire(telegram_update(text, first, last, group_title=None, caption=caption))
    update = read_update(data, Bot("1:TEST"))
    assert isinstance(update, Update)
    message = normalise(update, ME)
    assert message is not None
    assert_fit(message)
    assert message.text == expected(text)
    assert message.sender_name == expected(f"{first} {last}")
    assert message.quotes == f"a message forwarded from {expected(last)}"


@PROPERTY
@given(before=TEXT, after=TEXT, title=NAME, caption=st.booleans())
def test_a_telegram_mention_after_broken_characters_is_found_where_telegram_says(
    before: str, after: str, title: str, caption: bool
) -> None:
    """Entity offsets count UTF-16 units of the text as sent; cleaning must not move them."""
    text = f"{before} @pinclaw_bot {after}"
    mention = {"type": "mention", "offset": utf16_units(before) + 1, "length": 12}
    raw = telegram_update(text, "Ada", "Lovelace", group_title=title, caption=caption)
    raw["message"]["caption_entities" if caption else "entities"] = [mention]
    update = read_update(over_the_wire(raw), Bot("1:TEST"))
    assert isinstance(update, Update)
    message = normalise(update, ME)
    assert message is not None
    assert_fit(message)
    assert message.mentioned and message.chat_title == expected(title)
    # The mention, and only the mention, is cut out (spaces around it are tidied).
    kept = no_spaces(expected(before) + expected(after)).lstrip(",:;")
    assert no_spaces(message.text).lstrip(",:;") == kept


def test_a_telegram_update_ptb_cannot_parse_is_read_as_unreadable_with_its_chat() -> None:
    raw = telegram_update("hi", "Ada", "L", group_title=None, caption=False)
    raw["message"]["date"] = "yesterday"
    read = read_update(raw, Bot("1:TEST"))
    assert not isinstance(read, Update)
    assert (read.update_id, read.chat_id, read.sender_id, read.message_id) == (1, "5", "5", "5:7")
    assert read.is_direct and read.reason.startswith("TypeError")


# -- Discord -------------------------------------------------------------------------------


@pytest.fixture
def discord_fake() -> Iterator[FakeDiscord]:
    with FakeDiscord.running(heartbeat_interval=1.0) as server:
        yield server


@pytest.fixture
async def discord_inbox(tmp_path: Path, discord_fake: FakeDiscord) -> AsyncIterator[ScriptedInbox]:
    """A running Discord channel, connected to the fake, feeding a scripted inbox."""
    settings = DiscordSettings.model_validate(
        {
            "token": discord_fake.token,
            "api_base_url": discord_fake.api_base,
            "gateway_url": discord_fake.gateway_url,
        }
    )
    inbox = ScriptedInbox()
    async with channel_deps(tmp_path) as deps, connected(DiscordChannel(settings, deps), inbox):
        yield inbox


@OVER_THE_WIRE
@given(content=TEXT, name=NAME)
async def test_a_discord_message_keeps_every_character(
    discord_fake: FakeDiscord, discord_inbox: ScriptedInbox, content: str, name: str
) -> None:
    assume(expected(content).strip())
    author = discord_user(name)
    dm = discord_fake.dm_channel(author)["id"]
    sent = discord_fake.user_sends(dm, author, content)
    await discord_inbox.wait(messages=len(discord_inbox.messages) + 1)
    message = discord_inbox.messages[-1]
    assert message.message_id == sent["id"]
    assert_fit(message)
    assert message.text == expected(content).strip()
    assert message.sender_name == expected_name(name)


# -- Slack ---------------------------------------------------------------------------------


@pytest.fixture
def slack_fake() -> Iterator[FakeSlack]:
    with FakeSlack.running() as fake:
        yield fake


@pytest.fixture
async def slack_reader(tmp_path: Path, slack_fake: FakeSlack) -> AsyncIterator[Normaliser]:
    """Slack's reader, looking names up in the fake workspace through slack_sdk."""
    client = AsyncWebClient(token=slack_fake.bot_token, base_url=slack_fake.api_url)
    me = SlackIdentity(user_id="UBOT", bot_id="BBOT", name="pinclaw", team="T1")
    async with channel_deps(tmp_path) as deps:
        yield Normaliser(me, Directory(lambda: client), ThreadMemory(deps.state), ())


_slack_users = iter(range(10_000, 1_000_000))


@OVER_THE_WIRE  # each example looks a name up in the fake workspace
@given(typed=TEXT, name=NAME)
async def test_a_slack_event_keeps_every_character(
    slack_fake: FakeSlack, slack_reader: Normaliser, typed: str, name: str
) -> None:
    assume(expected(typed).strip())
    user = f"U{next(_slack_users)}"
    slack_fake.add_user(user, "someone", display_name=name)
    # Slack escapes &, < and > in what people type; the reader undoes it.
    text = html.escape(typed, quote=False)
    event = message_event(
        channel="D1", channel_type="im", user=user, text=text, ts="1700000000.000100", team_id="T1"
    )
    message = await slack_reader.from_event(over_the_wire(event))
    assert message is not None
    assert_fit(message)
    assert message.text == expected(typed).strip()
    assert message.sender_name == expected(name)


# -- the web chat --------------------------------------------------------------------------


@PROPERTY
@given(text=TEXT, name=NAME)
def test_a_web_chat_message_keeps_every_character(text: str, name: str) -> None:
    message = web_inbound(text, "nonce-123456", name)
    assert_fit(message)
    assert message.text == expected(text.replace("\r\n", "\n")).strip()
    assert message.sender_name == expected(name)
