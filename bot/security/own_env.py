"""Keeping the daemon's own secrets out of reach of every process it starts.

Secrets reach PinClaw through its environment (``${NAME}`` in the config; under
systemd, ``EnvironmentFile=`` puts them there). Once the config is read they
are needed only in memory, so ``seal_process``:

- removes every variable holding a config secret from the environment, so no
  child inherits one (the shell tool's children get a scrubbed environment
  anyway; this covers everything else);
- overwrites those entries, name and value, in the process's initial
  environment block, which ``/proc/PID/environ`` keeps showing after ``unsetenv``;
- marks the process non-dumpable, so processes of the same user cannot read its
  ``/proc/PID/environ``, ``mem`` or ``maps``, nor attach a debugger (without
  ``CAP_SYS_PTRACE``), and no core dump holds its memory.

Secrets the config does not name are not known by value, so the environment
is also cut down to an allowlist of harmless variables (``HARMLESS`` and the
prefixes in ``HARMLESS_PREFIXES``, plus the names in ``security.shell_env_passthrough``)
before any child runs: whatever else the daemon inherited (a cloud key
exported in a login shell, a token in a service's environment) is removed and
wiped the same way, in the same pass.
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


HARMLESS = frozenset(
    """
    PATH HOME USER LOGNAME SHELL PWD TERM COLORTERM NO_COLOR TZ TMPDIR LANG LANGUAGE
    DISPLAY VIRTUAL_ENV SUDO_USER
    NOTIFY_SOCKET WATCHDOG_USEC WATCHDOG_PID LISTEN_FDS LISTEN_PID LISTEN_FDNAMES
    INVOCATION_ID JOURNAL_STREAM MAINPID RUNTIME_DIRECTORY STATE_DIRECTORY CACHE_DIRECTORY
    LOGS_DIRECTORY CONFIGURATION_DIRECTORY CREDENTIALS_DIRECTORY SYSTEMD_EXEC_PID
    http_proxy https_proxy all_proxy no_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY NO_PROXY
    SSL_CERT_FILE SSL_CERT_DIR REQUESTS_CA_BUNDLE CURL_CA_BUNDLE SSLKEYLOGFILE
    MPLCONFIGDIR MPLBACKEND
    """.split()  # noqa: SIM905 - a long list reads better as words
)
"""Variables the daemon keeps: where things are, locale, time zone, systemd's hand-over."""

HARMLESS_PREFIXES = ("LC_", "XDG_", "PINCLAW_", "PYTHON", "GPIOZERO_", "PIGPIO_", "LG_")
"""Families kept whole: locale, XDG folders, PinClaw's own, Python's and the GPIO libraries'."""


def seal_process(secrets: Iterable[str], keep: Iterable[str] = ()) -> list[str]:
    """Drop the variables that hold a secret and those not harmless (``keep`` is kept),
    wipe their first copy, turn dumping off.

    Returns the names of the variables removed. Every step is best effort: a
    failure is logged and the others still happen.
    """
    values = [value for value in secrets if len(value) >= 6]
    kept = HARMLESS | set(keep)
    names = [
        name
        for name, text in os.environ.items()
        if any(v in text for v in values)
        or (name not in kept and not name.startswith(HARMLESS_PREFIXES))
    ]
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
    """Zero the entries of ``names``, name and value, where the kernel placed the
    environment at exec: not even what was there shows."""
    with open("/proc/self/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    if len(fields) <= _ENV_END or not 0 < int(fields[_ENV_START]) < int(fields[_ENV_END]):
        # qemu-user's /proc/self/stat stops before env_start (and its /proc/self/mem
        # would be the emulator's memory): nothing to wipe where we cannot see it.
        raise OSError("/proc/self/stat does not say where the environment is")
    start, end = int(fields[_ENV_START]), int(fields[_ENV_END])
    with open("/proc/self/mem", "r+b", buffering=0) as memory:
        memory.seek(start)
        block = memory.read(end - start)
        offset = 0
        for entry in block.split(b"\0"):
            name, eq, _ = entry.partition(b"=")
            if eq and name.decode(errors="replace") in names:
                memory.seek(start + offset)
                memory.write(b"\0" * len(entry))
            offset += len(entry) + 1
