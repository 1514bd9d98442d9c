"""The file finding tools: list a folder, find paths by glob, search contents by regex.

All three only read, work through the ``PathGuard`` (forbidden places are left
out, links are never followed out of the allowed folders) and are bounded: a
fixed number of results and of entries looked at, so a huge tree cannot stall
the daemon. Version-control and dependency folders are skipped when walking.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable, Iterable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from pydantic import Field

from bot.core.errors import ToolError
from bot.core.tool_api import Assessment, Risk, Tool, ToolContext, tool
from bot.security.files.paths import Entry, PathGuard

PathParam = Annotated[
    str,
    Field(description="path relative to the workspace; absolute or ~ paths only where allowed"),
]
FolderParam = Annotated[
    str, Field(description="folder to look in, relative to the workspace; '.' is the workspace")
]

SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv"})
MAX_LISTED = 200
MAX_GLOB_RESULTS = 200
MAX_VISITED = 20_000
MAX_SEARCHED_FILES = 5_000
MAX_LINE_SEARCHED = 10_000
MAX_LINE_SHOWN = 300
BINARY_SNIFF_BYTES = 8192


def path_assessor(guard: PathGuard, risk: Risk) -> Callable[..., Assessment]:
    """An ``assess`` function judging the call's ``path`` argument with ``guard``."""

    def assess(ctx: ToolContext, path: str, **_: object) -> Assessment:
        return guard.assess(path, risk=risk)

    return assess


def search_tools(guard: PathGuard, max_bytes: int) -> list[Tool]:
    """``file_list``, ``glob_search`` and ``content_search`` working through ``guard``."""
    assess = path_assessor(guard, "low")

    @tool(risk="low", effect="read", untrusted_output=True, assess=assess)
    async def file_list(
        ctx: ToolContext,
        path: FolderParam = ".",
        depth: Annotated[
            int, Field(ge=1, le=5, description="1 lists the folder itself; 2 also its subfolders")
        ] = 1,
    ) -> str:
        """List a folder's entries with their type and size."""
        return await asyncio.to_thread(_list, guard, path, depth)

    @tool(risk="low", effect="read", untrusted_output=True, assess=assess)
    async def glob_search(
        ctx: ToolContext,
        pattern: Annotated[
            str,
            Field(
                description="glob such as '*.py' (a name at any depth), 'src/*.py' or "
                "'docs/**/*.md' (a path below `path`; ** is any number of folders)"
            ),
        ],
        path: FolderParam = ".",
    ) -> str:
        """Find files and folders whose names or paths match a glob pattern."""
        return await asyncio.to_thread(_glob, guard, pattern, path)

    @tool(risk="low", effect="read", untrusted_output=True, assess=assess)
    async def content_search(
        ctx: ToolContext,
        pattern: Annotated[
            str,
            Field(
                description="Python regular expression searched in each line; (?i) at the "
                "start ignores case"
            ),
        ],
        path: Annotated[
            str, Field(description="file or folder to search, relative to the workspace")
        ] = ".",
        glob: Annotated[
            str | None, Field(description="only files matching this glob, such as '*.py'")
        ] = None,
        max_results: Annotated[int, Field(ge=1, le=500)] = 50,
    ) -> str:
        """Search text files for lines matching a regular expression; shows file:line: text."""
        return await asyncio.to_thread(_search, guard, pattern, path, glob, max_results, max_bytes)

    return [file_list, glob_search, content_search]


def _list(guard: PathGuard, path: str, depth: int) -> str:
    target = guard.check(path, must_exist=True)
    shown = guard.display(target)
    top = guard.stat(target)
    if top.kind != "dir":
        return f"'{shown}' is a {_kind_name(top.kind)} ({_size(top.size)}), not a folder"
    lines: list[str] = []
    more = False
    with closing(guard.walk(target, max_depth=depth)) as entries:
        for entry in entries:
            if len(lines) == MAX_LISTED:
                more = True
                break
            lines.append(_entry_line(entry, target))
    if not lines:
        return f"{shown}/ is empty"
    head = f"{shown}/ ({_count(len(lines), 'entry', 'entries')}"
    head += f"; only the first {MAX_LISTED} shown: list a subfolder)" if more else ")"
    return "\n".join([head, *lines])


def _glob(guard: PathGuard, pattern: str, path: str) -> str:
    matcher = _glob_matcher(pattern)
    target = guard.check(path, must_exist=True)
    shown = guard.display(target)
    found: list[str] = []
    stopped = False
    with closing(guard.walk(target, skip_names=SKIPPED_DIRS)) as entries:
        for visited, entry in enumerate(entries, start=1):
            if visited > MAX_VISITED or len(found) == MAX_GLOB_RESULTS:
                stopped = True
                break
            if matcher(os.path.relpath(entry.path, target)):
                found.append(guard.display(entry.path) + ("/" if entry.kind == "dir" else ""))
    if not found:
        return f"no matches for '{pattern}' in '{shown}'"
    lines = [f"{_count(len(found), 'match', 'matches')} for '{pattern}' in '{shown}':", *found]
    if stopped:
        lines.append("(stopped early: there may be more; narrow the pattern or the path)")
    return "\n".join(lines)


