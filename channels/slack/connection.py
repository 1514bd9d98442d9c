"""How Slack's events reach the bolt app: a watched Socket Mode link, or an HTTP endpoint.

Socket Mode: the app token is checked by asking for a socket URL first
(``apps.connections.open``), so a bad token or no network raises at once. Then
slack_sdk's client runs the socket and replaces it by itself when it drops or
stops answering pings; ``serve_socket`` watches it, reports the state in the
channel's status (connected on Slack's ``hello``), and raises when the socket has
been down for ``reconnect_limit_s``, so the supervisor starts everything afresh.

HTTP mode: bolt's own aiohttp application (it checks every request's signature
and answers Slack's URL verification) on ``http_listen:http_port``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.web.async_client import AsyncWebClient

from bot.core.channel import ChannelStatus
from channels.slack.send import call
from channels.slack.settings import SlackSettings

log = logging.getLogger(__name__)
socket_log = logging.getLogger("channels.slack.socket")

REPORT_AFTER_S = 2.0  # a routine socket refresh takes less; don't call it an outage


class SocketLink(Protocol):
    """The two lifecycle calls of bolt's socket handler."""

    async def connect_async(self) -> None: ...

    async def close_async(self) -> None: ...


async def serve_socket(
    app: AsyncApp,
    web_client: AsyncWebClient,
    settings: SlackSettings,
    status: ChannelStatus,
    detail: str,
) -> None:
    """Serve over Socket Mode until cancelled; raise when the socket stays down."""
    assert settings.app_token is not None  # the settings model requires it in socket mode
    handler = AsyncSocketModeHandler(
        app,
        settings.app_token.get_secret_value(),
        logger=socket_log,
        web_client=web_client,  # its ``ssl`` is used for the websocket too
        ping_interval=settings.ping_interval_s,
    )
    client = handler.client
    link: SocketLink = handler  # bolt leaves these two methods unannotated

    async def on_frame(_: AsyncBaseSocketModeClient, frame: dict[str, Any], raw: Any) -> None:
        if frame.get("type") == "hello":
            status.connected(detail)

    client.message_listeners.append(on_frame)
    try:
        client.wss_uri = await call("apps.connections.open (app token)", client.issue_new_wss_url())
        try:
            async with asyncio.timeout(settings.reconnect_limit_s):
                await link.connect_async()
        except TimeoutError:
            raise ConnectionError(
                f"could not open the Slack socket in {settings.reconnect_limit_s:.0f} s"
            ) from None
        await _watch(client.is_connected, settings, status)
    finally:
        await link.close_async()


async def _watch(
    is_connected: Callable[[], Any], settings: SlackSettings, status: ChannelStatus
) -> None:
    """Return never; raise once the socket has been down for ``reconnect_limit_s``."""
    loop = asyncio.get_running_loop()
    tick = min(1.0, settings.ping_interval_s / 4)
    grace = min(REPORT_AFTER_S, settings.ping_interval_s)
    down_since: float | None = None
    while True:
        await asyncio.sleep(tick)
        if await is_connected():
            down_since = None
            continue
        now = loop.time()
        if down_since is None:
            down_since = now
        down_for = now - down_since
        if down_for >= settings.reconnect_limit_s:
            raise ConnectionError(f"the Slack socket has been down for {down_for:.1f} s")
        if down_for >= grace and status.state == "connected":
            status.disconnected("the Slack socket dropped; reconnecting")


async def serve_http(
    app: AsyncApp,
    settings: SlackSettings,
    status: ChannelStatus,
    detail: str,
    on_listening: Callable[[str], None],
) -> None:
    """Serve bolt's HTTP endpoint until cancelled; ``on_listening`` gets its URL."""
    runner = web.AppRunner(
        app.web_app(path=settings.http_path), handle_signals=False, shutdown_timeout=1.0
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, settings.http_listen, settings.http_port)
        await site.start()
        host, port = runner.addresses[0][:2]
        url = f"http://{host}:{port}{settings.http_path}"
        on_listening(url)
        log.info("Slack events are received at %s (make it reachable over HTTPS)", url)
        status.connected(detail)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
