"""Button presses on Telegram: each callback query goes to the core and is always answered.

A tap on an inline button arrives as a ``callback_query`` update. It is not a
message: it skips the inbound store (nothing stored, deduplicated or replayed
there) and goes straight to ``inbox.press``, whose reply answers the query (answerCallbackQuery:
an alert when the reply is private, else a passing notice). Until a query is
answered the tapper's client shows a spinner, so every query is answered,
whatever happens: a tap that carries no button data, a core that fails (a
generic sentence with an error id, the details in the log) or one that takes
too long (a "still working" notice; the core's own edit of the message tells
the rest).

Each press runs as its own named task, so neither the poll loop nor the
webhook's HTTP answer waits for it; ``drain`` lets those in flight finish when
the channel stops. A query Telegram delivers again (its update was not yet
confirmed when polling restarted) is recognised by its id and not passed on twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque

from telegram import CallbackQuery

from bot.core.channel import ChannelStatus, DeliveryError, Inbox, PressReply, ShuttingDown
from bot.core.delivery import send_with_retries
from bot.core.drain import drain
from bot.core.errors import bug_message, log_bug
from channels.telegram.client import TelegramClient, classify
from channels.telegram.events import press_of
from channels.telegram.format import utf16_len

log = logging.getLogger(__name__)

MAX_ANSWER = 200  # Telegram's limit for answerCallbackQuery's text
# How long to wait for the core before answering anyway: Telegram does not say how long
# a query stays answerable ("query is too old"); in practice it is ten seconds or more.
ANSWER_WITHIN_S = 5.0
ANSWER_ATTEMPTS = 3
REMEMBERED_QUERIES = 256  # enough to recognise a batch Telegram sends again after a restart
NOT_OURS = "This button no longer does anything."
STOPPING = "PinClaw is restarting; please tap again in a minute."
STILL_WORKING = "Still working on it; this message changes once it is done."


class PressHandler:
    """Hands button presses to the core in the background and answers each one."""

    def __init__(
        self,
        client: TelegramClient,
        status: ChannelStatus,
        *,
        answer_within_s: float = ANSWER_WITHIN_S,
    ) -> None:
        self._client = client
        self._status = status
        self._answer_within_s = answer_within_s
        self._tasks: set[asyncio.Task[None]] = set()
        self._seen: deque[str] = deque(maxlen=REMEMBERED_QUERIES)

    def take(self, query: CallbackQuery, inbox: Inbox) -> None:
        """Handle ``query`` in a task of its own; returns at once."""
        self._status.heard()
        if query.id in self._seen:  # delivered again (unconfirmed when polling restarted)
            log.info("telegram: button press %s arrived again; it was handled already", query.id)
            return
        self._seen.append(query.id)
        task = asyncio.create_task(self._handle(query, inbox), name=f"telegram press {query.id}")
        self._tasks.add(task)
        task.add_done_callback(self._done)

    async def drain(self, timeout_s: float) -> None:
        """Let presses in flight finish for up to ``timeout_s``, then cancel the rest."""
        await drain(self._tasks, timeout_s)  # no press outlives the channel

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log_bug(log, "telegram: handling a button press failed", task.exception())

    async def _handle(self, query: CallbackQuery, inbox: Inbox) -> None:
        work = asyncio.create_task(_ask(inbox, query), name=f"telegram press {query.id}: core")
        try:
            done, _ = await asyncio.wait({work}, timeout=self._answer_within_s)
            if done:
                await self._answer(query.id, work.result())
                return
            log.warning(
                "telegram: the core took over %.1f s with the press %r; answered it meanwhile",
                self._answer_within_s,
                query.data,
            )
            await self._answer(query.id, PressReply(STILL_WORKING, private=False))
            await work  # the decision still counts; its reply has nowhere to go now
        finally:
            work.cancel()  # only when this handler itself is cancelled (the channel stops)

    async def _answer(self, query_id: str, reply: PressReply) -> None:
        text = clip(reply.text, MAX_ANSWER)
        try:
            async with self._client.api() as bot:
                await send_with_retries(
                    lambda: bot.answer_callback_query(
                        query_id, text=text or None, show_alert=reply.private and bool(text)
                    ),
                    classify,
                    what="the answer to a button press",
                    attempts=ANSWER_ATTEMPTS,
                    base_delay_s=0.5,
                )
        except DeliveryError as exc:  # the tapper's spinner stops by itself after a while
            log.warning("telegram: %s", exc)


async def _ask(inbox: Inbox, query: CallbackQuery) -> PressReply:
    """The core's reply to the tap; a tap on no button of ours or a failure get a sentence."""
    try:
        press = press_of(query)
        if press is None:
            log.info("telegram: a button press without PinClaw's button data (query %s)", query.id)
            return PressReply(NOT_OURS, private=False)
        return await inbox.press(press)
    except ShuttingDown:
        return PressReply(STOPPING)
    except Exception as exc:
        error_id = log_bug(log, f"telegram: the button press {query.data!r} failed", exc)
        return PressReply(bug_message(error_id))


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` UTF-16 units (Telegram's count), with "…" when cut."""
    if utf16_len(text) <= limit:
        return text
    kept: list[str] = []
    used = 0
    for char in text:
        used += utf16_len(char)
        if used > limit - 1:
            break
        kept.append(char)
    return "".join(kept).rstrip() + "…"
