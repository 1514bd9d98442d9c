"""Talking to systemd from ``pinclaw run``: readiness, the watchdog, status lines.

Under a ``Type=notify`` unit systemd passes ``$NOTIFY_SOCKET``, an ``AF_UNIX``
datagram socket (a leading ``@`` means the abstract namespace); each message is
one datagram of ``KEY=value`` lines. No library is needed and nothing here
raises: outside systemd every call is a no-op that returns False.

``WatchdogSec=`` in the unit sets ``$WATCHDOG_USEC``; the daemon must then send
``WATCHDOG=1`` more often than that. The pings come from a task on the event
loop, so a loop that freezes stops pinging and systemd restarts the service.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Iterable, Sequence

from bot.core.channel import ChannelStatus

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 60.0
"""How long ``pinclaw run`` waits for its channels before reporting ready anyway."""


def notify(message: str) -> bool:
    """Send ``message`` (``READY=1``, ``WATCHDOG=1``...) to systemd; False when not under it."""
    address = os.environ.get("NOTIFY_SOCKET", "")
    if address.startswith("@"):
        address = "\0" + address[1:]
    elif not address.startswith("/"):
        return False  # unset, or a transport we do not speak (vsock)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.setblocking(False)  # a full queue must not stall the event loop
            sock.connect(address)
            sock.send(message.encode())
    except OSError as exc:
        log.debug("cannot notify systemd at %s: %s", address.lstrip("\0"), exc)
        return False
    return True


def watchdog_interval() -> float | None:
    """Seconds between watchdog pings (half of ``$WATCHDOG_USEC``), or None if not asked.

    ``$WATCHDOG_PID``, when set, names the process the watchdog is meant for; any
    other process (a child that inherited the environment) must not ping.
    """
    pid = os.environ.get("WATCHDOG_PID", "").strip()
    if pid and pid != str(os.getpid()):
        return None
    try:
        usec = int(os.environ.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    return usec / 2 / 1_000_000 if usec > 0 else None


async def watchdog(interval_s: float, status: Callable[[], str] | None = None) -> None:
    """Send ``WATCHDOG=1`` every ``interval_s`` until cancelled, with ``STATUS=`` on changes."""
    shown = ""
    while True:
        message = "WATCHDOG=1"
        text = _status(status)
        if text and text != shown:
            message, shown = f"{message}\nSTATUS={text}", text
        notify(message)
        await asyncio.sleep(interval_s)


async def ready_when_connected(
    channels: Sequence[ChannelStatus],
    status: Callable[[], str] | None = None,
    timeout_s: float = READY_TIMEOUT_S,
) -> bool:
    """Wait up to ``timeout_s`` for every channel to connect, then send ``READY=1``.

    READY goes out even if some channel is still down (logged), so that a Pi
    without network is not killed by the start timeout: the channels keep
    reconnecting on their own. Returns whether every channel was connected.
    """
    async with asyncio.TaskGroup() as group:
        waits = [group.create_task(s.wait_connected(timeout_s)) for s in channels]
    connected = all(wait.result() for wait in waits)
    if not connected:
        log.warning(
            "not connected after %.0f s: %s; telling systemd PinClaw is ready anyway",
            timeout_s,
            ", ".join(f"{s.name} ({s.state})" for s in channels if s.state != "connected"),
        )
    text = _status(status)
    notify("READY=1" + (f"\nSTATUS={text}" if text else ""))
    return connected


def status_text(channels: Iterable[ChannelStatus], jobs: int | None = None) -> str:
    """A one-line summary for ``systemctl status``: "telegram connected, 3 jobs"."""
    parts = [f"{s.name} {s.state}" for s in channels]
    if jobs is not None:
        parts.append(f"{jobs} job{'' if jobs == 1 else 's'}")
    return ", ".join(parts)


def _status(status: Callable[[], str] | None) -> str:
    if status is None:
        return ""
    try:
        return status()
    except Exception:  # a broken status line must never stop the watchdog
        log.exception("cannot describe the daemon's state for systemd")
        return ""
