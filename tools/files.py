"""The file tools: read, write and edit files in the workspace (and list and search them).

Every path goes through the ``PathGuard`` twice: each tool's ``assess`` lets
the policy gate refuse a forbidden or outside path before anything runs, and
the tool checks again when it runs, then does its I/O through the guard's
race-safe helpers in a worker thread. Listing and searching live in
``tools.file_search``; ``build`` returns all six tools.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from bot.config import LoadedConfig
from bot.config.security import SecurityConfig
from bot.core.errors import ToolError
from bot.core.tool_api import Tool, ToolContext, tool
from bot.security.files.paths import PathGuard
from tools.file_search import PathParam, path_assessor, search_tools

if TYPE_CHECKING:
    from bot.security.kit import SecurityKit

MAX_LINE_SHOWN = 2000
MAX_HINT_LINES = 20_000


def build(loaded: LoadedConfig, security: SecurityKit) -> list[Tool]:
    """The file tools, bound to the kit's path guard and file size limit."""
    return file_tools(security.paths, security.config)


def file_tools(guard: PathGuard, config: SecurityConfig) -> list[Tool]:
    """All six file tools working through ``guard`` with ``config``'s limits."""
    return [*_text_tools(guard, config.file_max_bytes), *search_tools(guard, config.file_max_bytes)]


def _text_tools(guard: PathGuard, max_bytes: int) -> list[Tool]:
    @tool(risk="low", effect="read", untrusted_output=True, assess=path_assessor(guard, "low"))
    async def file_read(
        ctx: ToolContext,
        path: PathParam,
        offset: Annotated[
            int,
            Field(ge=0, description="lines to skip: 0 starts at line 1, 400 starts at line 401"),
        ] = 0,
        limit: Annotated[int, Field(ge=1, le=2000, description="most lines to show")] = 400,
    ) -> str:
        """Read a UTF-8 text file, a slice of lines at a time, each line shown with its number."""
        return await asyncio.to_thread(_read, guard, path, offset, limit, max_bytes)

    @tool(
        risk="medium",
        effect="write",
        assess=path_assessor(guard, "medium"),
        approval_fields=("path",),
    )
    async def file_write(
        ctx: ToolContext,
        path: PathParam,
        content: Annotated[str, Field(description="the complete new content of the file")],
    ) -> str:
        """Create or overwrite a text file (missing folders are created)."""
        return await asyncio.to_thread(_write, guard, path, content, max_bytes)

    @tool(
        risk="medium",
        effect="write",
        assess=path_assessor(guard, "medium"),
        approval_fields=("path",),
    )
    async def file_edit(
        ctx: ToolContext,
        path: PathParam,
        old_text: Annotated[
            str,
            Field(
                description="exact text to replace, including whitespace, without the line "
                "numbers file_read shows; it must occur exactly once"
            ),
        ],
        new_text: Annotated[str, Field(description="the text to put in its place")],
    ) -> str:
        """Replace one exact snippet in a text file; read the file first to copy the snippet."""
        return await asyncio.to_thread(_edit, guard, path, old_text, new_text, max_bytes)

    return [file_read, file_write, file_edit]


def _read(guard: PathGuard, path: str, offset: int, limit: int, max_bytes: int) -> str:
    target = guard.check(path, must_exist=True)
    shown = guard.display(target)
    lines = _lines(_text(guard.read_bytes(target, max_bytes=max_bytes), shown))
    total = len(lines)
    if total == 0:
        return f"{shown}: empty file"
    if offset >= total:
        raise ToolError(f"offset {offset} is past the end: '{shown}' has {total} lines")
    end = min(total, offset + limit)
    head = f"{shown}: lines {offset + 1}-{end} of {total}"
    if end < total:
        head += f" ({total - end} more: call again with offset={end})"
    width = len(str(end))
    body = [f"{n:>{width}}\t{_clip(line)}" for n, line in enumerate(lines[offset:end], offset + 1)]
    return "\n".join([head, *body])


def _write(guard: PathGuard, path: str, content: str, max_bytes: int) -> str:
    target = guard.check(path)
    data = _encode(content)
    if len(data) > max_bytes:
        raise ToolError(f"the content is {len(data)} bytes, more than the limit of {max_bytes}")
    created = guard.write_bytes(target, data)
    what = "created the file" if created else "replaced its previous content"
    return f"wrote {len(data)} bytes to '{guard.display(target)}' ({what})"


def _edit(guard: PathGuard, path: str, old_text: str, new_text: str, max_bytes: int) -> str:
    if not old_text:
        raise ToolError(
            "old_text is empty: give the exact text to replace (file_write creates files)"
        )
    if old_text == new_text:
        raise ToolError("old_text and new_text are the same: there is nothing to change")
    target = guard.check(path, must_exist=True)
    shown = guard.display(target)
    text = _text(guard.read_bytes(target, max_bytes=max_bytes), shown)
    if "\r\n" in text and "\r\n" not in old_text:
        # The model writes "\n"; a Windows-style file holds "\r\n".
        old_text = old_text.replace("\n", "\r\n")
        new_text = new_text.replace("\n", "\r\n")
    first = text.find(old_text)
    if first < 0:
        raise ToolError(f"old_text was not found in '{shown}'; {_nearest(text, old_text)}")
    count = _occurrences(text, old_text)
    if count > 1:
        raise ToolError(
            f"old_text occurs {count} times in '{shown}'; include more of the surrounding "
            "lines so that it matches exactly once"
        )
    updated = text[:first] + new_text + text[first + len(old_text) :]
    data = _encode(updated)
    if len(data) > max_bytes:
        raise ToolError(f"the edited file would be {len(data)} bytes, more than the limit")
    guard.write_bytes(target, data)
    line = text.count("\n", 0, first) + 1
    return f"replaced 1 occurrence in '{shown}' at line {line}"


def _text(data: bytes, shown: str) -> str:
    if b"\0" in data:
        raise ToolError(f"'{shown}' is a binary file; only text files can be read or edited")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(
            f"'{shown}' is not UTF-8 text (it may be binary or in another encoding)"
        ) from None


def _encode(content: str) -> bytes:
    try:
        return content.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolError("the text holds characters that cannot be written as UTF-8") from None


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _clip(line: str) -> str:
    if len(line) <= MAX_LINE_SHOWN:
        return line
    return f"{line[:MAX_LINE_SHOWN]}… [{len(line) - MAX_LINE_SHOWN} more characters]"


def _occurrences(text: str, snippet: str) -> int:
    """How many times ``snippet`` occurs, overlaps included."""
    count, start = 0, text.find(snippet)
    while start >= 0:
        count += 1
        start = text.find(snippet, start + 1)
    return count


def _nearest(text: str, old_text: str) -> str:
    """A hint for a snippet that does not match: whitespace, or the most similar line."""
    if " ".join(old_text.split()) in " ".join(text.split()):
        return (
            "it matches only if spaces, tabs or line breaks are ignored: copy the text "
            "exactly as file_read shows it, without the line numbers"
        )
    import difflib  # only a snippet that does not match needs it

    wanted = next((line.strip() for line in old_text.splitlines() if line.strip()), "")
    lines = [line.strip() for line in _lines(text)[:MAX_HINT_LINES]]
    close = difflib.get_close_matches(wanted, lines, n=1, cutoff=0.6) if wanted else []
    if close:
        number = lines.index(close[0]) + 1
        return f"the most similar line is line {number}: {_clip(close[0])!r}"
    return "read the file with file_read first and copy the exact text"
