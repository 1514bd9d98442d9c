"""One daemon per data folder: an exclusive lock on ``daemon.lock`` inside it.

``pinclaw run`` takes it before anything else and holds it until it exits (the
kernel lets go of it even after ``kill -9``), so a second daemon on the same
state cannot start and fire every cron job twice. The file holds the owner's
pid, for the message the second one prints. Commands that only read or queue
work for the daemon (``cron list``, ``cron add``...) do not take it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from bot.core.errors import UserError

LOCK_FILE = "daemon.lock"


@contextlib.contextmanager
def data_dir_lock(data_dir: Path, *, purpose: str = "run") -> Iterator[None]:
    """Hold the data folder's lock for the ``with`` block; ``UserError`` if another has it."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = data_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            what = "cannot start" if purpose == "run" else f"cannot {purpose}"
            raise UserError(
                f"{what}: a PinClaw daemon (pid {owner}) is already running with {data_dir}; "
                "stop it first (systemctl --user stop pinclaw, or Ctrl-C where it runs)"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing lets go of the lock


def held_elsewhere(data_dir: Path) -> bool:
    """Whether a daemon holds the data folder's lock now (``pinclaw chat`` beside it)."""
    try:
        fd = os.open(data_dir / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False  # no lock file: no daemon has run here
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing lets go of a lock taken here
    return False
