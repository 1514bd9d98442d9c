"""Hard links into forbidden places: a second name for a file the agent may not read.

A hard link is the same file under another name, so a link in the workspace to
``~/.ssh/id_rsa`` (unpacked from an archive, made by someone on the machine)
passes every check on its path. Hard links never cross file systems and every
one of them counts in the file's link count, so only files with more than one
link on the workspace's file systems can be such a name: the forbidden places
are searched once for those (``ForbiddenInodes``, kept for a few seconds), and
a file is refused when its inode is among them, or when that search could not
finish within its bounds and the file has other names.

The file tools check each file they open (``check_links``); the shell tool
looks through the workspace before each command (``links_in``) and hides what
it finds from the sandbox, or refuses to run without one.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

MAX_ENTRIES = 500_000
MAX_SECONDS = 5.0
MAX_WORKSPACE_ENTRIES = 200_000
_KEEP_S = 10.0


@dataclass(frozen=True, slots=True)
class LinkCheck:
    """Where else the file is (a forbidden path), or ``unchecked`` when the search gave up."""

    found: str = ""
    unchecked: bool = False


@dataclass(frozen=True, slots=True)
class ForbiddenInodes:
    """The multiply linked files in the forbidden places, by (device, inode): their paths."""

    paths: dict[tuple[int, int], str]
    complete: bool


_cache: dict[tuple[tuple[str, ...], tuple[int, ...]], tuple[float, ForbiddenInodes]] = {}
_lock = threading.Lock()


def check_links(info: os.stat_result, forbidden: Iterable[str], skip: Iterable[str]) -> LinkCheck:
    """Whether the opened file ``info`` is also a file in the ``forbidden`` places."""
    if not stat.S_ISREG(info.st_mode) or info.st_nlink <= 1:
        return LinkCheck()
    known = forbidden_inodes(forbidden, skip, {info.st_dev}, newer_than=info.st_ctime)
    found = known.paths.get((info.st_dev, info.st_ino), "")
    return LinkCheck(found=found, unchecked=not found and not known.complete)


def links_in(roots: Iterable[str], forbidden: Iterable[str]) -> tuple[list[str], bool]:
    """The files below ``roots`` that are hard links to forbidden files, and whether the
    look was complete (a workspace too large to look through, or forbidden places too
    large to search, leave it incomplete)."""
    roots = [os.path.realpath(root) for root in roots]
    linked: list[tuple[int, int, str]] = []
    seen, complete, changed = 0, True, 0.0
    for root in roots:
        stack = [root]
        while stack:
            folder = stack.pop()
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        seen += 1
                        if seen > MAX_WORKSPACE_ENTRIES:
                            complete = False
                            stack.clear()
                            break
                        try:
                            if entry.is_dir(follow_symlinks=False):
                                stack.append(entry.path)
                            elif entry.is_file(follow_symlinks=False):
                                info = entry.stat(follow_symlinks=False)
                                if info.st_nlink > 1:
                                    linked.append((info.st_dev, info.st_ino, entry.path))
                                    changed = max(changed, info.st_ctime)
                        except OSError:
                            continue
            except OSError:
                continue
    if not linked:
        return [], complete
    known = forbidden_inodes(forbidden, roots, {dev for dev, _, _ in linked}, newer_than=changed)
    found = [path for dev, ino, path in linked if (dev, ino) in known.paths]
    return found, complete and known.complete


def forbidden_inodes(
    places: Iterable[str], skip: Iterable[str], devices: set[int], *, newer_than: float = 0.0
) -> ForbiddenInodes:
    """The multiply linked files in ``places`` on ``devices`` (``skip`` left out).

    A search is kept for a few seconds, and used only when it began after
    ``newer_than`` (the change time of the files asked about: making a link
    changes it, so a search from before the link was made is never trusted).
    """
    key = (tuple(sorted(set(places))), tuple(sorted(devices)))
    began = time.time()
    with _lock:
        cached = _cache.get(key)
        if cached is not None and cached[0] > newer_than and began - cached[0] < _KEEP_S:
            return cached[1]
    found = _search(list(key[0]), {os.path.realpath(s) for s in skip}, devices)
    with _lock:
        if len(_cache) > 32:
            _cache.clear()
        _cache[key] = (began, found)
    return found


def _search(places: list[str], skip: set[str], devices: set[int]) -> ForbiddenInodes:
    paths: dict[tuple[int, int], str] = {}
    deadline, seen = time.monotonic() + MAX_SECONDS, 0
    stack: list[str] = []
    for place in places:
        try:
            top = os.lstat(place)
        except OSError:
            continue
        if top.st_dev not in devices:
            continue
        if stat.S_ISREG(top.st_mode) and top.st_nlink > 1:
            paths.setdefault((top.st_dev, top.st_ino), place)
        elif stat.S_ISDIR(top.st_mode) and os.path.realpath(place) not in skip:
            stack.append(place)
    while stack:
        folder = stack.pop()
        try:
            entries = os.scandir(folder)
        except OSError:  # a folder PinClaw may not list holds nothing it could link to itself
            continue
        with entries:
            for entry in entries:
                seen += 1
                if seen > MAX_ENTRIES or (seen % 4096 == 0 and time.monotonic() > deadline):
                    return ForbiddenInodes(paths, complete=False)
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                    if not is_dir and not entry.is_file(follow_symlinks=False):
                        continue
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if info.st_dev not in devices:
                    continue  # another file system (a mount): no link can lead there
                if is_dir:
                    if entry.path not in skip:
                        stack.append(entry.path)
                elif info.st_nlink > 1:
                    paths.setdefault((info.st_dev, info.st_ino), entry.path)
    return ForbiddenInodes(paths, complete=True)
