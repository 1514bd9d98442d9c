"""What Slack delivers, turned into ``InboundMessage``s.

Ids: a post is ``"{channel}:{ts}"``, the same in every redelivery and in both the
``message`` and ``app_mention`` events of one post, so the core's dedupe answers
it once. A slash command is ``"command:{user}:{trigger_id}"`` (unique per use; the
user is kept so a late reply can still be shown to that person alone).

Threads: a DM stays one conversation (a reply the person starts in a DM thread
stays in that thread). In a channel the bot always answers in a thread: a
message's thread is its ``thread_ts``, or its own ``ts`` when it starts one, and
each thread is its own session. A reply in a thread the bot has answered in
counts as addressed to the bot (``reply_to_bot``), so people need not @mention it
again; those threads are remembered in the state store across restarts.

Edits (``message_changed``) become edits of the post: see ``channels.slack.edits``.
Slack has no reply to one message: replies in a thread share the thread, so
nothing is quoted.

Every string of an event is cleaned before it is read (``clean_json``: a lone
surrogate or a control character becomes U+FFFD), and so are the names looked
up; an event that cannot be read at all is described by ``unreadable``, to be
stored as failed and answered.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.core.channel import StateStore
from bot.core.chat_commands import parse_command
from bot.core.messages import Attachment, InboundMessage, clean_json, clean_text
from channels.slack.edits import as_edit, edited_post
from channels.slack.format import plain_text

log = logging.getLogger(__name__)

CHANNEL = "slack"
KEPT_SUBTYPES = frozenset({None, "file_share", "thread_broadcast"})
COMMAND_PREFIX = "command:"
LOOKUP_TIMEOUT_S = 1.0  # names are a courtesy; the ack must reach Slack within 3 s

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is in the workspace, from ``auth.test``."""

    user_id: str
    bot_id: str
    name: str
    team: str


def message_key(channel: str, ts: str) -> str:
    """The message id of the post ``ts`` in ``channel``."""
    return f"{channel}:{ts}"


def post_of(message_id: str | None) -> tuple[str, str] | None:
    """``(channel, ts)`` of a post's message id; None for commands and foreign ids."""
    if not message_id or message_id.startswith(COMMAND_PREFIX):
        return None
    channel, _, ts = message_id.rpartition(":")
    return (channel, ts) if channel and ts else None


def command_user(message_id: str | None) -> str | None:
    """The user who ran the slash command with this message id, else None."""
    if not message_id or not message_id.startswith(COMMAND_PREFIX):
        return None
    user, _, _ = message_id.removeprefix(COMMAND_PREFIX).partition(":")
    return user or None


class Directory:
    """Display names (``users.info``) and channel names (``conversations.info``), cached.

    A failed lookup never holds a message up: it falls back to the id (or no title)
    and is tried again after a few minutes.
    """

    def __init__(
        self, client: Callable[[], AsyncWebClient], ttl_s: float = 3600.0, size: int = 2000
    ) -> None:
        self._client = client
        self._ttl_s = ttl_s
        self._size = size
        self._cache: collections.OrderedDict[str, tuple[float, str]] = collections.OrderedDict()
        self._warned: set[str] = set()

    async def user_name(self, user_id: str) -> str:
        """The name people see for ``user_id``."""
        return await self._lookup(f"user:{user_id}", user_id, self._fetch_user)

    async def channel_title(self, channel_id: str) -> str:
        """``#name`` of a channel, or "" when unknown."""
        return await self._lookup(f"channel:{channel_id}", "", self._fetch_channel)

    async def _lookup(self, key: str, fallback: str, fetch: Callable[[str], Awaitable[str]]) -> str:
        now = time.monotonic()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            self._cache.move_to_end(key)
            return cached[1]
        value, ttl = fallback, min(self._ttl_s, 300.0)
        try:
            async with asyncio.timeout(LOOKUP_TIMEOUT_S):
                value = clean_text(await fetch(key.partition(":")[2])) or fallback
            ttl = self._ttl_s
        except SlackApiError as exc:
            self._warn(str(exc.response.get("error", "")), key)
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
            log.debug("Slack lookup of %s failed: %s", key, exc)
        self._cache[key] = (now + ttl, value)
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return value

    async def _fetch_user(self, user_id: str) -> str:
        user = (await self._client().users_info(user=user_id)).get("user") or {}
        profile = user.get("profile") or {}
        return str(
            profile.get("display_name") or profile.get("real_name") or user.get("name") or ""
        )

    async def _fetch_channel(self, channel_id: str) -> str:
        info = (await self._client().conversations_info(channel=channel_id)).get("channel") or {}
        name = info.get("name")
        return f"#{name}" if name else ""

    def _warn(self, error: str, key: str) -> None:
        if error in {"missing_scope", "not_allowed_token_type"} and error not in self._warned:
            self._warned.add(error)
            log.warning(
                "Slack refused to look up %s (%s); add the users:read and channels:read "
                "scopes so replies can use names (see docs/slack-setup.md)",
                key,
                error,
            )
        else:
            log.debug("Slack lookup of %s failed: %s", key, error)


