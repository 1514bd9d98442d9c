"""A fake Slack on 127.0.0.1: Web API, Socket Mode websocket, response_url and file routes.

Point slack_sdk / slack-bolt at it with ``AsyncWebClient(token=fake.bot_token,
base_url=fake.api_url)``; ``AsyncSocketModeHandler`` then gets its websocket URL from
``apps.connections.open`` through that same client. For HTTP mode, start the app's
server and call ``fake.use_http(url)``: envelopes then arrive as signed POSTs.

Simulated people act with ``user_sends`` / ``user_presses`` / ``user_runs_command``
(from any thread; they only queue frames or POSTs on the fake's loop, so they are also
safe in async tests). Waiting: ``wait_*`` block the calling thread, ``await_*`` run
the same wait in a worker thread so the test's event loop keeps serving the app.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web

from tests.fake_slack.delivery import Courier
from tests.fake_slack.records import JSON, Ack, ApiCall, Delivery, Envelope, Fault, Injection
from tests.fake_slack.simulator import DEFAULT_SUBSCRIPTIONS, Simulator, Upload
from tests.fake_slack.socket_mode import SocketEndpoint
from tests.fake_slack.waiting import Waiting
from tests.fake_slack.web_api import WebApi
from tests.fake_slack.workspace import Conversation, User, Workspace
from tests.threaded_server import ThreadedServer

ALICE, BOB = "U0ALICE", "U0BOB"
ALICE_DM, BOB_DM, GENERAL = "D0ALICE", "D0BOB", "C0GENERAL"


class FakeSlack(Waiting, ThreadedServer):
    """The fake. ``with FakeSlack.running() as slack:`` or ``start()`` / ``stop()``."""

    name = "fake-slack"

    def __init__(
        self,
        *,
        bot_token: str = "xoxb-fake-bot-token",
        app_token: str = "xapp-1-fake-app-token",
        signing_secret: str = "fake-signing-secret",
        team_id: str = "T0FAKE",
        app_id: str = "A0FAKE",
        ack_timeout: float | None = 3.0,
        max_retries: int = 3,
        subscriptions: frozenset[str] = DEFAULT_SUBSCRIPTIONS,
        echo_bot_messages: bool = False,
    ) -> None:
        super().__init__()
        self.echo_bot_messages = echo_bot_messages
        self.bot_token, self.app_token, self.signing_secret = bot_token, app_token, signing_secret
        self.lock = threading.Condition()
        self.workspace = Workspace(
            team_id, "PinClawTest", User("U0BOT", "pinclaw", is_bot=True), "B0BOT", app_id
        )
        self.workspace.users["U0BOT"] = self.workspace.bot_user
        self._unreachable = False
        self.refused = 0  # connections closed unanswered while unreachable
        for user_id, name, real in ((ALICE, "alice", "Alice Liddell"), (BOB, "bob", "Bob Dylan")):
            self.add_user(user_id, name, real_name=real, display_name=name.title())
        self.add_channel(ALICE_DM, is_im=True, user=ALICE)
        self.add_channel(BOB_DM, is_im=True, user=BOB)
        self.add_channel(GENERAL, "general")
        self.socket = SocketEndpoint(
            self.lock, app_id=app_id, on_ack=self._on_ack, on_ready=self._on_ready
        )
        self.web = WebApi(
            self.workspace,
            self.lock,
            bot_token=bot_token,
            app_token=app_token,
            root=lambda: self.url,
            socket_url=lambda: self.socket.issue_url(self.url),
            on_posted=self._on_posted,
        )
        self.simulator = Simulator(
            self.workspace,
            self.lock,
            root=lambda: self.url,
            calls=self.web.calls,
            subscriptions=subscriptions,
        )
        self.courier = Courier(
            self.lock,
            self.socket,
            ack_timeout=ack_timeout,
            max_retries=max_retries,
            on_acked=self._acked,
        )

    @property
    def ack_timeout(self) -> float | None:
        """Seconds before an unacked event is redelivered (None: never)."""
        return self.courier.ack_timeout

    @ack_timeout.setter
    def ack_timeout(self, seconds: float | None) -> None:
        self.courier.ack_timeout = seconds

    @property
    def api_url(self) -> str:
        """The Web API base URL for ``AsyncWebClient(base_url=...)`` (ends with a slash)."""
        return f"{self.url}/api/"

    def make_app(self) -> web.Application:
        """Web API, websocket, response_url and file routes behind a network switch."""
        app = web.Application(middlewares=[self._network])
        app.router.add_route("*", "/api/{method}", self.web.handle)
        app.router.add_get("/socket", self.socket.handle)
        app.router.add_post("/hooks/{kind}/{team}/{hook_id}/{secret}", self.simulator.handle_hook)
        app.router.add_get("/files-pri/{team_file}/{tail:.*}", self.web.download)
        app.router.add_post("/upload/v1/{file_id}", self.web.upload)
        app.router.add_get("/login", self.web.login_page)
        return app

    async def on_stop(self) -> None:
        """Stop retries and close websockets so shutdown is prompt."""
        await self.courier.stop()
        await self.socket.close_all()

    # Workspace setup.

    def add_user(
        self, user_id: str, name: str, *, real_name: str = "", display_name: str = ""
    ) -> None:
        """Make a person known to ``users.info``."""
        with self.lock:
            self.workspace.users[user_id] = User(user_id, name, real_name, display_name)

    def add_channel(
        self,
        channel: str,
        name: str = "",
        *,
        is_im: bool = False,
        user: str = "",
        is_private: bool = False,
    ) -> None:
        """Make a conversation known (``is_im`` with ``user`` for a DM)."""
        with self.lock:
            self.workspace.conversations[channel] = Conversation(
                channel, name, is_im=is_im, is_private=is_private, user=user
            )

    # Faults.

    def fail(
        self,
        method: str,
        error: str,
        *,
        status: int = 200,
        retry_after: int | None = None,
        times: int = 1,
        page: str | None = None,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with ``error`` (429 + Retry-After for
        a rate limit: ``fail(m, "ratelimited", status=429, retry_after=1)``); with ``page``,
        that HTML page is the body instead of Slack's JSON, as a proxy in front of Slack
        answers an outage (``error`` then only names the fault in ``calls()``)."""
        with self.lock:
            self.web.faults[method].extend([Fault(error, status, retry_after, page)] * times)

    def unreachable(self, on: bool = True) -> None:
        """While on, every new HTTP or websocket request is closed unanswered (open
        websockets stay up: ``drop()`` cuts them)."""
        self._unreachable = on

    @web.middleware
    async def _network(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if self._unreachable:
            with self.lock:
                self.refused += 1
                self.lock.notify_all()
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=503)  # never reaches the client
        return await handler(request)

    # What happened.

    def calls(self, method: str | None = None) -> list[ApiCall]:
        """Web API calls (and ``response_url`` posts) so far, optionally of one method."""
        with self.lock:
            return [c for c in self.web.calls if method is None or c.method == method]

    def sent(self, channel: str) -> list[JSON]:
        """Messages the bot has in ``channel`` (edits applied, deletions gone)."""
        with self.lock:
            bot = self.workspace.bot_user.id
            return [m for m in self.workspace.messages.get(channel, []) if m.get("user") == bot]

    def history(self, channel: str) -> list[JSON]:
        """Every message in ``channel``, people's and the bot's."""
        with self.lock:
            return list(self.workspace.messages.get(channel, []))

    def ephemerals(self, channel: str | None = None) -> list[JSON]:
        """Ephemeral messages (``via``: chat.postEphemeral, response_url or ack)."""
        with self.lock:
            return [e for e in self.workspace.ephemerals if channel in (None, e["channel"])]

    def reactions(self, channel: str, ts: str) -> list[str]:
        """Reaction names the bot put on a message."""
        with self.lock:
            return [name for name, _ in self.workspace.reactions.get((channel, ts), [])]

    def acks(self) -> list[Ack]:
        """Acks received so far (socket frames and HTTP 200 answers)."""
        with self.lock:
            return list(self.courier.acks)

    def deliveries(self) -> list[Delivery]:
        """Every delivery attempt so far."""
        with self.lock:
            return list(self.courier.deliveries)

    @property
    def connection_count(self) -> int:
        """Websocket connections that got a hello, ever."""
        with self.lock:
            return sum(1 for c in self.socket.connections if c.greeted)

    @property
    def connected(self) -> bool:
        """True while a greeted websocket is open."""
        return self.socket.current() is not None

    # People.

    def user_sends(
        self,
        channel: str,
        user: str,
        text: str,
        *,
        channel_type: str | None = None,
        thread_ts: str | None = None,
        mention_bot: bool = False,
        files: Sequence[Upload] | None = None,
        deliver: bool = True,
    ) -> Injection:
        """A person posts a message (``channel_type`` defaults from the channel: D... is a DM);
        files are ``(name, content[, mimetype])``. Returns the event and its envelopes."""
        with self.lock:
            event, envelopes = self.simulator.message(
                channel,
                user,
                text,
                channel_type=channel_type,
                thread_ts=thread_ts,
                mention_bot=mention_bot,
                files=files or (),
            )
        return self._inject(envelopes, event, deliver)

    def user_edits(self, channel: str, ts: str, text: str, *, deliver: bool = True) -> Injection:
        """A person edits their post ``ts`` to say ``text`` (a ``message_changed`` event)."""
        with self.lock:
            event, envelopes = self.simulator.edit(channel, ts, text)
        return self._inject(envelopes, event, deliver)

    def user_presses(
        self,
        user: str,
        action_id: str,
        *,
        channel: str | None = None,
        message_ts: str | None = None,
        value: str | None = None,
        deliver: bool = True,
    ) -> Injection:
        """A person presses the button ``action_id`` on the newest bot message showing it."""
        with self.lock:
            envelope = self.simulator.press(user, action_id, channel, message_ts, value)
        return self._inject([envelope], {}, deliver)

    def user_runs_command(
        self,
        channel: str,
        user: str,
        text: str = "",
        *,
        command: str = "/pinclaw",
        deliver: bool = True,
    ) -> Injection:
        """A person types ``/pinclaw text`` in ``channel``."""
        with self.lock:
            envelope = self.simulator.command(channel, user, command, text)
        return self._inject([envelope], {}, deliver)

    # Delivery control.

    def use_http(self, request_url: str, signing_secret: str | None = None) -> None:
        """Deliver envelopes as signed POSTs to the app's Request URL from now on."""
        with self.lock:
            self.courier.http_target = (request_url, signing_secret or self.signing_secret)

    def use_socket(self) -> None:
        """Deliver envelopes over the websocket again."""
        with self.lock:
            self.courier.http_target = None

    def deliver(self, envelope: Envelope) -> None:
        """Send an envelope built elsewhere (e.g. with ``deliver=False``)."""
        self.call(self.courier.deliver(envelope))

    def redeliver(self, envelope: Envelope, reason: str = "timeout") -> Envelope:
        """Send ``envelope`` again as Slack's next retry (same event_id, new envelope id)."""
        return self.call(self.courier.redeliver(envelope, reason))

    def disconnect(self, reason: str = "refresh_requested") -> None:
        """Ask connected clients to reconnect, with a ``disconnect`` frame."""
        self.call(self.socket.disconnect(reason))

    def drop(self) -> None:
        """Cut every websocket's TCP connection; clients must notice and reconnect."""
        self.call(self.socket.drop())

    def _inject(self, envelopes: list[Envelope], event: JSON, deliver: bool) -> Injection:
        if deliver:
            for envelope in envelopes:
                self.deliver(envelope)
        return Injection(tuple(envelopes), event)

    def _on_ack(self, envelope_id: str, payload: JSON | None) -> None:
        self.courier.on_ack(envelope_id, payload)

    def _on_ready(self) -> None:
        self.courier.on_ready()

    def _on_posted(self, channel: str, message: JSON) -> None:
        # Runs on the fake's loop with the lock held; Slack echoes bot posts as events.
        envelope = self.simulator.echo(channel, message) if self.echo_bot_messages else None
        if envelope is not None:
            self.courier.spawn(self.courier.deliver(envelope))

    def _acked(self, envelope: Envelope, payload: JSON | None) -> None:
        with self.lock:
            self.simulator.apply_ack(envelope, payload)
            self.lock.notify_all()
