"""The audit log: every tool call and its decision, as JSON lines in a hash chain.

Each entry records who asked, which tool with which (redacted) arguments, the
decision (allowed, approved, denied, blocked) and why, how long it ran and how
it ended, plus ``prev`` (the previous entry's hash) and ``hash`` (SHA-256 over
``prev`` and the entry itself). Changing, removing or reordering a line breaks
the chain, which ``verify`` (``pinclaw audit verify``) reports. Appends take an
exclusive file lock, so the daemon and a ``pinclaw agent`` run at the same time
keep one chain.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GENESIS = "0" * 64


def entry_hash(prev: str, entry: Mapping[str, Any]) -> str:
    """The chain hash of ``entry`` (without its own ``hash`` field) following ``prev``."""
    body = {k: v for k, v in entry.items() if k != "hash"}
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(f"{prev}\n{canonical}".encode()).hexdigest()


class AuditLog:
    """Appends chained entries to one file (created readable by its owner only)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    async def append(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        """Add ``entry`` to the chain; return it as written (with ``seq``, ``prev``, ``hash``)."""
        return await asyncio.to_thread(self._append, dict(entry))

    def _append(self, entry: dict[str, Any]) -> dict[str, Any]:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "r+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                last = _last_entry(handle)
                entry["seq"] = int(last.get("seq", 0)) + 1 if last else 1
                entry["prev"] = str(last.get("hash", GENESIS)) if last else GENESIS
                entry["hash"] = entry_hash(entry["prev"], entry)
                line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n"
                handle.write(line.encode())
                handle.flush()
                os.fsync(handle.fileno())
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        return entry


def _last_entry(handle: Any) -> dict[str, Any] | None:
    """The last complete line of the file, parsed (None for an empty file)."""
    end = handle.seek(0, os.SEEK_END)
    if end == 0:
        return None
    size = 4096
    while True:
        start = max(0, end - size)
        handle.seek(start)
        chunk = handle.read(end - start)
        lines = chunk.rstrip(b"\n").split(b"\n")
        if len(lines) > 1 or start == 0:
            with contextlib.suppress(ValueError):
                parsed: dict[str, Any] = json.loads(lines[-1])
                return parsed
            return None
        size *= 2


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """Whether the chain holds; where and how it breaks when it does not."""

    ok: bool
    entries: int
    line: int = 0
    problem: str = ""


def verify(path: Path) -> VerifyResult:
    """Check every entry's hash and link; report the first line where the chain breaks."""
    prev, count = GENESIS, 0
    for number, raw in _lines(path):
        try:
            entry = json.loads(raw)
        except ValueError:
            return VerifyResult(False, count, number, "the line is not valid JSON")
        if not isinstance(entry, dict):
            return VerifyResult(False, count, number, "the line is not an entry")
        if entry.get("prev") != prev:
            return VerifyResult(False, count, number, "it does not follow the previous entry")
        if entry.get("hash") != entry_hash(prev, entry):
            return VerifyResult(False, count, number, "its content does not match its hash")
        prev, count = str(entry["hash"]), count + 1
    return VerifyResult(True, count)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open(encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            if raw.strip():
                yield number, raw