class ThreadMemory:
    """Channel threads the bot has answered in: in memory, and in the state store."""

    NAMESPACE = "slack.threads"

    def __init__(self, state: StateStore, size: int = 5000) -> None:
        self._state = state
        self._size = size
        self._known: collections.OrderedDict[str, None] = collections.OrderedDict()

    async def remember(self, channel: str, thread_ts: str) -> None:
        """Note that the bot posted in this thread."""
        key = message_key(channel, thread_ts)
        if key in self._known:
            self._known.move_to_end(key)
            return
        self._keep(key)
        await self._state.set(self.NAMESPACE, key, "1")

    async def bot_in(self, channel: str, thread_ts: str) -> bool:
        """True if the bot has posted in this thread."""
        key = message_key(channel, thread_ts)
        if key in self._known:
            return True
        if await self._state.get(self.NAMESPACE, key) is None:
            return False
        self._keep(key)
        return True

    def _keep(self, key: str) -> None:
        self._known[key] = None
        while len(self._known) > self._size:
            self._known.popitem(last=False)


class Normaliser:
    """Builds ``InboundMessage``s from Slack events and slash commands."""

    def __init__(
        self,
        me: BotIdentity,
        directory: Directory,
        threads: ThreadMemory,
        commands: Collection[str],
    ) -> None:
        self._me = me
        self._directory = directory
        self._threads = threads
        self._commands = commands

    async def from_event(self, event: JSON) -> InboundMessage | None:
        """The message in a ``message`` / ``app_mention`` event, or None if it is not for us."""
        event = clean_json(event)  # before anything reads it: see clean_text
        subtype = event.get("subtype")
        if subtype == "message_changed":  # an edit: the new post, read as any post is
            edit = edited_post(event)
            return None if edit is None else as_edit(await self.from_event(edit.post), edit)
        user = event.get("user")
        channel, ts = event.get("channel"), event.get("ts")
        if subtype not in KEPT_SUBTYPES:
            log.debug("ignored a Slack %s/%s event", event.get("type"), subtype)
            return None
        if not user or event.get("bot_id") or user == self._me.user_id:
            log.debug("ignored a Slack message from a bot (%s)", user or event.get("bot_id"))
            return None
        if not isinstance(channel, str) or not isinstance(ts, str):
            log.debug("ignored a Slack %s event without channel or ts", event.get("type"))
            return None
        text, mentioned = plain_text(str(event.get("text") or ""), self._me.user_id)
        attachments = _attachments(event.get("files"))
        if not text and not attachments:
            log.debug("ignored an empty Slack message %s", message_key(channel, ts))
            return None
        if not text:  # the core reads text; say what came instead of sending nothing
            text = "(shared " + ", ".join(a.name for a in attachments) + ")"
        kind = event.get("channel_type")
        direct = kind == "im" if kind else channel.startswith("D")
        thread_ts = event.get("thread_ts")
        in_thread = isinstance(thread_ts, str) and thread_ts != ts
        reply_to_bot = in_thread and (
            event.get("parent_user_id") == self._me.user_id
            or await self._threads.bot_in(channel, str(thread_ts))
        )
        return InboundMessage(
            channel=CHANNEL,
            chat_id=channel,
            sender_id=str(user),
            sender_name=await self._directory.user_name(str(user)),
            text=text,
            thread_id=(thread_ts if in_thread else None) if direct else (thread_ts or ts),
            message_id=message_key(channel, ts),
            reply_to_id=message_key(channel, str(thread_ts)) if in_thread else None,
            is_direct=direct,
            mentioned=mentioned,
            reply_to_bot=bool(reply_to_bot),
            attachments=attachments,
            chat_title="" if direct else await self._directory.channel_title(channel),
            sent_at=_timestamp(ts),
            quotes=_shared(event.get("attachments")),
        )

    async def from_command(self, body: JSON) -> InboundMessage:
        """``/pinclaw status`` as the chat command ``/status`` (anything unknown is ``/help``).

        The core's unlisted commands count too: ``/pinclaw approve ID once`` is how to
        decide by typing in Slack, which takes a typed ``/approve`` for a slash command.
        """
        body = clean_json(body)
        words = str(body.get("text") or "").strip()
        name, _, rest = words.partition(" ")
        name = name.lstrip("/").lower()
        known = name in self._commands or parse_command(f"/{name}") is not None
        text = f"/{name} {rest.strip()}".strip() if known else "/help"
        user, channel = str(body.get("user_id", "")), str(body.get("channel_id", ""))
        direct = channel.startswith("D") or body.get("channel_name") == "directmessage"
        return InboundMessage(
            channel=CHANNEL,
            chat_id=channel,
            sender_id=user,
            sender_name=await self._directory.user_name(user),
            text=text,
            message_id=f"{COMMAND_PREFIX}{user}:{body.get('trigger_id', time.time_ns())}",
            is_direct=direct,
            mentioned=True,  # a slash command is always addressed to the bot
            chat_title="" if direct else await self._directory.channel_title(channel),
        )


