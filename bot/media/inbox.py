"""The inbox: every document people send is saved in the workspace, for the file tools.

Files go to ``<workspace>/<[media] inbox_dir>/`` under the day they were sent and
a safe form of their name (``inbox/2026-11-28-list.txt``): no folder parts, no
leading dot, no control or shell-awkward characters, at most ``NAME_BYTES`` long.
A file is never overwritten: a second ``list.txt`` that day becomes
``2026-11-28-list-2.txt``, unless its bytes are the same as the first (a turn
answered again after a restart saves nothing new). Each saved file is recorded
as untrusted (``bot.security.files.provenance``), so a later turn that reads it with a
file tool has read untrusted content.
"""

from __future__ import annotations

import asyncio
import os
import re
import unicodedata
from datetime import datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.security.files.provenance import Provenance

NAME_BYTES = 120  # of the name after the date: well under any file system's 255
MAX_COPIES = 1000
_UNSAFE = re.compile(r'[\x00-\x1f\x7f/\\:*?"<>|\s]+')


def safe_name(name: str) -> str:
    """``name`` fit to be a file name: its last path part, awkward characters as "_",
    no leading dots, cut to ``NAME_BYTES`` (keeping a short suffix); "document" if empty."""
    name = unicodedata.normalize("NFC", name).replace("\\", "/").rsplit("/", 1)[-1]
    name = _UNSAFE.sub("_", name).lstrip("._-").rstrip("._")
    if not name:
        return "document"
    stem, dot, suffix = name.rpartition(".")
    if not dot or not stem or len(suffix.encode()) > 16:
        stem, suffix = name, ""
    room = NAME_BYTES - len(suffix.encode()) - (1 if suffix else 0)
    stem = stem.encode()[:room].decode("utf-8", "ignore").rstrip("._") or "document"
    return f"{stem}.{suffix}" if suffix else stem


class Inbox:
    """Saves documents under the workspace and records them as untrusted."""

    def __init__(
        self,
        workspace: Path,
        folder: str,
        timezone: tzinfo,
        provenance: Provenance | None = None,
    ) -> None:
        self._workspace = Path(os.path.abspath(workspace))
        self._folder = self._workspace / os.path.expanduser(folder)
        # A folder inside the workspace must stay there: the agent could swap it for a link.
        self._inside = not os.path.relpath(self._folder, self._workspace).startswith("..")
        self._timezone = timezone
        self._provenance = provenance

    async def save(self, name: str, data: bytes, when: float, source: str) -> str:
        """Save ``data`` sent at ``when`` (a timestamp) as ``name``; the path the file tools
        take (relative to the workspace when inside it). ``source`` says where it came from."""
        day = datetime.fromtimestamp(when, self._timezone).strftime("%Y-%m-%d")
        path, real = await asyncio.to_thread(self._write, f"{day}-{safe_name(name)}", data)
        if self._provenance is not None:
            await self._provenance.mark([real], source)
        return path

    def _write(self, name: str, data: bytes) -> tuple[str, str]:
        """Write a new file (or find the same bytes saved before): its path as shown, and
        resolved."""
        self._folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self._inside and not _within(self._folder, self._workspace):
            raise OSError(f"{self._folder} leads outside the workspace (a symbolic link?)")
        stem, dot, suffix = name.rpartition(".")
        if not dot:
            stem, suffix = name, ""  # "2026-11-28-README": no suffix to keep
        for number in range(1, MAX_COPIES + 1):
            candidate = name if number == 1 else f"{stem}-{number}{dot}{suffix}"
            path = os.path.join(self._folder, candidate)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            except FileExistsError:
                if _holds(path, data):
                    return self._shown(path), os.path.realpath(path)
                continue
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
            except OSError:
                os.unlink(path)  # no half-written copy left behind (a full disk)
                raise
            return self._shown(path), os.path.realpath(path)
        raise OSError(f"{MAX_COPIES} files named like {name} are in the inbox already")

    def _shown(self, path: str) -> str:
        """``path`` relative to the workspace when inside it."""
        shown = os.path.relpath(path, self._workspace)
        return path if shown.startswith("..") else shown


def _holds(path: str, data: bytes) -> bool:
    """Whether the file at ``path`` holds exactly ``data``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)  # a link planted there is not read
    except OSError:
        return False
    with os.fdopen(fd, "rb") as existing:
        return os.fstat(fd).st_size == len(data) and existing.read() == data


def _within(folder: Path, workspace: Path) -> bool:
    """Whether ``folder``, links resolved, is inside ``workspace`` (links resolved)."""
    real, root = os.path.realpath(folder), os.path.realpath(workspace)
    return os.path.commonpath([real, root]) == root
