"""Files PinClaw knows came from outside: read one, and the turn has read untrusted content.

A file the owner put in the workspace is theirs. A file PinClaw wrote or
changed while a turn held untrusted content (a web page, an MCP result, ...),
or that a command using the network changed, is recorded here with what the
turn had read; reading it later, in any turn, taints that turn the same way.
Files are recorded by their resolved path; when a command changed many files
(a clone, an unpacked archive), the folders that hold them are recorded.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterable
from pathlib import Path

from bot.store.db import Database

MIGRATIONS = [
    "CREATE TABLE untrusted_files (path TEXT PRIMARY KEY, source TEXT NOT NULL, at REAL NOT NULL);",
]
MAX_SCAN = 50_000
MAX_FILES = 200
_SKIP = frozenset({".git"})


class Provenance:
    """The record of untrusted files in the workspace (and the extra roots)."""

    def __init__(self, db: Database, roots: Iterable[Path]) -> None:
        self._db = db
        self._roots = [os.path.realpath(root) for root in roots]
        self._ready = False

    async def setup(self) -> None:
        """Create the table if needed."""
        await self._db.migrate("untrusted_files", MIGRATIONS)
        self._ready = True

    async def mark(self, paths: Iterable[str], source: str) -> None:
        """Record ``paths`` (absolute, resolved) as holding content from ``source``."""
        rows = [(path, source, time.time()) for path in dict.fromkeys(paths) if path]
        if not rows:
            return
        if not self._ready:
            await self.setup()
        async with self._db.write() as conn:
            await conn.executemany(
                "INSERT INTO untrusted_files VALUES (?, ?, ?) ON CONFLICT (path) "
                "DO UPDATE SET source = excluded.source, at = excluded.at",
                rows,
            )

    async def source_of(self, path: str) -> str:
        """What the file (or anything below the folder) ``path`` came from ("" if known clean)."""
        if not self._ready:
            await self.setup()
        rows = list(
            await self._db.conn.execute_fetchall(
                "SELECT path, source FROM untrusted_files WHERE path = ? OR ? LIKE "
                "replace(replace(path, '%', '\\%'), '_', '\\_') || '/%' ESCAPE '\\' "
                "OR path LIKE replace(replace(?, '%', '\\%'), '_', '\\_') || '/%' ESCAPE '\\' "
                "LIMIT 1",
                (path, path, path),
            )
        )
        if not rows:
            return ""
        return f"{self.shown(str(rows[0][0]))} (from {rows[0][1]})"

    def resolve(self, raw: str, workspace: Path) -> str:
        """``raw`` (relative to the workspace) as an absolute path with links resolved."""
        return os.path.realpath(os.path.join(workspace, os.path.expanduser(raw)))

    def shown(self, path: str) -> str:
        """``path`` relative to its root when inside one."""
        for root in self._roots:
            if path == root or path.startswith(root + "/"):
                return os.path.relpath(path, root)
        return path

    async def changed_since(self, since: float) -> list[str]:
        """Files in the roots changed at or after ``since`` (folders when there are many)."""
        return await asyncio.to_thread(self._changed, since)

    def _changed(self, since: float) -> list[str]:
        found: list[str] = []
        seen = 0
        for root in self._roots:
            stack = [root]
            while stack:
                folder = stack.pop()
                try:
                    entries = list(os.scandir(folder))
                except OSError:
                    continue
                for entry in entries:
                    seen += 1
                    if seen > MAX_SCAN:  # too much to look at: the whole root is suspect
                        return [*_folded(found, self._roots), root]
                    try:
                        info = entry.stat(follow_symlinks=False)
                        if entry.is_dir(follow_symlinks=False):
                            if entry.name not in _SKIP:
                                stack.append(entry.path)
                            continue
                    except OSError:
                        continue
                    if max(info.st_mtime, info.st_ctime) >= since:
                        found.append(entry.path)
        return _folded(found, self._roots)


def _folded(paths: list[str], roots: list[str]) -> list[str]:
    """``paths``, or their top folders below the roots when there are too many to list."""
    if len(paths) <= MAX_FILES:
        return paths
    tops: dict[str, None] = {}
    for path in paths:
        root = next((r for r in roots if path.startswith(r + "/")), None)
        if root is None:
            continue
        first = path[len(root) + 1 :].split("/", 1)[0]
        tops[os.path.join(root, first)] = None
    return list(tops)
