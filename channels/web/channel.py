"""The web chat as a chat channel: the panel's Chat page feeds the inbox and shows the replies.

There is no platform to connect to: ``run`` holds the inbox until it is cancelled,
and the panel's page hands over what the owner does (``accept`` a message,
``press`` a button). Everything the chat shows is an entry of the ``Feed``:
replies (``send``), drafts while the model writes (``text_sink``, the shared
``bot.core.draft`` machinery with ``WebDraft``), approval requests with their
buttons (``post_approval``) and the records they become (``close_approval``),
and the answer to a press. Open pages follow the feed's events
(``channels.web.event_stream``); a page that opens later reads the feed and,
before it, the history (``channels.web.transcript``).

The owner is the only person here: the panel's login proved who it is, so no
pairing is offered and ``web:owner`` is the owner's account (``bot.store.people``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from bot.core.channel import (
    ChannelDeps,
    ChannelStatus,
    ChatTarget,
    DeliveryError,
    Inbox,
    PressReply,
    ReplySink,
    ShuttingDown,
)
from bot.core.draft import Draft
from bot.core.errors import UserError, bug_message, log_bug
from bot.core.messages import Attachment, Button, InboundMessage, OutboundMessage
from channels.web.draft import GRACE_S, INTERVAL_S, WebDraft
from channels.web.events import button_press, inbound
from channels.web.feed import Feed
from channels.web.settings import WebChatSettings

log = logging.getLogger(__name__)

EXTRA_KEPT = 50  # entries kept beyond two pages' worth, so the page's start is never cut
NOT_RUNNING = "The web chat is not running right now; please try again in a minute."
RESTARTING = "PinClaw is restarting; please press the button again in a minute."


class NotRunning(UserError):
    """The web chat cannot take a message now (PinClaw is starting or stopping)."""


class WebChannel:
    """The web chat: one conversation, the owner's, shown in the panel."""

    name = "web"
    paste_limit = 0  # the web chat sends a paste whole

    def __init__(self, settings: WebChatSettings, deps: ChannelDeps) -> None:
        self.status = ChannelStatus(self.name)
        self.settings = settings
        self.feed = Feed(keep_entries=2 * settings.history_limit + EXTRA_KEPT)
        self._stream = settings.streams(deps.stream)
        self._inbox: Inbox | None = None
        self._writing = 0  # replies being written now

    @property
    def writing(self) -> bool:
        """Whether a reply is being written now."""
        return self._writing > 0

    async def run(self, inbox: Inbox) -> None:
        """Take messages from the panel until cancelled."""
        self._inbox = inbox
        self.feed.reopen()
        self.status.connected("in the web panel")
        try:
            await asyncio.Event().wait()
        finally:
            self._inbox = None
            self.feed.close()

    async def accept(self, text: str, nonce: str, name: str) -> bool:
        """Put the owner's message into the inbox and on the page; False if it was sent
        before (the same form twice). ``NotRunning`` when it cannot be taken now."""
        inbox = self._inbox
        if inbox is None:
            raise NotRunning(NOT_RUNNING)
        message = inbound(text, nonce, name)
        if not message.text:
            return True
        self.status.heard()
        entry = self.feed.add("user", message.text)  # first, so the reply comes after it
        try:
            fresh = await inbox.put(message)
        except ShuttingDown:
            self.feed.remove(entry.ref)
            raise NotRunning(NOT_RUNNING) from None
        except BaseException:
            self.feed.remove(entry.ref)
            raise
        if not fresh:
            self.feed.remove(entry.ref)
            log.info("web chat: message %s was sent twice; answered once", message.message_id)
        return fresh

    async def press(self, action_id: str, entry_ref: str, name: str) -> PressReply:
        """A button pressed on the page, decided as a tap in any chat (``Inbox.press``); the
        answer is also shown on the page."""
        inbox = self._inbox
        if inbox is None:
            reply = PressReply(RESTARTING)
        else:
            try:
                reply = await inbox.press(button_press(action_id, entry_ref, name))
            except ShuttingDown:
                reply = PressReply(RESTARTING)
            except UserError as exc:
                reply = PressReply(str(exc))
            except Exception as exc:
                error_id = log_bug(log, f"web chat: the button press {action_id!r} failed", exc)
                reply = PressReply(bug_message(error_id))
        if reply.text.strip():
            self.feed.add("notice", reply.text)
        return reply

    async def send(self, message: OutboundMessage) -> None:
        """Show ``message`` on the page (there is nothing to split or pace)."""
        self.feed.add("bot", message.text, message.buttons)

    async def post_approval(
        self, target: ChatTarget, text: str, buttons: tuple[Button, ...]
    ) -> str:
        """Show an approval request with its buttons; its entry id."""
        return self.feed.add("approval", text, buttons).ref

    async def close_approval(self, target: ChatTarget, message_ref: str, text: str) -> None:
        """Turn the request into its record, without buttons (a new entry if it is gone)."""
        if self.feed.change(message_ref, text=text, buttons=()) is None:
            self.feed.add("approval", text)

    def direct_target(self, user_id: str) -> ChatTarget | None:
        """None: the web chat is read only while the panel is open, so output and requests
        meant for the owner's private chat go to a chat app (or the owner's inbox)."""
        return None

    def text_sink(self, message: InboundMessage) -> ReplySink | None:
        """A draft of the reply, changed as the model writes (None when ``stream`` is off)."""
        if not self._stream:
            return None
        return Draft(WebDraft(self.feed), self.send, interval_s=INTERVAL_S, grace_s=GRACE_S)

    @contextlib.asynccontextmanager
    async def typing(self, message: InboundMessage) -> AsyncIterator[None]:
        """Show "writing…" on the page until the block exits."""
        self._writing += 1
        if self._writing == 1:
            self.feed.typing(True)
        try:
            yield
        finally:
            self._writing -= 1
            if self._writing == 0:
                self.feed.typing(False)

    async def fetch(self, attachment: Attachment) -> bytes:
        """The web chat takes no attachments."""
        raise DeliveryError("the web chat takes no attachments")
