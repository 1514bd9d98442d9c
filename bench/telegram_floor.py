"""The floor for the channel benchmark: the least a Telegram bot can do.

A minimal python-telegram-bot script that forwards each text message to an
OpenAI-compatible model and replies with the answer: no storage, no access
checks, no pacing, no retries. PinClaw is measured against it.

    python bench/telegram_floor.py API_BASE_URL TOKEN MODEL_BASE_URL

It uses PTB's ``Application`` the way its documentation shows (long polling,
one handler), with updates handled concurrently so the floor is not slowed by
processing them one at a time.
"""

from __future__ import annotations

import sys

import httpx
from telegram import Update
from telegram.ext import Application, ContextTypes, MessageHandler, filters


def main() -> None:
    """Run the floor bot until interrupted."""
    api_base, token, model_base = sys.argv[1:4]
    client = httpx.AsyncClient(timeout=60)

    async def answer(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is None or not message.text:
            return
        response = await client.post(
            f"{model_base}/chat/completions",
            json={"model": "floor", "messages": [{"role": "user", "content": message.text}]},
        )
        text = response.json()["choices"][0]["message"]["content"]
        await message.reply_text(text)

    application = (
        Application.builder()
        .token(token)
        .base_url(f"{api_base}/bot")
        .base_file_url(f"{api_base}/file/bot")
        .concurrent_updates(True)
        .build()
    )
    application.add_handler(MessageHandler(filters.TEXT, answer))
    application.run_polling(poll_interval=0.0, timeout=10)


if __name__ == "__main__":
    main()
