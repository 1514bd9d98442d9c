"""``FakeDiscord``: a fake Discord (REST + gateway) on 127.0.0.1 for the real discord.py client.

The server runs on its own thread and loop (``ThreadedServer``), so sync tests, async
tests and a ``pinclaw run`` subprocess all reach it alike. Every method here may be
called from any thread except the server's own; injecting methods block only until
the event is on the wire, which never needs the caller's loop, so they are safe in
async tests too. Waiting is different: in an async test use ``await_call`` /
``await_connected``, which wait in a worker thread instead of blocking the loop the
client runs on.

Point discord.py at it with ``redirect_discord(fake)`` (see ``redirect.py``), or, for a
subprocess, configure ``fake.api_base`` and ``fake.gateway_url``.
"""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

from aiohttp import web

from tests.fake_discord import interactions, messages, payloads
from tests.fake_discord.gateway import Gateway
from tests.fake_discord.inspection import Inspection
from tests.fake_discord.payloads import JSON
from tests.fake_discord.rest import Rest
from tests.fake_discord.state import Fault, World
from tests.fake_discord.wire import Ctx, reply
from tests.threaded_server import ThreadedServer

T = TypeVar("T")
DEFAULT_TOKEN = "MTAxMDEwMTAxMDEwMTAxMDEw.fake.discord-bot-token"


