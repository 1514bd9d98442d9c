"""The Discord channel: a bot account over the gateway (discord.py), answered over REST.

Each ``run`` builds a fresh ``discord.Client``, logs in and connects; it returns
or raises when the client stops, and the supervisor starts it again with
backoff. A failed login or first connection (the machine booted before the
network, an outage) always surfaces as an exception here, never as a client
that quietly gave up, and a gateway that has been down for ``GIVE_UP_S`` is
abandoned too, because discord.py's own reconnect backoff grows to 17 minutes.

Inbound messages go into the inbox before anything else is done with them; the
gateway has no acknowledgement, so RESUME replays and duplicate dispatches reach
the inbox again and the core drops them by message id (the snowflake).

The client itself (intents, caches, endpoints) is in ``client.py``; messages
are normalised in ``events.py``, slash commands live in ``commands.py``,
outbound pieces and error classes in ``send.py``, approval requests in
``approvals.py`` and button presses in ``presses.py``; a reply is shown as it is
written in a message edited about once a second (``draft.py``). One Discord
channel per process is supported.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator

import aiohttp
import discord

from bot.core.channel import (
    ChannelDeps,
    ChannelStatus,
    ChatTarget,
    DeliveryError,
    Inbox,
    ReplySink,
    ShuttingDown,
)
from bot.core.delivery import send_with_retries
from bot.core.draft import Draft
from bot.core.errors import log_bug
from bot.core.messages import (
    Attachment,
    Button,
    InboundMessage,
    OutboundFile,
    OutboundMessage,
    unreadable_reason,
)
from bot.core.pacing import Pacer, Unpaced
from bot.core.typing_indicator import keep_typing
from channels.discord.approvals import APPROVAL_LIMIT, ApprovalMessages
from channels.discord.client import PinClawClient, point_discord_at
from channels.discord.commands import SlashCommands, reply
from channels.discord.draft import DiscordDraft
from channels.discord.events import (
    edit_from_message,
    from_message,
    interaction_id_of,
    unreadable,
)
from channels.discord.presses import Presses
from channels.discord.send import (
    ButtonRow,
    NotConnected,
    channel_id,
    classify,
    download,
    pieces,
    post,
)
from channels.discord.settings import DiscordSettings
from channels.discord.upload import send_file as upload

log = logging.getLogger(__name__)

LOGIN_TIMEOUT_S = 60.0
GIVE_UP_S = 120.0  # a gateway down this long is restarted from scratch
TYPING_EVERY_S = 8.0  # Discord shows "typing…" for 10 s
PRESS_GRACE_S = 1.0  # for answers to button presses in flight when the client closes


class DiscordDown(Exception):
    """The connection to Discord failed; the text says why (the supervisor logs it)."""


class DiscordChannel:
    """PinClaw on Discord: DMs, guild channels and threads, slash commands, buttons,
    approval requests."""

    name = "discord"
    approval_limit = APPROVAL_LIMIT  # one message per request, never cut
    paste_limit = 2000  # the longest message a client sends; a longer paste comes in parts

    def __init__(self, settings: DiscordSettings, deps: ChannelDeps) -> None:
        self._settings = settings
        self._deps = deps
        self.status = ChannelStatus(self.name)
        self._pacer = Pacer(per_chat_s=0.3, global_per_s=25.0) if settings.pacing else Unpaced()
        self._put_lock = asyncio.Lock()
        self._inbox: Inbox | None = None
        self._client: PinClawClient | None = None
        self._connector: aiohttp.BaseConnector | None = None
        self._commands: SlashCommands | None = None
        self._give_up: asyncio.Future[None] | None = None
        self._give_up_timer: asyncio.TimerHandle | None = None
        self._approvals = ApprovalMessages(self._require_client, self._pacer)
        self._presses = Presses()
        self._stream = settings.streams(deps.stream)

    # -- running ------------------------------------------------------------

    async def run(self, inbox: Inbox) -> None:
        """Log in and serve the gateway until the client stops; close it on the way out."""
        self._inbox = inbox
        point_discord_at(self._settings)
        connector = aiohttp.TCPConnector(ssl=self._deps.ssl, limit=0)
        client = PinClawClient(self, connector)
        commands = SlashCommands(client, self._deps.commands, self._deps.state, self._put)
        sync: asyncio.Task[bool] | None = None
        try:
            await self._login(client)
            self._client, self._connector, self._commands = client, connector, commands
            if not await commands.registered():
                sync = asyncio.create_task(commands.register(classify), name="discord commands")
            await self._serve(client)
        finally:
            self._client = self._connector = self._commands = None
            self._cancel_give_up()
            await self._presses.drain(PRESS_GRACE_S)
            commands.close()
            if sync is not None:
                sync.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sync
            await client.close()

    async def _login(self, client: PinClawClient) -> None:
        try:
            async with asyncio.timeout(LOGIN_TIMEOUT_S):
                await client.login(self._settings.token.get_secret_value())
        except discord.LoginFailure as exc:
            raise DiscordDown("Discord refused the bot token ([channels.discord] token)") from exc
        except (aiohttp.ClientError, OSError, TimeoutError, discord.HTTPException) as exc:
            raise DiscordDown(f"could not log in to Discord: {_reason(exc)}") from exc

    async def _serve(self, client: PinClawClient) -> None:
        self._give_up = asyncio.get_running_loop().create_future()
        self._arm_give_up()  # the first connection gets the same allowance
        gateway = asyncio.create_task(client.connect(reconnect=True), name="discord gateway")
        try:
            await asyncio.wait({gateway, self._give_up}, return_when=asyncio.FIRST_COMPLETED)
            if not gateway.done():
                raise DiscordDown(f"no gateway connection for {GIVE_UP_S:.0f} s")
            gateway.result()
        except discord.PrivilegedIntentsRequired as exc:
            raise DiscordDown(
                "Discord refused the Message Content intent: enable it for the bot in the "
                "Developer Portal (Bot, Privileged Gateway Intents)"
            ) from exc
        except AttributeError as exc:
            if client.ws is not None:
                raise
            # discord.py's connect() trips over its missing websocket when the very first
            # gateway connection fails, instead of retrying it.
            raise DiscordDown("the first gateway connection failed") from exc
        finally:
            gateway.cancel()
            await asyncio.wait({gateway})  # never raises: what it raised was handled above
            if not gateway.cancelled():
                gateway.exception()  # retrieved, so asyncio does not log it again

    def up(self, client: PinClawClient) -> None:
        """Record a live gateway session."""
        if client is self._client:
            self._cancel_give_up()
            self.status.connected(f"as {client.user}")

    def down(self, client: PinClawClient) -> None:
        """Record a dropped gateway connection and start the give-up clock."""
        if client is self._client and not client.is_closed():
            self.status.disconnected("the gateway connection dropped; reconnecting")
            self._arm_give_up()

    def _arm_give_up(self) -> None:
        if self._give_up_timer is None and self._give_up is not None:
            future = self._give_up

            def give_up() -> None:
                if not future.done():
                    future.set_result(None)

            self._give_up_timer = asyncio.get_running_loop().call_later(GIVE_UP_S, give_up)

    def _cancel_give_up(self) -> None:
        if self._give_up_timer is not None:
            self._give_up_timer.cancel()
            self._give_up_timer = None

    # -- inbound ------------------------------------------------------------

    async def heard(
        self, client: PinClawClient, message: discord.Message, *, edit: bool = False
    ) -> None:
        """Normalise a gateway message (or an edit of one) and put it in the inbox (first
        thing, in order)."""
        if client.user is None:
            return
        try:
            read = edit_from_message if edit else from_message
            inbound = read(message, client.user)
        except Exception as exc:  # stored as failed and answered, never skipped
            reason = unreadable_reason(exc)
            log.warning(
                "discord: could not read message %s (%s); stored as failed", message.id, reason
            )
            log.debug("discord: reading message %s failed", message.id, exc_info=exc)
            await self._put_unreadable(unreadable(message), reason)
            return
        if inbound is None:
            return
        try:
            await self._put(inbound)
        except ShuttingDown:
            log.info("discord message %s not taken: PinClaw is stopping", message.id)
        except Exception as exc:
            log_bug(log, f"could not take discord message {message.id}", exc)

    async def _put(self, message: InboundMessage) -> bool:
        # discord.py runs each event handler as its own task; the lock keeps arrival order.
        assert self._inbox is not None
        async with self._put_lock:
            return await self._inbox.put(message)

    async def _put_unreadable(self, message: InboundMessage, reason: str) -> None:
        assert self._inbox is not None
        try:
            async with self._put_lock:
                await self._inbox.unreadable(message, reason)
        except ShuttingDown:
            log.info("discord message %s not taken: PinClaw is stopping", message.message_id)
        except Exception as exc:
            log_bug(log, f"could not store discord message {message.message_id}", exc)

    async def pressed(self, interaction: discord.Interaction[discord.Client]) -> None:
        """A button press: acknowledged at once; an approval tap goes to the core."""
        await self._presses.handle(interaction, self._inbox)

    # -- outbound -----------------------------------------------------------

    async def send(self, message: OutboundMessage) -> None:
        """Deliver a reply: split at 2000, the first piece as a reply, buttons on the last."""
        parts = pieces(message.text)
        try:
            view = ButtonRow(message.buttons) if message.buttons else None
        except ValueError as exc:
            raise DeliveryError(f"could not send a reply: a button is invalid ({exc})") from exc
        commands = self._commands
        pending = commands.take(message.reply_to) if commands is not None else None
        if pending is not None:
            await reply(pending, parts, view, classify)
            return
        target = channel_id(message.thread_id or message.chat_id)
        reference = None
        if message.reply_to and message.reply_to.isdigit():
            reference = discord.MessageReference(
                message_id=int(message.reply_to), channel_id=target, fail_if_not_exists=False
            )
        for index, piece in enumerate(parts):
            # One nonce per piece, kept across retries: Discord returns the message it
            # already created instead of posting a copy when only the answer was lost.
            nonce = secrets.randbits(62)
            first, last = index == 0, index == len(parts) - 1

            async def attempt(
                piece: str = piece, nonce: int = nonce, first: bool = first, last: bool = last
            ) -> None:
                await post(
                    self._require_client(),
                    target,
                    piece,
                    reference=reference if first else None,
                    view=view if last else None,
                    nonce=nonce,
                )

            what = "a reply" if len(parts) == 1 else f"part {index + 1} of {len(parts)} of a reply"
            async with self._pacer.slot(str(target)):
                await send_with_retries(attempt, classify, what=what)

    async def post_approval(
        self, target: ChatTarget, text: str, buttons: tuple[Button, ...]
    ) -> str:
        """Post an approval request with its buttons in one row; return the message id."""
        return await self._approvals.post(target, text, buttons)

    async def close_approval(self, target: ChatTarget, message_ref: str, text: str) -> None:
        """Edit the request into ``text`` and remove its buttons (or post ``text`` anew)."""
        await self._approvals.close(target, message_ref, text)

    def direct_target(self, user_id: str) -> ChatTarget | None:
        """The DM with ``user_id``, opened when a request is first posted there."""
        return self._approvals.direct_target(user_id)

    async def send_file(self, file: OutboundFile) -> None:
        """Post a message carrying the file (Discord takes up to 10 MiB from bots)."""
        await upload(self._require_client, self._pacer, file)

    async def send_voice(self, file: OutboundFile) -> None:
        """A spoken reply, as an audio file in the chat (``send_file``)."""
        await self.send_file(file)

    def text_sink(self, message: InboundMessage) -> ReplySink | None:
        """A draft of the reply, edited as the model writes it; None when ``stream`` is off
        and for slash commands (their answers go through the interaction)."""
        if not self._stream or interaction_id_of(message.message_id) is not None:
            return None
        return Draft(DiscordDraft(self._require_client, self._pacer, message), self.send)

    @contextlib.asynccontextmanager
    async def typing(self, message: InboundMessage) -> AsyncIterator[None]:
        """Discord's "typing…" in the chat until the block exits (a command shows "thinking")."""
        if interaction_id_of(message.message_id) is not None:
            yield
            return
        target = channel_id(message.thread_id or message.chat_id)

        async def once() -> None:
            await self._require_client().get_partial_messageable(target).typing()

        async with keep_typing(once, TYPING_EVERY_S):
            yield

    async def fetch(self, attachment: Attachment) -> bytes:
        """Download an attachment through the client's connection pool, at most 25 MiB."""
        connector = self._connector
        if connector is None:
            raise DeliveryError(f"could not download {attachment.name}: Discord is not connected")
        return await download(connector, attachment)

    def _require_client(self) -> PinClawClient:
        client = self._client
        if client is None or client.is_closed():
            raise NotConnected("Discord is not connected")
        return client


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
