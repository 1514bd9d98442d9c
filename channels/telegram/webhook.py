"""Webhook mode of the Telegram channel: Telegram POSTs each update to an aiohttp server.

The server listens on ``webhook_listen:webhook_port`` at the path of
``webhook_url`` (a reverse proxy usually terminates HTTPS in front of it) and
answers 200 only once the update is stored by the inbox; a 500 makes Telegram
deliver it again later, so a stop or a crash loses nothing. Every request must
carry the secret given to setWebhook in ``X-Telegram-Bot-Api-Secret-Token``:
``webhook_secret`` from the config, or one generated once and kept in the
daemon's state. The webhook is left set when the channel stops, so Telegram
keeps the updates that arrive meanwhile. aiohttp is imported only in this mode.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from telegram import Bot

from bot.core.channel import ShuttingDown, StateStore
from channels.telegram.events import ALLOWED_UPDATES
from channels.telegram.settings import TelegramSettings

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
STATE_NAMESPACE = "telegram"
STATE_SECRET_KEY = "webhook_secret"


async def webhook_secret(settings: TelegramSettings, state: StateStore) -> str:
    """The configured secret, else the one generated for this installation (kept in state)."""
    if settings.webhook_secret is not None:
        return settings.webhook_secret.get_secret_value()
    stored = await state.get(STATE_NAMESPACE, STATE_SECRET_KEY)
    if stored:
        return stored
    generated = secrets.token_urlsafe(32)  # Telegram allows A-Z a-z 0-9 _ -, up to 256
    await state.set(STATE_NAMESPACE, STATE_SECRET_KEY, generated)
    return generated


async def serve_webhook(
    bot: Bot,
    settings: TelegramSettings,
    secret: str,
    accept: Callable[[dict[str, Any]], Awaitable[None]],
    on_ready: Callable[[], None],
) -> None:
    """Listen, register the webhook with Telegram, and serve updates until cancelled."""
    assert settings.webhook_url is not None  # the settings model requires it in this mode
    app = web.Application()
    app.router.add_post(urlsplit(settings.webhook_url).path or "/", _handler(secret, accept))
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, settings.webhook_listen, settings.webhook_port)
        await site.start()
        await bot.set_webhook(
            settings.webhook_url, secret_token=secret, allowed_updates=ALLOWED_UPDATES
        )
        on_ready()
        await asyncio.Event().wait()  # the site serves until the channel is cancelled
    finally:
        await runner.cleanup()


def _handler(
    secret: str, accept: Callable[[dict[str, Any]], Awaitable[None]]
) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "")
        if not hmac.compare_digest(given.encode(), secret.encode()):
            log.warning("telegram webhook: refused a request without the right secret")
            return web.Response(status=403)
        try:  # a byte that is not UTF-8 becomes U+FFFD, as in a long poll's answer
            body = json.loads((await request.read()).decode("utf-8", "replace"))
        except ValueError:
            return web.Response(status=400, text="not JSON")
        if not isinstance(body, dict):
            return web.Response(status=400, text="not an update")
        try:
            await accept(body)
        except ShuttingDown:
            log.info("telegram webhook: PinClaw is stopping; Telegram will send the update again")
            return web.Response(status=500)
        except Exception as exc:  # not stored, so not acknowledged: Telegram retries
            log.warning("telegram webhook: could not store an update (%s); it comes again", exc)
            return web.Response(status=500)
        return web.Response(status=200)

    return handle