class FakeDiscord(Inspection, ThreadedServer):
    """A fake Discord. Start with ``with FakeDiscord.running() as fake:``.

    It starts with one guild (``fake.guild``) holding one text channel
    (``fake.channel``) and two members: the bot and ``fake.owner``.
    """

    name = "fake-discord"

    def __init__(
        self,
        *,
        token: str = DEFAULT_TOKEN,
        bot_name: str = "PinClaw",
        heartbeat_interval: float = 41.25,
        privileged_intents_enabled: bool = True,
        interaction_deadline: float = 3.0,
    ) -> None:
        super().__init__()
        self.token = token
        self.world = World(token, bot_name)
        self.world.interaction_deadline = interaction_deadline
        self.gateway = Gateway(self.world, lambda: self.ws_url, int(heartbeat_interval * 1000))
        self.gateway.privileged_intents_enabled = privileged_intents_enabled
        self.rest = Rest(Ctx(self.world, self.gateway))
        self.refused = 0
        self._unreachable = False
        self.owner: JSON = self.world.owner
        self.guild: JSON = self.add_guild("PinClaw Test Guild")
        self.channel: JSON = self.guild["channels"][0]

    # -- addresses ----------------------------------------------------------

    @property
    def ws_url(self) -> str:
        """The websocket root, e.g. ``ws://127.0.0.1:43121``."""
        return f"ws://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        """The REST root for ``discord.http.Route.BASE``."""
        return f"{self.url}/api/v{payloads.API_VERSION}"

    @property
    def gateway_url(self) -> str:
        """The URL for ``DiscordWebSocket.DEFAULT_GATEWAY`` (resumes use ``/gateway/resume``)."""
        return f"{self.ws_url}/gateway"

    @property
    def bot(self) -> JSON:
        """The bot's user object."""
        return self.world.bot

    @property
    def application_id(self) -> str:
        """The application id (equal to the bot's user id)."""
        return self.world.app_id

    # -- serving ------------------------------------------------------------

    def make_app(self) -> web.Application:
        """Gateway websockets, the REST API, and a 404 naming anything else."""
        app = web.Application(middlewares=[self._network], client_max_size=32 * 1024 * 1024)
        app.router.add_get("/gateway", self.gateway.handle)
        app.router.add_get("/gateway/resume", self.gateway.handle)
        app.router.add_route("*", r"/api/v{version:\d+}/{tail:.*}", self.rest.handle)
        app.router.add_route("*", "/{tail:.*}", self._unknown)
        return app

    @web.middleware
    async def _network(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if self._unreachable:
            # Close before answering: the client sees the connection die, not an HTTP error.
            self.refused += 1
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=503)
        return await handler(request)

    async def _unknown(self, request: web.Request) -> web.Response:
        message = f"404: Not Found (fake Discord has no route {request.method} {request.path})"
        return reply({"message": message, "code": 0}, status=404)

    async def on_stop(self) -> None:
        """Cut gateway sockets so shutdown does not wait for them."""
        await self.gateway.close_all()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None and running is self.loop:
            coro.close()
            raise RuntimeError("FakeDiscord methods cannot be called from the server's own loop")
        return self.call(coro)

    # -- world --------------------------------------------------------------

    def add_user(self, name: str, *, user_id: str | None = None, bot: bool = False) -> JSON:
        """Create a user (not yet in any guild; ``user_sends`` adds them on first post)."""
        created = payloads.user(name, user_id=user_id, bot=bot)
        with self.world.lock:
            self.world.users[created["id"]] = created
        return created

    def add_guild(
        self,
        name: str,
        *,
        channels: Iterable[str] = ("general",),
        members: Iterable[JSON] = (),
        guild_id: str | None = None,
    ) -> JSON:
        """Create a guild with text ``channels`` and the bot, owner and ``members`` in it.

        If a client is connected it receives GUILD_CREATE, as when a bot joins a guild.
        """
        world = self.world
        created = payloads.guild(name, guild_id=guild_id, owner_id=world.owner["id"])
        with world.lock:
            for position, channel_name in enumerate(channels):
                channel = payloads.text_channel(created["id"], channel_name, position=position)
                created["channels"].append(channel)
                world.channels[channel["id"]] = channel
            world.guilds[created["id"]] = created
            for who in (world.bot, world.owner, *members):
                world.ensure_member(created["id"], who)
        if self.loop is not None and self.gateway.live_sessions():
            with world.lock:
                snapshot = copy.deepcopy(created)
            self._run(self.gateway.publish("GUILD_CREATE", snapshot))
        return created

    def add_thread(self, name: str, parent: JSON | None = None) -> JSON:
        """A public thread under ``parent`` (default: the main channel), known to the fake.

        The client learns of it only from a THREAD_CREATE dispatch or a message in it.
        """
        parent = parent or self.channel
        thread = payloads.public_thread(
            parent["guild_id"], parent["id"], self.world.owner["id"], name
        )
        with self.world.lock:
            self.world.channels[thread["id"]] = thread
        return thread

    def dm_channel(self, user: JSON) -> JSON:
        """The DM channel between the bot and ``user`` (created on first use)."""
        return self.world.dm_channel_for(user)

    # -- injection ----------------------------------------------------------

    def user_sends(
        self,
        channel_id: str,
        author: JSON,
        content: str,
        *,
        guild_id: str | None = None,
        mentions_bot: bool = False,
        reply_to: JSON | None = None,
        message_id: str | None = None,
        embeds: list[JSON] | None = None,
    ) -> JSON:
        """Deliver MESSAGE_CREATE from ``author``; returns the message.

        ``mentions_bot`` prefixes ``<@bot>`` and lists the bot in ``mentions``;
        ``reply_to`` makes it a reply (which, like Discord's default, pings that author).
        """
        msg = messages.from_user(
            self.world,
            channel_id,
            author,
            content,
            guild_id=guild_id,
            mentions_bot=mentions_bot,
            reply_to=reply_to,
            message_id=message_id,
            embeds=embeds,
        )
        self.world.store_message(msg)
        self._run(self.gateway.dispatch("MESSAGE_CREATE", messages.with_member(self.world, msg)))
        return msg

    def user_edits(self, message: JSON, content: str) -> JSON:
        """Deliver MESSAGE_UPDATE: ``message``'s author changed its text to ``content``."""
        msg = self.world.store_message(messages.edited_by_author(self.world, message, content))
        self._run(self.gateway.dispatch("MESSAGE_UPDATE", messages.with_member(self.world, msg)))
        return msg

    def user_runs_command(
        self,
        name: str,
        options: dict[str, Any] | None = None,
        *,
        channel_id: str,
        user: JSON,
        guild_id: str | None = None,
    ) -> JSON:
        """Deliver INTERACTION_CREATE for slash command ``/name`` (it must be synced)."""
        record = interactions.command(self.world, name, options or {}, channel_id, user, guild_id)
        self._run(self.gateway.dispatch("INTERACTION_CREATE", record.payload))
        return record.payload

    def user_presses(
        self,
        custom_id: str,
        message: JSON,
        user: JSON,
        *,
        component_type: int = 2,
        values: list[str] | None = None,
    ) -> JSON:
        """Deliver INTERACTION_CREATE for a press on ``message``'s component ``custom_id``."""
        record = interactions.component(
            self.world, custom_id, message, user, component_type, values
        )
        self._run(self.gateway.dispatch("INTERACTION_CREATE", record.payload))
        return record.payload

    def dispatch(self, event: str, data: JSON) -> None:
        """Deliver any dispatch event as it is."""
        self._run(self.gateway.dispatch(event, data))

    def resend(self, message: JSON) -> None:
        """Deliver ``message``'s MESSAGE_CREATE again under a new sequence number."""
        current = self.world.messages.get(message["id"], message)
        self._run(
            self.gateway.dispatch("MESSAGE_CREATE", messages.with_member(self.world, current))
        )

    def replay_last(self, count: int = 1) -> None:
        """Deliver the last ``count`` dispatched events again (duplicate delivery)."""
        self._run(self.gateway.replay_last(count))

    def reconnect(self) -> None:
        """Send op 7 RECONNECT: the client closes and RESUMEs on ``resume_gateway_url``."""
        self._run(self.gateway.send_op(7, None))

    def drop(self, *, hold: bool = False) -> None:
        """Cut every gateway connection without a close frame.

        With ``hold`` new gateway connections are parked (no HELLO) until ``release()``,
        so events injected meanwhile are only in the session log and must be replayed.
        """
        self._run(self.gateway.drop(hold=hold))

    def release(self) -> None:
        """Let gateway connections parked by ``drop(hold=True)`` go on."""
        assert self.loop is not None
        self.loop.call_soon_threadsafe(self.gateway.release)

    def invalid_session(self, *, resumable: bool = False) -> None:
        """Send op 9 INVALID_SESSION; when not resumable the client must IDENTIFY again."""
        self._run(self.gateway.invalidate(resumable=resumable))

    def fail(
        self,
        method: str,
        path_regex: str,
        status: int,
        *,
        retry_after: float | None = None,
        global_: bool = False,
        times: int | None = 1,
        body: JSON | None = None,
        page: str | None = None,
    ) -> Fault:
        """Answer the next ``times`` matching REST requests with ``status`` (None: always).

        ``path_regex`` is searched in the path under ``/api/v10``; ``method`` may be "*".
        A 429 carries Discord's body and rate-limit headers. With ``page``, that HTML page
        is the body instead of Discord's JSON, as a proxy in front of Discord answers.
        """
        pattern = re.compile(path_regex)
        fault = Fault(method, pattern, status, retry_after, global_, times, body, page)
        with self.world.lock:
            self.world.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        """Forget faults not yet used."""
        with self.world.lock:
            self.world.faults.clear()

    def unreachable(self, on: bool = True) -> None:
        """Network down (or back): every request dies at the connection level, sockets drop."""
        self._unreachable = on
        if on and self.loop is not None:
            self._run(self.gateway.drop())
