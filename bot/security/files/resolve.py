"""Resolving a path the way the kernel would: every symbolic link followed, nothing opened.

``PathGuard`` judges the result; the I/O in ``bot.security.files.dirfd`` then makes
sure the path did not change between this resolution and its use.
"""

from __future__ import annotations

import errno
import os
import stat

MAX_LINK_HOPS = 40
"""As many links as Linux follows in one lookup before giving up with ELOOP."""


class Unresolvable(Exception):
    """Following the links loops, or leads to a path too long to use."""


def resolve(path: str) -> tuple[str, bool]:
    """``path`` (absolute) with every link followed as the kernel would, and whether it exists.

    Past the first missing component the rest is applied lexically.
    """
    pending = list(reversed(path.split("/")))
    resolved = "/"
    exists = True
    hops = 0
    while pending:
        name = pending.pop()
        if name in ("", "."):
            continue
        if name == "..":
            resolved = os.path.dirname(resolved)
            continue
        candidate = os.path.join(resolved, name)
        if exists:
            try:
                mode = os.lstat(candidate).st_mode
            except OSError as exc:
                if exc.errno == errno.ENAMETOOLONG:
                    raise Unresolvable("its symbolic links lead to a path too long") from None
                exists = False
            else:
                if stat.S_ISLNK(mode):
                    hops += 1
                    if hops > MAX_LINK_HOPS:
                        raise Unresolvable("its symbolic links loop")
                    try:
                        target = os.readlink(candidate)
                    except OSError:  # removed since lstat: treat as missing
                        exists = False
                        resolved = candidate
                        continue
                    if target.startswith("/"):
                        resolved = "/"
                    pending.extend(reversed(target.split("/")))
                    continue
        resolved = candidate
    return resolved, exists


def settled(path: str) -> str:
    """``path`` resolved for configuration (a root, a forbidden place); never raises."""
    try:
        return resolve(path)[0]
    except Unresolvable:
        return os.path.normpath(path)
