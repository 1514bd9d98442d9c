"""Delivery that users can trust: split at platform limits, retry what is transient.

``split_rendered`` cuts a reply written in PinClaw's markdown subset into pieces
on paragraph, then line, then word boundaries; a code fence that must be cut is
closed at the end of one piece and reopened at the start of the next. Each
piece is rendered for the platform and measured *after* rendering; a piece that
grew past the limit (HTML escaping, mrkdwn links) is split again, so nothing is
silently dropped. ``send_with_retries`` honours a platform's ``retry_after`` and
backs off on network errors, and says why when it finally gives up.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from bot.channel import DeliveryError

log = logging.getLogger(__name__)

T = TypeVar("T")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")


def split_markdown(text: str, limit: int) -> list[str]:
    """Cut ``text`` into pieces of at most ``limit`` characters on natural boundaries."""
    if limit < 16:
        raise ValueError("limit too small to split sensibly")
    pieces: list[str] = []
    current = ""
    for block in _blocks(text):
        for part in _fit(block, limit):
            joined = f"{current}\n\n{part}" if current else part
            if len(joined) <= limit:
                current = joined
            else:
                pieces.append(current)
                current = part
    if current or not pieces:
        pieces.append(current)
    return pieces


def split_rendered(
    text: str,
    limit: int,
    render: Callable[[str], str] = lambda s: s,
    measure: Callable[[str], int] = len,
) -> list[str]:
    """Split, render each piece, and split again any piece that outgrew ``limit``."""
    out: list[str] = []
    for piece in split_markdown(text, limit):
        out.extend(_render_fitting(piece, limit, render, measure))
    return out


def _render_fitting(
    piece: str, limit: int, render: Callable[[str], str], measure: Callable[[str], int]
) -> list[str]:
    rendered = render(piece)
    size = measure(rendered)
    if size <= limit:
        return [rendered]
    smaller = max(16, min(len(piece) - 1, int(len(piece) * limit / size * 0.9)))
    if smaller >= len(piece):
        raise ValueError("a piece cannot be rendered within the limit")
    out: list[str] = []
    for part in split_markdown(piece, smaller):
        out.extend(_render_fitting(part, limit, render, measure))
    return out


def _blocks(text: str) -> list[str]:
    """Paragraphs, with each code fence kept whole as one block."""
    blocks: list[str] = []
    lines: list[str] = []
    fence: str | None = None
    for line in text.replace("\r\n", "\n").split("\n"):
        match = _FENCE.match(line)
        if fence is None and match:
            if lines:
                blocks.append("\n".join(lines))
            lines, fence = [line], match.group(1)
        elif fence is not None:
            lines.append(line)
            if match and match.group(1).startswith(fence) and not match.group(2).strip():
                blocks.append("\n".join(lines))
                lines, fence = [], None
        elif not line.strip():
            if lines:
                blocks.append("\n".join(lines))
            lines = []
        else:
            lines.append(line)
    if lines:
        blocks.append("\n".join(lines))
    return [b for b in blocks if b.strip()]


def _fit(block: str, limit: int) -> list[str]:
    """A block as pieces within ``limit``: fences reopened, then lines, then words."""
    if len(block) <= limit:
        return [block]
    lines = block.split("\n")
    opener = _FENCE.match(lines[0])
    if opener and len(lines) > 1:
        closing = lines[-1] if _FENCE.match(lines[-1]) else opener.group(1)
        body = lines[1:-1] if _FENCE.match(lines[-1]) else lines[1:]
        frame = len(lines[0]) + len(closing) + 2
        room = max(16, limit - frame)
        return [f"{lines[0]}\n{part}\n{closing}" for part in _pack(body, room)]
    return _pack(lines, limit)


def _pack(lines: list[str], limit: int) -> list[str]:
    pieces: list[str] = []
    current = ""
    for line in lines:
        for part in _words(line, limit):
            joined = f"{current}\n{part}" if current else part
            if len(joined) <= limit:
                current = joined
            else:
                if current:
                    pieces.append(current)
                current = part
    if current:
        pieces.append(current)
    return pieces


def _words(line: str, limit: int) -> list[str]:
    if len(line) <= limit:
        return [line]
    parts: list[str] = []
    current = ""
    for whole in line.split(" "):
        word = whole
        while len(word) > limit:
            if current:
                parts.append(current)
                current = ""
            parts.append(word[:limit])
            word = word[limit:]
        joined = f"{current} {word}" if current else word
        if len(joined) <= limit:
            current = joined
        else:
            parts.append(current)
            current = word
    if current:
        parts.append(current)
    return parts


@dataclass(frozen=True, slots=True)
class Retry:
    """How to retry a failed send: after ``after_s`` seconds (a platform's retry_after),
    or with backoff when ``after_s`` is None."""

    after_s: float | None = None


Classifier = Callable[[BaseException], Retry | None]


async def send_with_retries(
    attempt: Callable[[], Awaitable[T]],
    classify: Classifier,
    *,
    what: str,
    attempts: int = 5,
    base_delay_s: float = 1.0,
    max_delay_s: float = 60.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Run ``attempt`` until it succeeds; retry what ``classify`` calls transient.

    Raises ``DeliveryError`` naming ``what`` and the last reason when it gives up.
    """
    for number in range(1, attempts + 1):
        try:
            return await attempt()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            retry = classify(exc)
            reason = _reason(exc)
            if retry is None or number == attempts:
                raise DeliveryError(f"could not send {what}: {reason}") from exc
            delay = retry.after_s
            if delay is None:
                delay = min(max_delay_s, base_delay_s * 2 ** (number - 1)) * random.uniform(
                    0.8, 1.2
                )
            log.warning("sending %s failed (%s); retry %d in %.1f s", what, reason, number, delay)
            await sleep(delay)
    raise AssertionError("unreachable")


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
