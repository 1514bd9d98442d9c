"""Files out to Discord: a message carrying the file, with the caption as its text.

Discord takes files of up to 10 MiB from a bot everywhere (boosted servers take
more, direct messages do not), so that is the limit here. A caption longer than
one message goes on in further messages after the file. Errors are sorted as for
replies (``send.classify``); Discord refusing the file as too large (HTTP 413)
is final and said so plainly.
"""

from __future__ import annotations

import io
import secrets
from collections.abc import Callable

import discord

from bot.core.channel import DeliveryError
from bot.core.delivery import send_with_retries
from bot.core.messages import OutboundFile
from bot.core.pacing import Pacer
from channels.discord.send import NotConnected, channel_id, classify, pieces

MAX_UPLOAD_BYTES = 10 * 1024 * 1024


async def send_file(
    client_of: Callable[[], discord.Client], pacer: Pacer, file: OutboundFile
) -> None:
    """Post ``file`` to its channel or thread; ``DeliveryError`` says why if Discord won't."""
    size = len(file.data)
    if size > MAX_UPLOAD_BYTES:
        raise DeliveryError(
            f"{file.name} is {size / 1024 / 1024:.1f} MB; Discord takes files of up to "
            f"{MAX_UPLOAD_BYTES >> 20} MB from bots"
        )
    target = channel_id(file.thread_id or file.chat_id)
    parts = pieces(file.caption) if file.caption.strip() else [""]
    for index, piece in enumerate(parts):
        # One nonce per message, kept across retries, so a lost answer makes no copy.
        nonce = secrets.randbits(62)

        async def attempt(piece: str = piece, nonce: int = nonce, first: bool = index == 0) -> None:
            client = client_of()
            channel = client.get_partial_messageable(target)
            try:
                if first:  # a fresh File for every attempt: a sent one is read to its end
                    attached = discord.File(io.BytesIO(file.data), filename=file.name)
                    await channel.send(piece or None, file=attached, nonce=nonce)
                else:
                    await channel.send(piece, nonce=nonce)
            except Exception as exc:
                if client.is_closed():
                    raise NotConnected("the Discord client closed meanwhile") from exc
                raise

        what = f"the file {file.name}" if index == 0 else f"part {index + 1} of its caption"
        async with pacer.slot(str(target)):
            try:
                await send_with_retries(attempt, classify, what=what)
            except DeliveryError as exc:
                cause = exc.__cause__
                if isinstance(cause, discord.HTTPException) and cause.status == 413:
                    raise DeliveryError(
                        f"Discord refused {file.name} ({size / 1024 / 1024:.1f} MB) as too "
                        "large for this chat"
                    ) from cause
                raise
