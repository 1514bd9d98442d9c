"""Keeping the daemon's own secrets out of reach of every process it starts.

Secrets reach PinClaw through its environment (``${NAME}`` in the config; under
systemd, ``EnvironmentFile=`` puts them there). Once the config is read they
are needed only in memory, so ``seal_process``:

- removes every variable holding a config secret from the environment, so no
  child inherits one (the shell tool's children get a scrubbed environment
  anyway; this covers everything else);
- overwrites those values in the process's initial environment block, which
  ``/proc/PID/environ`` keeps showing after ``unsetenv``;
- marks the process non-dumpable, so processes of the same user cannot read its
  ``/proc/PID/environ``, ``mem`` or ``maps``, nor attach a debugger (without
  ``CAP_SYS_PTRACE``), and no core dump holds its memory.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Iterable

log = logging.getLogger(__name__)

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3
_ENV_START = 50 - 3  # /proc/self/stat fields after "pid (comm)", 0-based: env_start
_ENV_END = 51 - 3


def seal_process(secrets: Iterable[str]) -> list[str]:
    """Drop the variables that hold a secret, wipe their first copy, turn dumping off.

    Returns the names of the variables removed. Every step is best effort: a
    failure is logged and the others still happen.
    """
    values = [value for value in secrets if len(value) >= 6]
    names = [name for name, text in os.environ.items() if any(v in text for v in values)]
    for name in names:
        os.environ.pop(name, None)  # also unsetenv(): children never see it
    if names:
        try:
            _wipe_initial_environment(set(names))
        except OSError as exc:
            log.debug("could not wipe the initial environment: %s", exc)
    if not set_not_dumpable():
        log.warning("could not mark the process non-dumpable; its memory stays readable")
    return names


def set_not_dumpable() -> bool:
    """``prctl(PR_SET_DUMPABLE, 0)``; False when the kernel or libc refused."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def is_dumpable() -> bool:
    """Whether the process can still be dumped (and read by its user)."""
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)) != 0


def _wipe_initial_environment(names: set[str]) -> None:
    """Zero the values of ``names`` where the kernel placed the environment at exec."""
    with open("/proc/self/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    start, end = int(fields[_ENV_START]), int(fields[_ENV_END])
    with open("/proc/self/mem", "r+b", buffering=0) as memory:
        memory.seek(start)
        block = memory.read(end - start)
        offset = 0
        for entry in block.split(b"\0"):
            name, eq, value = entry.partition(b"=")
            if eq and name.decode(errors="replace") in names:
                memory.seek(start + offset + len(name) + 1)
                memory.write(b"\0" * len(value))
            offset += len(entry) + 1
