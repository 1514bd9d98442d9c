"""Race-safe file I/O through directory file descriptors.

Every function here reaches its target by opening the folders on the way one
component at a time, each relative to the previous one's descriptor and with
``O_NOFOLLOW``: a symbolic link anywhere on the way, including one swapped in
after the path was checked, makes the open fail instead of being followed. The
final name is then opened, replaced or listed relative to its folder's
descriptor, so what is read or written is exactly what the walk reached.

Paths given here must already be absolute and free of ``.``, ``..`` and
symbolic links (``PathGuard`` resolves and judges them first); this module only
makes sure nothing changed underneath in between.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Kind = Literal["file", "dir", "link", "other"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO for reading must not hang the worker thread.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO for writing must not hang either.
_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class LinkOnTheWay(Exception):
    """A symbolic link stood where the checked path had a real folder or file."""

    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


class TooLarge(Exception):
    """A file is bigger than the caller's limit."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"{size} > {limit}")
        self.size = size
        self.limit = limit


class NotRegularFile(Exception):
    """The name is a device, socket or pipe rather than an ordinary file."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One thing in a folder: where it is, what it is, and its size in bytes."""

    path: Path
    kind: Kind
    size: int


def open_dir(
    path: str,
    *,
    create_below: str | None = None,
    before_mkdir: Callable[[str], None] | None = None,
) -> int:
    """Open the folder ``path`` from ``/`` down without following any link; return its fd.

    Missing folders strictly below ``create_below`` are created, each one passed
    to ``before_mkdir`` first (which may raise to refuse it).
    """
    fd = os.open("/", _DIR_FLAGS)
    current = "/"
    try:
        for name in path.split("/"):
            if not name:
                continue
            if name in (".", ".."):
                raise ValueError(f"unresolved component in {path!r}")
            child = os.path.join(current, name)
            try:
                next_fd = _open_child_dir(fd, name, child)
            except FileNotFoundError:
                if create_below is None or not _strictly_below(child, create_below):
                    raise
                if before_mkdir is not None:
                    before_mkdir(child)
                # Made meanwhile by someone else: the open below still checks it.
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
                next_fd = _open_child_dir(fd, name, child)
            os.close(fd)
            fd, current = next_fd, child
    except BaseException:
        os.close(fd)
        raise
    return fd


Vet = Callable[[os.stat_result], None]
"""Looks at an opened file before it is used; raises to refuse it (e.g. a hard link)."""


def read_file(dir_fd: int, name: str, where: str, max_bytes: int, vet: Vet | None = None) -> bytes:
    """The bytes of the ordinary file ``name`` in ``dir_fd``, refusing more than ``max_bytes``."""
    fd = _open_final(dir_fd, name, where)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder")
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(where)
        if vet is not None:
            vet(info)
        if info.st_size > max_bytes:
            raise TooLarge(info.st_size, max_bytes)
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, min(1 << 20, max_bytes + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # the file grew after fstat
                raise TooLarge(total, max_bytes)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_file(dir_fd: int, name: str, data: bytes) -> bool:
    """Atomically replace (or create) ``name`` in ``dir_fd`` with ``data``; True if created.

    The bytes go to a new temporary file in the same folder, which then replaces
    the name in one step: a reader sees the old or the new content, never half.
    """
    try:
        old = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None and stat.S_ISDIR(old.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a folder")
    temp = f".pinclaw-{secrets.token_hex(6)}.tmp"
    fd = os.open(temp, _TEMP_FLAGS, 0o666, dir_fd=dir_fd)
    try:
        try:
            if old is not None and stat.S_ISREG(old.st_mode):
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        # If a link was swapped in at ``name`` meanwhile, this replaces the link itself.
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise
    # Some file systems cannot sync a folder; the data itself is synced.
    with contextlib.suppress(OSError):
        os.fsync(dir_fd)
    return old is None


def append_file(dir_fd: int, name: str, where: str, data: bytes, vet: Vet | None = None) -> bool:
    """Append ``data`` to the ordinary file ``name`` in ``dir_fd`` (made 0600 if missing).

    Returns True if the file was created. A link at ``name`` is not followed.
    """
    try:
        fd = os.open(name, _APPEND_FLAGS | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd)
        created = True
    except FileExistsError:
        created = False
        try:
            fd = os.open(name, _APPEND_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise LinkOnTheWay(where) from None
            raise
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder")
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(where)
        if vet is not None:
            vet(info)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    return created


def stat_entry(dir_fd: int, name: str, path: str) -> Entry:
    """What ``name`` in ``dir_fd`` is, without following it if it is a link."""
    return _entry(path, os.stat(name, dir_fd=dir_fd, follow_symlinks=False))


def list_dir(dir_fd: int, path: str) -> list[Entry]:
    """The entries of the folder open as ``dir_fd`` (called ``path``), sorted by name."""
    entries = []
    with os.scandir(dir_fd) as scan:
        for item in scan:
            try:
                info = item.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed while listing
            entries.append(_entry(os.path.join(path, item.name), info))
    entries.sort(key=lambda e: e.path.name)
    return entries


def walk(
    dir_fd: int, path: str, *, max_depth: int, prune: Callable[[str], bool]
) -> Iterator[Entry]:
    """Entries below the folder open as ``dir_fd``, depth first in name order.

    Links are reported but never followed; a folder that turns into a link
    before it is entered is skipped. ``prune(path)`` drops an entry and all
    below it. ``dir_fd`` stays open; the descriptors opened here are closed
    even when the caller stops early.
    """
    for entry in list_dir(dir_fd, path):
        child = str(entry.path)
        if prune(child):
            continue
        yield entry
        if entry.kind != "dir" or max_depth <= 1:
            continue
        try:
            sub = os.open(entry.path.name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError:
            continue  # vanished, or replaced by a link: do not follow it
        try:
            yield from walk(sub, child, max_depth=max_depth - 1, prune=prune)
        finally:
            os.close(sub)


def _open_child_dir(fd: int, name: str, where: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(fd, name):
            raise LinkOnTheWay(where) from None
        raise


def _open_final(dir_fd: int, name: str, where: str) -> int:
    try:
        return os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkOnTheWay(where) from None
        raise


def _is_link(fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _strictly_below(path: str, top: str) -> bool:
    return path != top and path.startswith(top.rstrip("/") + "/")


def _entry(path: str, info: os.stat_result) -> Entry:
    mode = info.st_mode
    kind: Kind
    if stat.S_ISLNK(mode):
        kind = "link"
    elif stat.S_ISDIR(mode):
        kind = "dir"
    elif stat.S_ISREG(mode):
        kind = "file"
    else:
        kind = "other"
    return Entry(Path(path), kind, info.st_size if kind == "file" else 0)
