"""The terminal commands: ``pinclaw agent -m`` (one turn) and ``pinclaw chat`` (a REPL).

Both run the same agent loop as the daemon; ``chat`` goes through the router
with the terminal as its channel, exactly as a Telegram chat would. While the
model is retried, ``chat`` says so on stderr in one short line per retry.
"""

from __future__ import annotations

import asyncio
import errno
import getpass
import logging
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

from bot.agent.prompt import describe_chat
from bot.cli.startup import resume_collector
from bot.config import LoadedConfig
from bot.core.errors import UsageError
from bot.core.messages import InboundMessage, clean_text, too_long
from bot.daemon.app import open_app
from bot.providers.http import RETRY_LOGGER, retry_notice

if TYPE_CHECKING:
    from bot.store.owner_inbox import OwnerInbox


async def run_agent_once(loaded: LoadedConfig, text: str, session: str | None) -> str:
    """Run one turn and return the reply; a named session continues its conversation."""
    text = clean_text(text)
    if note := too_long(text, loaded.config.daemon.max_message_bytes):
        raise UsageError(f"{note} ([daemon] max_message_bytes)")
    async with open_app(loaded) as app:
        resume_collector()
        message = InboundMessage(
            channel="terminal",
            chat_id=session or f"agent-{secrets.token_hex(4)}",
            sender_id=login_name(),
            sender_name=login_name(),
            text=text,
        )
        session_id = None if session else await app.history.new_session(message.session)
        result = await app.agent.run_turn(
            message, channel_context=describe_chat(message), session_id=session_id
        )
        return result.text


async def run_chat(loaded: LoadedConfig, session: str) -> int:
    """Chat in the terminal until /quit or end of input."""
    from bot.approvals.approvers import Approvers
    from bot.daemon.approvals import approval_service
    from bot.daemon.files_out import file_outlet
    from bot.daemon.models import ChatModels
    from bot.daemon.router import Router
    from bot.daemon.run_lock import held_elsewhere
    from bot.daemon.usage_footer import usage_footer
    from bot.store.inbound import InboundStore
    from bot.store.kv import KeyValueStore
    from bot.store.owner_inbox import OwnerInbox
    from channels.terminal import TerminalChannel

    async with open_app(loaded) as app:
        resume_collector()
        inbound, state = InboundStore(app.db), KeyValueStore(app.db)
        await inbound.setup()
        await state.setup()
        user = login_name()
        channel = TerminalChannel(chat_id=session, user=user, stream=loaded.config.agent.stream)
        app.agent.send_files_with(file_outlet({channel.name: channel}))
        approvers = Approvers({}, local={channel.name: [user]})
        # A daemon running beside has requests of its own open: they are not leftovers.
        alone = not held_elsewhere(loaded.data_dir)
        approvals = await approval_service(
            app, loaded, {channel.name: channel}, approvers, expire_leftovers=alone
        )
        assert app.client is not None, "open_app gives every App its client"
        router = Router(
            agent=app.agent,
            channels={channel.name: channel},
            inbound=inbound,
            settings=loaded.config.daemon,
            model_label=loaded.config.provider.label,
            approvals=approvals,
            models=ChatModels(loaded.config, app.client, state, approvers),
            footer=usage_footer(loaded.config, app.usage),
        )
        if sys.stdin.isatty():
            print(
                f"PinClaw chat with {loaded.config.provider.label}. "
                "/help for commands, /quit or Ctrl-D to leave."
            )
        await _mention_inbox(OwnerInbox(app.db))
        try:
            with retry_notices(sys.stderr):
                await channel.run(router)
                await router.drain()
            if channel.reader_gone:  # end as any command whose reader went away
                raise BrokenPipeError(errno.EPIPE, "nobody reads the replies")
        except asyncio.CancelledError:  # Ctrl-C: stop the turn in progress, then leave
            await router.shutdown(0)
            raise
        finally:
            await approvals.drain()
    return 0


async def _mention_inbox(inbox: OwnerInbox) -> None:
    """Say how many messages wait in the owner's inbox, if any do."""
    await inbox.setup()
    unread = await inbox.count_unread()
    if unread:
        print(
            f"You have {unread} unread message{'' if unread == 1 else 's'} in your inbox: "
            "pinclaw inbox"
        )


def login_name() -> str:
    """The name of the person at the terminal."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "owner"


class RetryNotices(logging.Handler):
    """Shows each retry of the model as one short line, without the log's details."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(logging.WARNING)
        self._stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        """Write the line if ``record`` announces a retry."""
        notice = retry_notice(record)
        if notice is None:
            return
        what = "model busy" if notice.reason == "rate_limited" else "model unreachable"
        self._stream.write(f"{what}, retrying ({notice.attempt}/{notice.max_retries})…\n")
        self._stream.flush()


@contextmanager
def retry_notices(stream: TextIO) -> Iterator[None]:
    """Show the model's retries on ``stream`` while inside; the log's level is not changed
    (its handlers keep their own level), only the retry warnings are let through to here."""
    logger = logging.getLogger(RETRY_LOGGER)
    handler, level = RetryNotices(stream), logger.level
    if logger.getEffectiveLevel() > logging.WARNING:
        logger.setLevel(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
