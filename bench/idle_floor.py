"""The floor for the idle-memory figure: three bare bots in one process, connected.

python-telegram-bot polling, discord.py on the gateway and slack-bolt over
Socket Mode, each with one handler that answers a message with its own text,
plus an idle ``aiohttp.web`` server on 127.0.0.1 (PinClaw's status endpoint is
on by default). No storage, no configuration model, no agent. It prints
``connected NAME`` for each platform and then idles until interrupted.

    python bench/idle_floor.py TELEGRAM_URL TELEGRAM_TOKEN DISCORD_API DISCORD_GATEWAY \
        DISCORD_TOKEN SLACK_API SLACK_BOT_TOKEN SLACK_APP_TOKEN

``channels_bench.py`` starts it against its fake servers and reads its RSS the
same way as PinClaw's: what is left above this floor is PinClaw's own. The
floor skips the same two optional imports PinClaw skips (``bot/core/lean_imports.py``:
cryptography and httpx's command-line client), so that difference is not
counted as PinClaw's.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.core.lean_imports import skip_unused_optional_imports

skip_unused_optional_imports()

import discord  # noqa: E402
import yarl  # noqa: E402
from aiohttp import web  # noqa: E402
from discord.gateway import DiscordWebSocket  # noqa: E402
from discord.http import Route  # noqa: E402
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler  # noqa: E402
from slack_bolt.async_app import AsyncApp  # noqa: E402
from slack_sdk.web.async_client import AsyncWebClient  # noqa: E402
from telegram import Update  # noqa: E402
from telegram.ext import Application, ContextTypes, MessageHandler, filters  # noqa: E402


async def telegram_bot(url: str, token: str) -> Application[Any, Any, Any, Any, Any, Any]:
    """A PTB application polling the fake, echoing text."""

    async def echo(update: Update, _: ContextTypes.DEFAULT_TYPE) -> None:
        if update.effective_message is not None and update.effective_message.text:
            await update.effective_message.reply_text(update.effective_message.text)

    application = (
        Application.builder().token(token).base_url(f"{url}/bot").base_file_url(f"{url}/file/bot")
    ).build()
    application.add_handler(MessageHandler(filters.TEXT, echo))
    await application.initialize()
    await application.start()
    assert application.updater is not None
    await application.updater.start_polling(poll_interval=0.0, timeout=10)
    return application


async def discord_bot(api: str, gateway: str, token: str, ready: asyncio.Event) -> discord.Client:
    """A discord.py client on the fake gateway, echoing messages."""
    Route.BASE = api
    gateway_url = yarl.URL(gateway)
    DiscordWebSocket.DEFAULT_GATEWAY = (
        gateway_url if gateway_url.path else gateway_url.with_path("/")
    )
    intents = discord.Intents.none()
    intents.guilds = intents.guild_messages = intents.dm_messages = intents.message_content = True
    client = discord.Client(intents=intents, max_messages=None, chunk_guilds_at_startup=False)

    @client.event
    async def on_ready() -> None:
        ready.set()

    @client.event
    async def on_message(message: discord.Message) -> None:
        if client.user is not None and message.author.id != client.user.id:
            await message.channel.send(message.content)

    await client.login(token)
    asyncio.get_running_loop().create_task(client.connect(reconnect=True))
    return client


async def slack_bot(api: str, bot_token: str, app_token: str) -> AsyncSocketModeHandler:
    """A bolt app over Socket Mode, echoing messages."""
    app = AsyncApp(client=AsyncWebClient(token=bot_token, base_url=api), signing_secret="")

    @app.event("message")
    async def echo(event: dict[str, Any], say: Any) -> None:
        if event.get("text"):
            await say(event["text"])

    handler = AsyncSocketModeHandler(app, app_token)
    await handler.connect_async()  # type: ignore[no-untyped-call]
    return handler


async def main() -> None:
    """Connect all three, report, and idle."""
    args = sys.argv[1:9]
    await telegram_bot(args[0], args[1])
    print("connected telegram", flush=True)
    ready = asyncio.Event()
    await discord_bot(args[2], args[3], args[4], ready)
    await asyncio.wait_for(ready.wait(), 60)
    print("connected discord", flush=True)
    await slack_bot(args[5], args[6], args[7])
    print("connected slack", flush=True)
    runner = web.AppRunner(web.Application())
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
