"""The ``send_file`` tool: a file from the workspace, delivered to the chat of the turn.

Only the workspace itself counts (not the extra folders file tools may read),
through a ``PathGuard`` of its own with the same forbidden places, so a link
pointing out of it, PinClaw's database or config are refused before anything
is read. The file is capped at ``[tools] max_send_bytes``; each channel refuses
what its platform will not take. Whether it goes as a picture is decided by its
bytes, never by its name.

The tool is low risk and only reads, like ``file_read``: it shows a workspace
file to the people of the chat the turn answers, which is what ``file_read``
followed by a reply already can for text. An owner who wants to be asked first
lists it in ``[security] always_ask``.
"""

from __future__ import annotations

import asyncio
import mimetypes
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from bot.config import LoadedConfig
from bot.core.errors import ToolError
from bot.core.messages import OutboundFile
from bot.core.tool_api import Tool, ToolContext, tool
from bot.security.files.paths import PathGuard
from tools.file_search import PathParam, path_assessor

if TYPE_CHECKING:
    from bot.security.kit import SecurityKit

MAX_CAPTION_CHARS = 1024  # Telegram's caption limit, so a caption always fits under the file
PHOTO_TYPES = frozenset({"image/png", "image/jpeg", "image/webp"})  # GIFs stay animated files


def build(loaded: LoadedConfig, security: SecurityKit) -> list[Tool]:
    """``send_file``, limited to the workspace and ``[tools] max_send_bytes``."""
    paths = security.paths
    guard = PathGuard(paths.workspace, forbidden=paths.forbidden, home=paths.home)
    return [send_file_tool(guard, loaded.config.tools.max_send_bytes)]


def send_file_tool(guard: PathGuard, max_bytes: int) -> Tool:
    """The tool, sending files below ``guard``'s workspace of at most ``max_bytes``."""

    @tool(
        risk="low",
        effect="read",
        assess=path_assessor(guard, "low"),
        approval_fields=("path",),
        timeout_s=180.0,
    )
    async def send_file(
        ctx: ToolContext,
        path: PathParam,
        caption: Annotated[
            str,
            Field(
                max_length=MAX_CAPTION_CHARS,
                description="a short message shown with the file (markdown); empty for none",
            ),
        ] = "",
        as_photo: Annotated[
            bool | None,
            Field(
                description="true: show an image as a picture; false: send it as a file to "
                "download; leave it out to decide by the file's content"
            ),
        ] = None,
    ) -> str:
        """Send a file from the workspace to this chat: a document, or an image as a picture.

        Write the file first (e.g. with file_write or a command), then send it.
        """
        target = await asyncio.to_thread(guard.check, path, must_exist=True)
        shown = guard.display(target)
        if ctx.send_file is None:
            raise ToolError(_nowhere(ctx, shown, target))
        data = await asyncio.to_thread(_read, guard, target, shown, max_bytes)
        mime_type = sniff(data, target.name)
        photo = mime_type in PHOTO_TYPES if as_photo is None else as_photo
        note = ""
        if photo and mime_type not in PHOTO_TYPES:
            photo = False
            note = "; not as a picture: only PNG, JPEG and WebP images can be shown as pictures"
        file = OutboundFile(
            channel=ctx.session.channel,
            chat_id=ctx.session.chat_id,
            thread_id=ctx.session.thread_id,
            name=target.name,
            data=data,
            mime_type=mime_type,
            caption=caption.strip(),
            as_photo=photo,
            path=str(target),
        )
        from bot.core.channel import DeliveryError  # with the chat's adapter, if not before

        try:
            await ctx.send_file(file)
        except DeliveryError as exc:
            raise ToolError(f"'{shown}' was not delivered: {exc}") from None
        kind = "a picture" if photo else "a file"
        return f"sent '{shown}' ({size_text(len(data))}, {mime_type}) to this chat as {kind}{note}"

    return send_file


def _read(guard: PathGuard, target: Path, shown: str, max_bytes: int) -> bytes:
    entry = guard.stat(target)
    if entry.kind == "dir":
        raise ToolError(f"'{shown}' is a folder; only single files can be sent (pack it first)")
    if entry.size > max_bytes:
        raise ToolError(
            f"'{shown}' is {size_text(entry.size)}, more than the {size_text(max_bytes)} "
            "a file sent to a chat may have; make it smaller, or tell the user where it is"
        )
    if entry.size == 0:
        raise ToolError(f"'{shown}' is empty; there is nothing to send")
    return guard.read_bytes(target, max_bytes=max_bytes)


def _nowhere(ctx: ToolContext, shown: str, target: Path) -> str:
    """Why no file can be sent from this turn, and what to do instead."""
    if ctx.depth:
        return (
            "a delegated task cannot send files to the chat; say in your answer that the "
            f"file is '{shown}' in the workspace, so the one who asked can send it"
        )
    if ctx.origin != "chat":
        return (
            "this scheduled turn's reply does not go to a chat, so no file can be sent from "
            f"it; mention the file '{shown}' (in the workspace) in your reply instead"
        )
    return (
        "files cannot be sent from here: this conversation is not in a chat that can "
        f"receive files. The file is at {target} on this machine; tell the user that path"
    )


def sniff(data: bytes, name: str) -> str:
    """The MIME type of ``data``: images and PDFs by their bytes, other files by name.

    A name never makes a file an image: ``photo.png`` that is no PNG is
    ``application/octet-stream``.
    """
    from bot.media.images import sniff_image  # loaded with the first file sent

    picture = sniff_image(data)
    if picture is not None:
        return picture.mime_type
    if data.startswith(b"%PDF-"):
        return "application/pdf"
    guessed, _ = mimetypes.guess_type(name)
    if guessed and not guessed.startswith("image/") and guessed != "application/pdf":
        return guessed
    return "application/octet-stream"


def size_text(size: int) -> str:
    """A size for people: bytes, KB or MB (powers of 1024, one decimal)."""
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / 1024 / 1024:.1f} MB"
