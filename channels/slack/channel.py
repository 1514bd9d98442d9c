"""Slack as a chat channel: slack-bolt's ``AsyncApp`` over Socket Mode (default) or HTTP.

Receiving: every event is stored with ``inbox.put`` before Slack gets its ack
(bolt runs with ``process_before_response=True``, so the ack is the listener's
return). If ``put`` raises (PinClaw is stopping) the event is not acked and Slack
delivers it again later. Ids, threads and mentions: see ``events.py``.

Sending: replies are rendered as mrkdwn, cut into pieces of at most 3,000
characters (``format.py``), paced to one message per ``send_interval_s`` per
conversation and retried as ``send.classify`` sorts the errors. In channels
the bot answers in the message's thread. Buttons go on the last piece as Block
Kit. Replies to a slash command go to its ``response_url``, seen only by the
person who ran it; when that link is gone (expired, or PinClaw restarted) they
are posted as an ephemeral message to that person instead.

Approvals: the channel is an ``ApprovalSurface``; posting and closing requests
is ``approvals.py``. Button presses are acknowledged at once and handed to
``inbox.press`` in the background; the answer is shown to the presser alone
(``presses.py``).

Streaming: a reply is shown as it is written, in a message edited about once a
second (``draft.py``); ``stream = false`` sends it whole at the end.

Progress: Slack has no typing indicator for bots, so the message being answered
gets an :eyes: reaction (``progress_reaction``) until the reply is out. Without
the ``reactions:write`` scope this is logged once and skipped.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.core.channel import ChannelDeps, ChannelStatus, ChatTarget, Inbox, ReplySink
from bot.core.delivery import send_with_retries
from bot.core.draft import Draft
from bot.core.errors import PinclawError, log_bug
from bot.core.messages import (
    Attachment,
    Button,
    InboundMessage,
    OutboundFile,
    OutboundMessage,
    unreadable_reason,
)
from bot.core.pacing import Pacer, Unpaced
from channels.slack.approvals import APPROVAL_LIMIT, DirectChats, SlackApprovals
from channels.slack.client import ProgressReaction, SlackWeb
from channels.slack.connection import serve_http, serve_socket
from channels.slack.draft import SlackDraft
from channels.slack.events import (
    BotIdentity,
    Directory,
    Normaliser,
    ThreadMemory,
    command_user,
    post_of,
    unreadable,
)
from channels.slack.format import button_blocks, split_for_slack
from channels.slack.presses import Presses
from channels.slack.send import (
    ResponseHooks,
    SlackRefused,
    call,
    classify,
    post_ephemeral_response,
)
from channels.slack.settings import SlackSettings
from channels.slack.upload import send_file as upload

log = logging.getLogger(__name__)

GLOBAL_SENDS_PER_S = 20.0  # Slack's workspace-wide limit is unpublished; per-chat pacing binds

JSON = dict[str, Any]


class SlackChannel:
    """The Slack adapter; one bolt app per ``run``, one Web API session for the channel."""

    name = "slack"
    approval_limit = APPROVAL_LIMIT  # one message per request, 12,000 characters at most
    paste_limit = 0  # messages take 40,000 characters; clients never split a paste

    def __init__(self, settings: SlackSettings, deps: ChannelDeps) -> None:
        self.status = ChannelStatus(self.name)
        self.http_url: str | None = None  # HTTP mode: where Slack must send events
        # Slack keeps "/approve" for itself; decisions are typed through our command.
        self.approve_command = f"{settings.slash_command} approve"
        self._settings = settings
        self._deps = deps
        self._web = SlackWeb(settings.bot_token.get_secret_value(), settings.api_base_url, deps.ssl)
        self._pacer = (
            Pacer(per_chat_s=settings.send_interval_s, global_per_s=GLOBAL_SENDS_PER_S)
            if settings.pacing
            else Unpaced()
        )
        self._hooks = ResponseHooks()
        self._threads = ThreadMemory(deps.state)
        self._directory = Directory(self._web.client)
        self._progress = ProgressReaction(self._web, settings.progress_reaction)
        self._dms = DirectChats(deps.state, self._web.client)
        self._approvals = SlackApprovals(self._web, self._pacer, self._dms)
        self._stream = settings.streams(deps.stream)

    async def run(self, inbox: Inbox) -> None:
        """Check the tokens, then serve events until cancelled; raise when the link is lost."""
        async with self._web.running():
            me = await self._identify()
            presses = Presses(inbox, self._web, self._directory, self._pacer, self._deps.ssl)
            app = self._build_app(inbox, me, presses)
            detail = f"as @{me.name}"
            try:
                if self._settings.mode == "socket":
                    client = self._web.client()
                    await serve_socket(app, client, self._settings, self.status, detail)
                else:
                    await serve_http(app, self._settings, self.status, detail, self._listening)
            finally:
                await presses.close()

    async def send(self, message: OutboundMessage) -> None:
        """Post ``message`` in pieces, in order; ``DeliveryError`` if Slack will not take it."""
        pieces = split_for_slack(message.text) or ["(empty message)"]
        user = command_user(message.reply_to)
        for number, piece in enumerate(pieces, 1):
            last = number == len(pieces)
            what = f"part {number} of {len(pieces)} of a message to {message.chat_id}"
            if user is not None:
                attempt = self._ephemeral_attempt(message, user, piece)
            else:
                blocks = button_blocks(piece, message.buttons) if last and message.buttons else None
                attempt = self._post_attempt(message, piece, blocks)
            await send_with_retries(attempt, classify, what=what)
        if message.thread_id and not message.chat_id.startswith("D") and user is None:
            await self._threads.remember(message.chat_id, message.thread_id)

    async def post_approval(
        self, target: ChatTarget, text: str, buttons: tuple[Button, ...]
    ) -> str:
        """Post an approval request with its buttons; return the message's ``ts``."""
        return await self._approvals.post(target, text, buttons)

    async def close_approval(self, target: ChatTarget, message_ref: str, text: str) -> None:
        """Edit the request into ``text`` without buttons (post ``text`` if it is gone)."""
        await self._approvals.close(target, message_ref, text)

    def direct_target(self, user_id: str) -> ChatTarget | None:
        """The app's DM with ``user_id``."""
        return self._approvals.direct_target(user_id)

    async def send_file(self, file: OutboundFile) -> None:
        """Upload a file and share it in the conversation (Slack takes up to 1 GB)."""
        await upload(self._web, self._pacer, file)

    async def send_voice(self, file: OutboundFile) -> None:
        """A spoken reply, as an audio file in the conversation (``send_file``)."""
        await self.send_file(file)

    def text_sink(self, message: InboundMessage) -> ReplySink | None:
        """A draft of the reply, edited as the model writes it; None when ``stream`` is off
        and for slash commands (their answers are seen only by the person, not editable)."""
        if not self._stream or command_user(message.message_id) is not None:
            return None
        surface = SlackDraft(self._web, self._pacer, message, self._answered_in)
        return Draft(surface, self.send)

    async def _answered_in(self, message: OutboundMessage) -> None:
        """Remember the channel thread a reply went to (a reply there needs no @mention)."""
        if message.thread_id and not message.chat_id.startswith("D"):
            await self._threads.remember(message.chat_id, message.thread_id)

    @contextlib.asynccontextmanager
    async def typing(self, message: InboundMessage) -> AsyncIterator[None]:
        """Put the progress reaction on ``message`` while the block runs."""
        post = post_of(message.message_id)
        added = post is not None and await self._progress.add(*post)
        try:
            yield
        finally:
            if added and post is not None:
                await self._progress.remove(*post)

    async def fetch(self, attachment: Attachment) -> bytes:
        """Download a file shared in Slack (with the bot token, only from Slack's hosts)."""
        return await self._web.download(attachment)

    # Receiving.

    async def _identify(self) -> BotIdentity:
        try:
            auth = await call("auth.test (bot token)", self._web.client().auth_test())
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            where = urlsplit(self._settings.api_base_url).netloc
            reason = str(exc) or type(exc).__name__
            raise ConnectionError(f"cannot reach Slack at {where}: {reason}") from exc
        return BotIdentity(
            user_id=str(auth.get("user_id", "")),
            bot_id=str(auth.get("bot_id", "")),
            name=str(auth.get("user", "pinclaw")),
            team=str(auth.get("team", "")),
        )

    def _build_app(self, inbox: Inbox, me: BotIdentity, presses: Presses) -> AsyncApp:
        secret = self._settings.signing_secret
        app = AsyncApp(
            client=self._web.client(),
            signing_secret=secret.get_secret_value() if secret else "",
            process_before_response=True,
            name="pinclaw",
            logger=logging.getLogger("channels.slack.bolt"),
        )
        names = {command.name for command in self._deps.commands}
        normaliser = Normaliser(me, self._directory, self._threads, names)

        async def on_message(body: JSON) -> None:
            event = body.get("event") or {}
            try:
                message = await normaliser.from_event(event)
            except Exception as exc:  # stored as failed and answered, never skipped
                await self._unreadable(inbox, event, exc)
                return
            if message is not None and message.is_direct and message.chat_id.startswith("D"):
                self._dms.saw(message.sender_id, message.chat_id)
            if message is not None and not await inbox.put(message):
                log.debug("Slack delivered %s again; it was answered once", message.message_id)

        async def on_command(ack: AsyncAck, body: JSON) -> None:
            message = await normaliser.from_command(body)
            if body.get("response_url") and message.message_id:
                self._hooks.add(message.message_id, str(body["response_url"]))
            try:
                await inbox.put(message)
            except PinclawError:
                await ack(text="PinClaw is restarting; please try again in a minute.")
                return
            await ack()

        async def on_action(ack: AsyncAck, body: JSON) -> None:
            await ack()  # sent when this returns: the press is handled after it
            presses.take(body)

        app.event("message")(on_message)
        app.event("app_mention")(on_message)
        app.command(self._settings.slash_command)(on_command)
        app.action(re.compile(".*"))(on_action)
        app.event(re.compile(".*"))(self._on_other_event)
        app.error(self._on_error)
        return app

    async def _unreadable(self, inbox: Inbox, event: JSON, exc: Exception) -> None:
        message, reason = unreadable(event), unreadable_reason(exc)
        log.warning(
            "slack: could not read message %s (%s); stored as failed", message.message_id, reason
        )
        log.debug("slack: reading message %s failed", message.message_id, exc_info=exc)
        await inbox.unreadable(message, reason)

    async def _on_other_event(self, body: JSON) -> None:
        """Events PinClaw does not use are acknowledged, so Slack does not resend them."""
        log.debug("ignored a Slack %s event", (body.get("event") or {}).get("type"))

    async def _on_error(self, error: Exception, body: JSON) -> None:
        """A listener failed: the event stays unacknowledged and Slack delivers it again."""
        if isinstance(error, PinclawError):
            log.info("left a Slack event unacknowledged so Slack resends it: %s", error)
        else:
            log_bug(log, "handling a Slack event failed; Slack will send it again", error)

    def _listening(self, url: str) -> None:
        self.http_url = url

    # Sending.

    def _post_attempt(
        self, message: OutboundMessage, text: str, blocks: list[JSON] | None
    ) -> Callable[[], Awaitable[None]]:
        async def attempt() -> None:
            async with self._pacer.slot(message.chat_id):
                await call(
                    "chat.postMessage",
                    self._web.client().chat_postMessage(
                        channel=message.chat_id,
                        text=text,
                        thread_ts=message.thread_id,
                        blocks=blocks,
                    ),
                )

        return attempt

    def _ephemeral_attempt(
        self, message: OutboundMessage, user: str, text: str
    ) -> Callable[[], Awaitable[None]]:
        async def attempt() -> None:
            hook = self._hooks.get(message.reply_to)
            async with self._pacer.slot(message.chat_id):
                if hook is not None:
                    try:
                        async with self._web.session() as session:
                            await post_ephemeral_response(hook, text, session, self._deps.ssl)
                        return
                    except SlackRefused as exc:
                        if classify(exc) is not None:
                            raise
                        log.info("falling back to an ephemeral message: %s", exc)
                await call(
                    "chat.postEphemeral",
                    self._web.client().chat_postEphemeral(
                        channel=message.chat_id, user=user, text=text
                    ),
                )

        return attempt
