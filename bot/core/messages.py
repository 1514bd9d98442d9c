"""Messages between chat channels and the core, as frozen records.

Every channel adapter turns what its platform delivers into an ``InboundMessage``
and renders an ``OutboundMessage`` the way its platform can. A conversation's
identity is its ``SessionKey``: channel, chat, and thread where there is one.
Inbound messages are stored as JSON (``to_json`` / ``from_json``) before they
are processed, so they survive a crash.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class SessionKey:
    """Which conversation: a chat on a channel, and a thread or topic inside it."""

    channel: str
    chat_id: str
    thread_id: str | None = None

    def __str__(self) -> str:
        base = f"{self.channel}:{self.chat_id}"
        return f"{base}:{self.thread_id}" if self.thread_id else base


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file sent with a message; ``ref`` is what the channel needs to fetch it."""

    name: str
    mime_type: str
    size: int
    ref: str


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """A message a person sent to PinClaw.

    ``is_direct`` is a one-to-one chat; ``mentioned`` an @mention of the bot;
    ``reply_to_bot`` a reply to one of the bot's messages. ``message_id`` is the
    platform's id, which also identifies duplicate deliveries. ``sent_at`` is when
    the platform says the person sent it; ``received_at`` when PinClaw got it.
    """

    channel: str
    chat_id: str
    sender_id: str
    text: str
    sender_name: str = ""
    thread_id: str | None = None
    message_id: str | None = None
    reply_to_id: str | None = None
    is_direct: bool = True
    mentioned: bool = False
    reply_to_bot: bool = False
    attachments: tuple[Attachment, ...] = ()
    chat_title: str = ""
    sent_at: float | None = None
    received_at: float = field(default_factory=time.time)
    quotes: str = ""
    """Whose words the message carries besides the sender's: "a message forwarded from Bob",
    "a message quoted from Ana" ("" for none); a turn answering it starts as having read
    untrusted content."""
    edit_of: str | None = None
    """For an edit: the platform id of the message it changes (``message_id`` is then
    the edit's own id, so each edit is stored once)."""
    quoted_text: str = ""
    """The text of the earlier message this one replies to ("" for none)."""
    quoted_from: str = ""
    """Who wrote that earlier message, as a name ("PinClaw" for the bot's own)."""

    def age(self, now: float | None = None) -> float:
        """Seconds since the person sent it (or since PinClaw received it)."""
        now = time.time() if now is None else now
        return now - (self.sent_at if self.sent_at is not None else self.received_at)

    @property
    def session(self) -> SessionKey:
        """The conversation this message belongs to."""
        return SessionKey(self.channel, self.chat_id, self.thread_id)

    def to_json(self) -> str:
        """The message as JSON, for the inbound store (as ``asdict`` would give it, but
        without its deep copies: this runs for every message)."""
        data = {name: getattr(self, name) for name in _INBOUND_FIELDS}
        data["attachments"] = [asdict(a) for a in self.attachments]
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> InboundMessage:
        """Rebuild a message stored with ``to_json``."""
        data: dict[str, Any] = json.loads(text)
        data["attachments"] = tuple(Attachment(**a) for a in data.get("attachments", ()))
        return cls(**data)


_INBOUND_FIELDS = tuple(f.name for f in dataclasses.fields(InboundMessage))


@dataclass(frozen=True, slots=True)
class Button:
    """A button under a message; ``action_id`` comes back when it is pressed."""

    label: str
    action_id: str


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    """A message PinClaw sends to a chat; ``text`` is in PinClaw's markdown subset."""

    channel: str
    chat_id: str
    text: str
    thread_id: str | None = None
    reply_to: str | None = None
    buttons: tuple[Button, ...] = ()

    @classmethod
    def reply(cls, to: InboundMessage, text: str) -> OutboundMessage:
        """A reply to ``to`` in the same chat and thread."""
        return cls(to.channel, to.chat_id, text, to.thread_id, to.message_id)


@dataclass(frozen=True, slots=True)
class OutboundFile:
    """A file PinClaw sends to a chat: its bytes, name and type, and a markdown caption.

    ``as_photo`` shows an image as a picture where a platform tells pictures from
    files (Telegram); ``path`` is where the file is on this machine, for a channel
    that shows the place instead of the bytes (the terminal).
    """

    channel: str
    chat_id: str
    name: str
    data: bytes = field(repr=False)
    mime_type: str = "application/octet-stream"
    caption: str = ""
    thread_id: str | None = None
    as_photo: bool = False
    path: str = ""
    reply_to: str | None = None  # the message it answers, as ``OutboundMessage.reply_to``


