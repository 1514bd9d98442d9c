"""The text of ``/status``: uptime, model, each channel's connection and this chat's state."""

from __future__ import annotations

import time
from collections.abc import Sequence

from bot.core.channel import ChannelStatus
from bot.core.version import pinclaw_version


def describe_status(
    *,
    started: float,
    model: str,
    channels: Sequence[ChannelStatus],
    running: bool,
    waiting: int,
    now: float | None = None,
) -> str:
    """A short report a person can read on a phone."""
    now = time.time() if now is None else now
    lines = [f"PinClaw {pinclaw_version()}, up {_duration(now - started)}", f"Model: {model}"]
    for status in channels:
        state = status.state + (f" ({status.detail})" if status.detail else "")
        heard = (
            f"; last message {_duration(now - status.last_inbound_at)} ago"
            if status.last_inbound_at
            else "; no messages yet"
        )
        lines.append(f"- {status.name}: {state}{heard}")
    chat = "answering" if running else "idle"
    if waiting:
        chat += f", {waiting} message(s) waiting"
    lines.append(f"This chat: {chat}")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"