def unreadable(event: JSON) -> InboundMessage:
    """What is known of a message event ``from_event`` could not read: where, who, its id."""
    channel, ts, user = (str(event.get(key) or "") for key in ("channel", "ts", "user"))
    kind = event.get("channel_type")
    direct = kind == "im" if kind else channel.startswith("D")
    thread_ts = str(event.get("thread_ts") or "")
    in_thread = bool(thread_ts) and thread_ts != ts
    return InboundMessage(
        channel=CHANNEL,
        chat_id=channel,
        sender_id=user,
        text="",
        thread_id=(thread_ts if in_thread else None) if direct else (thread_ts or ts or None),
        message_id=message_key(channel, ts) if channel and ts else None,
        is_direct=direct,
    )


def _timestamp(ts: object) -> float | None:
    """A Slack ``ts`` ("1700000000.000100") as seconds since the epoch."""
    try:
        return float(str(ts))
    except ValueError:
        return None


def _attachments(files: Any) -> tuple[Attachment, ...]:
    """Files shared with a message that Slack hosts (external files are skipped)."""
    found: list[Attachment] = []
    for item in files if isinstance(files, list) else []:
        if not isinstance(item, dict) or item.get("mode") == "tombstone":
            continue
        url = item.get("url_private_download") or item.get("url_private")
        if not url or item.get("is_external") or not urlsplit(str(url)).hostname:
            continue
        found.append(
            Attachment(
                name=str(item.get("name") or item.get("title") or item.get("id") or "file"),
                mime_type=str(item.get("mimetype") or "application/octet-stream"),
                size=int(item.get("size") or 0),
                ref=str(url),
            )
        )
    return tuple(found)


def _shared(attachments: object) -> str:
    """A message shared into this one (Slack's "share message"): someone else's words."""
    if not isinstance(attachments, list):
        return ""
    for item in attachments:
        if isinstance(item, dict) and (item.get("is_share") or item.get("is_msg_unfurl")):
            author = item.get("author_name") or item.get("author_subname") or "someone"
            return f"a message shared from {author}"
    return ""
