"""Button presses in Slack: ``block_actions`` handed to the core, its answer shown to the presser.

Bolt answers Slack only when a listener returns (``process_before_response``), and
Slack wants that answer within 3 seconds, so the action listener acks and passes
the payload to ``Presses.take``; the rest runs in a named task that ``close``
awaits (or, after ``PRESS_DRAIN_S``, cancels) when the channel's run ends. The
same path serves Socket Mode and HTTP mode.

Each press becomes a ``ButtonPress``: the conversation, the presser's id and the
name people see (``users.info``), the button's ``action_id`` and the ``ts`` of
the message it is on. ``inbox.press`` decides what it means (who may approve is
the core's business, never the adapter's) and returns a ``PressReply``. A private
reply is shown to the presser alone with ``chat.postEphemeral`` (in the message's
thread); if Slack refuses that (the app left the channel, a missing scope), it
goes through the press's ``response_url`` as an ephemeral response that leaves
the original message alone. A public reply is posted in the conversation. The
message with the buttons is never edited here: the core closes a request with
``close_approval``. When the core fails, the presser still gets one short sentence
(try again during a restart, or a bug's id) and the failure is logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from ssl import SSLContext
from typing import Any

from bot.core.channel import ButtonPress, DeliveryError, Inbox, PressReply, ShuttingDown
from bot.core.delivery import send_with_retries
from bot.core.drain import drain
from bot.core.errors import UserError, bug_message, log_bug
from bot.core.pacing import Pacer
from channels.slack.client import SlackWeb
from channels.slack.events import CHANNEL, Directory
from channels.slack.format import to_mrkdwn
from channels.slack.send import (
    RESPONSE_URL_TTL_S,
    Hook,
    call,
    classify,
    post_ephemeral_response,
)

log = logging.getLogger(__name__)

JSON = dict[str, Any]
PRESS_DRAIN_S = 5.0  # how long a stopping channel waits for presses in progress
REPLY_ATTEMPTS = 3  # the presser is looking at the screen: give up sooner than a reply
RESTARTING = "PinClaw is restarting; please press the button again in a minute."


@dataclass(frozen=True, slots=True)
class Pressed:
    """What a ``block_actions`` payload says about one press."""

    chat_id: str
    user_id: str
    login: str
    action_id: str
    message_ts: str
    thread_ts: str | None
    response_url: str


def pressed(body: JSON) -> Pressed | None:
    """The press in a ``block_actions`` payload; None if it lacks a user, place or button."""
    actions = body.get("actions")
    action = _object(actions[0] if isinstance(actions, list) and actions else None)
    user, container = _object(body.get("user")), _object(body.get("container"))
    message = _object(body.get("message"))
    chat_id = str(container.get("channel_id") or _object(body.get("channel")).get("id") or "")
    user_id, action_id = str(user.get("id") or ""), str(action.get("action_id") or "")
    if not (chat_id and user_id and action_id):
        return None
    message_ts = str(container.get("message_ts") or message.get("ts") or "")
    thread = message.get("thread_ts") or container.get("thread_ts")
    return Pressed(
        chat_id=chat_id,
        user_id=user_id,
        login=str(user.get("username") or user.get("name") or user_id),
        action_id=action_id,
        message_ts=message_ts,
        # A thread's parent carries its own ts as thread_ts; its replies belong beside it.
        thread_ts=str(thread) if thread and thread != message_ts else None,
        response_url=str(body.get("response_url") or ""),
    )


class Presses:
    """Hands presses to the core and answers the presser; one per channel run."""

    def __init__(
        self, inbox: Inbox, web: SlackWeb, directory: Directory, pacer: Pacer, tls: SSLContext
    ) -> None:
        self._inbox = inbox
        self._web = web
        self._directory = directory
        self._pacer = pacer
        self._tls = tls
        self._tasks: set[asyncio.Task[None]] = set()

    def take(self, body: JSON) -> None:
        """Start handling the press in ``body`` (already acknowledged to Slack)."""
        found = pressed(body)
        if found is None:
            log.warning("ignored a Slack button press without a user, conversation or button")
            return
        name = f"slack press {found.action_id} by {found.user_id}"
        task = asyncio.create_task(self._handle(found), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Let presses in progress finish (for ``PRESS_DRAIN_S``), then cancel the rest."""
        for task in await drain(self._tasks, PRESS_DRAIN_S):  # none outlives the channel
            log.warning("gave up on %s: the Slack channel is stopping", task.get_name())

    async def _handle(self, found: Pressed) -> None:
        name = await self._directory.user_name(found.user_id)
        press = ButtonPress(
            channel=CHANNEL,
            chat_id=found.chat_id,
            user_id=found.user_id,
            user_name=name if name and name != found.user_id else found.login,
            action_id=found.action_id,
            message_ref=found.message_ts,
        )
        log.debug(
            "Slack button %s pressed by %s in %s", press.action_id, press.user_id, press.chat_id
        )
        reply = await self._ask_core(press)
        if not reply.text.strip():
            return
        try:
            if reply.private:
                await self._tell_presser(found, to_mrkdwn(reply.text))
            else:
                await self._tell_chat(found, to_mrkdwn(reply.text))
        except DeliveryError as exc:
            log.warning("could not answer %s's button press: %s", found.user_id, exc)

    async def _ask_core(self, press: ButtonPress) -> PressReply:
        try:
            return await self._inbox.press(press)
        except ShuttingDown:
            return PressReply(RESTARTING)
        except UserError as exc:
            return PressReply(str(exc))
        except Exception as exc:
            error_id = log_bug(
                log, f"handling the Slack button press {press.action_id} failed", exc
            )
            return PressReply(bug_message(error_id))

    async def _tell_presser(self, found: Pressed, text: str) -> None:
        what = f"the answer to {found.user_id}'s button press"
        try:
            await send_with_retries(
                self._ephemeral_attempt(found, text), classify, what=what, attempts=REPLY_ATTEMPTS
            )
            return
        except DeliveryError as exc:
            if not found.response_url:
                raise
            log.info("%s; answering through the press's response_url instead", exc)
        hook = Hook(found.response_url, time.monotonic() + RESPONSE_URL_TTL_S)

        async def respond() -> None:
            async with self._web.session() as session:
                await post_ephemeral_response(
                    hook, text, session, self._tls, replace_original=False
                )

        await send_with_retries(respond, classify, what=what, attempts=REPLY_ATTEMPTS)

    def _ephemeral_attempt(self, found: Pressed, text: str) -> Callable[[], Awaitable[None]]:
        async def attempt() -> None:
            async with self._pacer.slot(found.chat_id):
                await call(
                    "chat.postEphemeral",
                    self._web.client().chat_postEphemeral(
                        channel=found.chat_id,
                        user=found.user_id,
                        text=text,
                        thread_ts=found.thread_ts,
                    ),
                )

        return attempt

    async def _tell_chat(self, found: Pressed, text: str) -> None:
        async def attempt() -> None:
            async with self._pacer.slot(found.chat_id):
                await call(
                    "chat.postMessage",
                    self._web.client().chat_postMessage(
                        channel=found.chat_id, text=text, thread_ts=found.thread_ts
                    ),
                )

        what = f"the answer to a button press in {found.chat_id}"
        await send_with_retries(attempt, classify, what=what, attempts=REPLY_ATTEMPTS)


def _object(value: object) -> JSON:
    return value if isinstance(value, dict) else {}
