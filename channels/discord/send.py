"""What leaves PinClaw for Discord: pieces within 2000 characters, buttons, error classes.

Discord's markdown is PinClaw's markdown (bold, italics, strike, code, fences,
masked links, ``#`` headings, ``-`` bullets), so text passes through unchanged;
mentions in it never ping anyone (see ``ALLOWED_MENTIONS``). Pieces are measured
in UTF-16 code units, never fewer than the characters Discord counts, so emoji
cannot push a piece over the limit.

Errors are sorted in one place: network trouble and Discord's 5xx (after
discord.py's own retries) are retried; a 429 that discord.py did not absorb is
retried after its ``Retry-After``; everything else (missing permissions, an
unknown channel, a rejected body) is permanent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp
import discord

from bot.core.channel import DeliveryError
from bot.core.delivery import Retry, split_rendered
from bot.core.messages import Attachment, Button

log = logging.getLogger(__name__)
_DOWNLOAD_TIMEOUT = aiohttp.ClientTimeout(total=120)

MESSAGE_LIMIT = 2000
MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024
MAX_BUTTONS = 25  # 5 rows of 5
BUTTON_LABEL_LIMIT = 80
# Model output may contain @everyone or <@id>: only the person replied to is notified.
ALLOWED_MENTIONS = discord.AllowedMentions(
    everyone=False, users=False, roles=False, replied_user=True
)


class NotConnected(Exception):
    """The Discord client is down (between reconnections); worth retrying."""


def utf16_length(text: str) -> int:
    """A length never below Discord's count: UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2  # a lone surrogate is 1 unit


def pieces(text: str) -> list[str]:
    """``text`` split for Discord; never empty (Discord refuses empty messages)."""
    split = split_rendered(text, MESSAGE_LIMIT, measure=utf16_length, size=utf16_length)
    parts = [p for p in split if p.strip()]
    return parts or ["…"]


def plain(button: Button) -> discord.ButtonStyle:
    """The style of an ordinary button: grey."""
    return discord.ButtonStyle.secondary


class ButtonRow(discord.ui.View):
    """Buttons under a message, each ``custom_id`` being the button's ``action_id``.

    Presses are not routed through this object: ``is_dispatchable`` is False so
    discord.py keeps no view per sent message (a slow leak on a daemon that runs
    for months), and a press is recognised by its ``custom_id`` in the client's
    ``on_interaction``, which also works for buttons sent before a restart.
    """

    def __init__(
        self,
        buttons: Sequence[Button],
        style: Callable[[Button], discord.ButtonStyle] = plain,
    ) -> None:
        super().__init__(timeout=None)
        if len(buttons) > MAX_BUTTONS:
            log.warning("a reply had %d buttons; Discord shows the first 25", len(buttons))
        for button in buttons[:MAX_BUTTONS]:
            self.add_item(
                discord.ui.Button(
                    label=button.label[:BUTTON_LABEL_LIMIT],
                    custom_id=button.action_id,
                    style=style(button),
                )
            )

    def is_dispatchable(self) -> bool:
        """Never: presses are handled by custom_id, not by this view."""
        return False


def channel_id(text: str) -> int:
    """A chat or thread id as Discord's channel id."""
    if not text.isdigit():
        raise DeliveryError(f"could not send to Discord chat {text!r}: not a channel id")
    return int(text)


async def post(
    client: discord.Client,
    target: int,
    piece: str,
    *,
    reference: discord.MessageReference | None,
    view: ButtonRow | None,
    nonce: int,
) -> discord.Message:
    """Post one piece to a channel (no cached channel object needed); return it."""
    extra: dict[str, Any] = {}
    if reference is not None:
        extra["reference"] = reference
    if view is not None:
        extra["view"] = view
    try:
        return await client.get_partial_messageable(target).send(piece, nonce=nonce, **extra)
    except Exception as exc:
        if client.is_closed():
            raise NotConnected("the Discord client closed meanwhile") from exc
        raise


async def download(connector: aiohttp.BaseConnector, attachment: Attachment) -> bytes:
    """Fetch an attachment over ``connector``, refusing more than ``MAX_ATTACHMENT_BYTES``."""
    if attachment.size > MAX_ATTACHMENT_BYTES:
        raise DeliveryError(_too_large(attachment))
    data = bytearray()
    try:
        async with (
            aiohttp.ClientSession(
                connector=connector, connector_owner=False, timeout=_DOWNLOAD_TIMEOUT
            ) as session,
            session.get(attachment.ref) as response,
        ):
            if response.status != 200:
                raise DeliveryError(f"could not download {attachment.name}: HTTP {response.status}")
            async for chunk in response.content.iter_chunked(64 * 1024):
                data += chunk
                if len(data) > MAX_ATTACHMENT_BYTES:
                    raise DeliveryError(_too_large(attachment))
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise DeliveryError(f"could not download {attachment.name}: {exc!r}") from exc
    return bytes(data)


def _too_large(attachment: Attachment) -> str:
    limit = MAX_ATTACHMENT_BYTES // (1024 * 1024)
    return f"the file {attachment.name} is too large to download (the limit is {limit} MiB)"


def classify(exc: BaseException) -> Retry | None:
    """Retry (and how) for transient failures, None for permanent ones."""
    if isinstance(exc, NotConnected | discord.DiscordServerError):
        return Retry()
    if isinstance(exc, discord.RateLimited):
        return Retry(exc.retry_after)
    if isinstance(exc, discord.HTTPException):
        return Retry(_retry_after(exc)) if exc.status == 429 else None
    if isinstance(exc, aiohttp.ClientError | OSError | TimeoutError):
        return Retry()
    return None


def _retry_after(exc: discord.HTTPException) -> float:
    # discord.py gives up on a 429 without a Via header (a Cloudflare block): wait, bounded.
    try:
        return min(60.0, max(1.0, float(exc.response.headers.get("Retry-After", "5"))))
    except ValueError:
        return 5.0