# What no text from a chat should carry: lone surrogates (half of an emoji; no UTF-8
# can hold one) and the C0 control characters other than tab, line feed and carriage
# return (NUL and the like). Each becomes U+FFFD, one character for one: a lone
# surrogate and a control character are one UTF-16 unit each, like U+FFFD, so offsets
# counted in the original text (Telegram's entities) still line up.
_UNFIT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]")
REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD and nothing else changed: what
    SQLite and UTF-8 can store (a model's or a tool's text keeps its control characters)."""
    return _SURROGATE.sub(REPLACEMENT, text) if _SURROGATE.search(text) else text


def clean_text(text: str) -> str:
    """``text`` with each lone surrogate and control character (but tab, line feed and
    carriage return) replaced by U+FFFD; every other character is kept as it was."""
    return _UNFIT.sub(REPLACEMENT, text) if _UNFIT.search(text) else text


def clean_json(value: Any) -> Any:
    """A decoded JSON value (a platform's update, event or payload) with ``clean_text``
    applied to every string in it, keys included; other values are kept as they are."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_json(key): clean_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [clean_json(item) for item in value]
    return value


def decode_text(data: bytes) -> str:
    """UTF-8 ``data`` as text: invalid bytes become U+FFFD, then ``clean_text`` applies."""
    return clean_text(data.decode("utf-8", "replace"))


def unreadable_reason(exc: BaseException) -> str:
    """Why a channel could not read a message, as one short line for the log and the store."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return clean_text(f"{type(exc).__name__}: {first}" if first else type(exc).__name__)[:200]


def cleaned(message: InboundMessage) -> InboundMessage:
    """``message`` with ``clean_text`` applied to what a person wrote or is called (the
    text, names, the chat's title, whose words it quotes, the files' names and types).

    Names and titles are also put on one line: they reach the model in lines of their
    own (outside any untrusted marker), where a line break would let a name start one.
    """
    changes: dict[str, Any] = {
        name: clean_text(getattr(message, name)) for name in ("text", "quoted_text")
    }
    for name in ("sender_name", "chat_title", "quotes", "quoted_from"):
        changes[name] = one_line_name(clean_text(getattr(message, name)))
    changes["attachments"] = tuple(
        Attachment(clean_text(a.name), clean_text(a.mime_type), a.size, a.ref)
        for a in message.attachments
    )
    if all(getattr(message, name) == value for name, value in changes.items()):
        return message
    return dataclasses.replace(message, **changes)


def too_long(text: str, limit: int) -> str | None:
    """A short note for the sender when ``text`` is over ``limit`` bytes (0: no limit)."""
    size = len(text.encode("utf-8", "replace"))
    if not limit or size <= limit:
        return None
    return (
        f"That message is too long for me: {_kib(size)}, and I read at most {_kib(limit)} "
        "at once. Please send a shorter one, or split it up."
    )


def _kib(size: int) -> str:
    return f"{size / 1024:.1f} KiB" if size < 10 * 1024 else f"{size / 1024:,.0f} KiB"


QUOTE_LIMIT = 2000  # characters of an earlier message kept when a reply quotes it


def quote_excerpt(text: str, limit: int = QUOTE_LIMIT) -> str:
    """The quoted text of an earlier message, cut after ``limit`` characters (and then
    marked as cut, so the model knows it read only the start)."""
    text = text.strip()
    return text if len(text) <= limit else f"{text[:limit].rstrip()} … (cut)"


# What ends a line for ``str.splitlines`` (and so for a model reading lines).
_LINE_BREAK = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def one_line_name(text: str) -> str:
    """A name or title on one line: each line break becomes a space, one for one, and every
    other character is kept (offsets and spelling stay as the platform gave them)."""
    return _LINE_BREAK.sub(" ", text) if _LINE_BREAK.search(text) else text


def one_line(text: str, limit: int) -> str:
    """``text`` on one line with single spaces, cut to ``limit`` characters ("…" if cut): a
    name or type someone chose, put in a line the model reads outside any untrusted marker."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


BOT_AUTHOR = "PinClaw"
"""``quoted_from`` of a reply to one of the bot's own messages."""
