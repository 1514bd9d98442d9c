"""The floor for the trigger benchmark: the least an HTTP hook that posts to Telegram can do.

A bare ``aiohttp.web`` handler that, on ``POST /hook``, sends the body as a
message with python-telegram-bot's ``Bot.send_message`` and answers 200: no
secret, no storage, no judging, no outbox, no pacing, no retries. PinClaw's
webhook and GPIO triggers are measured against it.

    python bench/trigger_floor.py API_BASE_URL TOKEN CHAT_ID

It prints the port it listens on (127.0.0.1, a free one), then serves until
stdin closes or it is terminated.
"""

from __future__ import annotations

import asyncio
import sys

from aiohttp import web
from telegram import Bot


async def serve(api_base: str, token: str, chat_id: int) -> None:
    """Serve ``POST /hook`` until stdin reaches its end."""
    bot = Bot(token, base_url=f"{api_base}/bot", base_file_url=f"{api_base}/file/bot")
    await bot.initialize()

    async def hook(request: web.Request) -> web.Response:
        text = (await request.read()).decode("utf-8", "replace")
        await bot.send_message(chat_id, text)
        return web.Response(text="sent")

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert isinstance(server, asyncio.Server)
    print(server.sockets[0].getsockname()[1], flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # the benchmark closes stdin to stop it
    await runner.cleanup()
    await bot.shutdown()


def main() -> None:
    """Run the floor until stdin closes."""
    api_base, token, chat_id = sys.argv[1:4]
    asyncio.run(serve(api_base, token, int(chat_id)))


if __name__ == "__main__":
    main()