@dataclass
class _Scan:
    """What a content search found and passed over."""

    results: list[str] = field(default_factory=list)
    searched: int = 0
    binary: int = 0
    large: int = 0
    stopped: bool = False


def _search(
    guard: PathGuard,
    pattern: str,
    path: str,
    glob: str | None,
    max_results: int,
    max_bytes: int,
) -> str:
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(
            f"invalid regular expression: {exc}; characters such as ( [ . * + ? need a "
            "backslash to be matched literally"
        ) from None
    matcher = _glob_matcher(glob) if glob else None
    target = guard.check(path, must_exist=True)
    top = guard.stat(target)
    if top.kind == "dir":

        def wanted(entry: Entry) -> bool:
            rel = os.path.relpath(entry.path, target)
            return entry.kind == "file" and (matcher is None or matcher(rel))

        with closing(guard.walk(target, skip_names=SKIPPED_DIRS)) as entries:
            scan = _scan(guard, regex, entries, wanted, max_results, max_bytes)
    else:
        scan = _scan(guard, regex, [top], lambda _: True, max_results, max_bytes)
    notes = []
    if scan.stopped:
        notes.append("stopped early: there may be more matches; narrow the pattern or the path")
    if scan.binary or scan.large:
        notes.append(
            f"skipped {_count(scan.binary, 'binary file', 'binary files')} and "
            f"{_count(scan.large, 'file', 'files')} over {max_bytes} bytes"
        )
    where = guard.display(target)
    if scan.results:
        head = f"{_count(len(scan.results), 'match', 'matches')} for /{pattern}/ in '{where}':"
    else:
        searched = _count(scan.searched, "file", "files")
        head = f"no matches for /{pattern}/ in '{where}' ({searched} searched)"
    return "\n".join([head, *scan.results, *(f"({note})" for note in notes)])


def _scan(
    guard: PathGuard,
    regex: re.Pattern[str],
    entries: Iterable[Entry],
    wanted: Callable[[Entry], bool],
    max_results: int,
    max_bytes: int,
) -> _Scan:
    scan = _Scan()
    looked_at = 0
    for visited, entry in enumerate(entries, start=1):
        if scan.stopped or visited > MAX_VISITED or looked_at >= MAX_SEARCHED_FILES:
            scan.stopped = True
            break
        if not wanted(entry):
            continue
        looked_at += 1
        if entry.size > max_bytes:
            scan.large += 1
            continue
        try:
            data = guard.read_bytes(entry.path, max_bytes=max_bytes)
        except ToolError:
            continue  # changed or vanished since it was listed
        scan.searched += 1
        if b"\0" in data[:BINARY_SNIFF_BYTES]:
            scan.binary += 1
            continue
        shown = guard.display(entry.path)
        lines = data.decode("utf-8", errors="replace").split("\n")
        for number, line in enumerate(lines, start=1):
            if regex.search(line[:MAX_LINE_SEARCHED]):
                scan.results.append(f"{shown}:{number}: {line.strip()[:MAX_LINE_SHOWN]}")
                if len(scan.results) >= max_results:
                    scan.stopped = True
                    break
    return scan


def _glob_matcher(pattern: str) -> Callable[[str], bool]:
    """A test for paths relative to the searched folder; a pattern without '/' tests names."""
    pattern = pattern.strip()
    parts = pattern.split("/")
    if not pattern or pattern.startswith(("/", "~")) or ".." in parts:
        raise ToolError(
            f"'{pattern}' is not a usable glob: give a relative pattern such as '**/*.py' "
            "and put the folder to search in `path`"
        )
    regex = re.compile(glob_to_regex(pattern))
    if "/" not in pattern:
        return lambda rel: regex.fullmatch(os.path.basename(rel)) is not None
    return lambda rel: regex.fullmatch(rel) is not None


def glob_to_regex(pattern: str) -> str:
    """A regular expression for a glob: * and ? within one name, ** across folders, [...]."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := _class_end(pattern, i)) > 0:
            body = pattern[i + 1 : end]
            if body[0] in "!^":
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


def _class_end(pattern: str, start: int) -> int:
    """Where the character class opened at ``start`` closes, or -1 if it does not."""
    j = start + 1
    if j < len(pattern) and pattern[j] in "!^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    return pattern.find("]", j)


def _entry_line(entry: Entry, top: Path) -> str:
    rel = os.path.relpath(entry.path, top) + ("/" if entry.kind == "dir" else "")
    size = _size(entry.size) if entry.kind == "file" else ""
    return f"{entry.kind:<5} {size:>9}  {rel}"


def _kind_name(kind: str) -> str:
    return {"file": "file", "link": "symbolic link", "other": "special file"}.get(kind, kind)


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"
