"""Delivery that users can trust: split at platform limits, retry what is transient.

``split_markdown`` cuts a reply written in PinClaw's markdown subset into pieces on
paragraph, then line, then word boundaries, reading fences, headings, bullets and
inline markup exactly as ``bot.core.markdown`` renders them:

- a code fence that must be cut is closed at the end of one piece and reopened at
  the start of the next; a code line longer than a piece is cut too, and every
  piece holding a part of it is such a closed fence;
- a fence opener whose opening and closing lines would fill more than half a piece
  (three backticks and a long word on one line) is ordinary text, and so is the
  following code up to the next fence line; a closing line that long ends its fence
  with the opener's backticks and is itself sent as text (a line with more than a
  language after the backticks, like a JSON object, is text anyway, as rendered);
- a line longer than a piece is cut at a space outside inline markup if there is
  one, else at any space, else between characters (not before a combining mark);
  a part that would read as a fence, heading, bullet or fence end of its own starts
  with a zero-width space (U+200B), so no text ever turns into markup and vanishes.

Each piece is rendered for the platform and measured *after* rendering; a piece that
grew past the limit (HTML escaping, mrkdwn links) is split again with a budget at
least a tenth smaller, in a loop, so nothing recurses and nothing is dropped but
whitespace at cuts. ``send_with_retries`` honours a platform's ``retry_after`` and
backs off on network errors, and says why when it finally gives up. ``finish_or_cut``
lets a send under way when the stop cuts its task end and be recorded, briefly, so a
message that went out is not sent again after the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from bot.core.channel import DeliveryError
from bot.core.error_text import short_text

# The splitter must read fences and markup exactly as the renderer does.
from bot.core.markdown import BULLET, FENCE_OPEN, HEADING, INLINE, closes_fence
from bot.core.metrics import count_delivery_retry

log = logging.getLogger(__name__)

T = TypeVar("T")
Size = Callable[[str], int]
MIN_LIMIT = 16
# A send under way when the stop cuts its task gets this long to end and be recorded;
# cutting one still going then takes at most ``CUT_WAIT_S``.
SEND_GRACE_S = 0.5
CUT_WAIT_S = 0.1
_ZW = "\u200b"  # zero-width space: invisible, and no line starting with it is markup


def split_markdown(text: str, limit: int, size: Size = len) -> list[str]:
    """Cut ``text`` into pieces of at most ``limit`` on natural boundaries; at least one piece.

    ``size`` counts what the platform counts (characters, UTF-16 units) and must add
    up over concatenation.
    """
    if limit < MIN_LIMIT:
        raise ValueError("limit too small to split sensibly")
    pieces: list[str] = []
    current: list[str] = []
    used = 0
    gap = size("\n\n")
    for block in _blocks(text, limit, size):
        for part in _fit(block, limit, size):
            if current and used + gap + size(part) <= limit:
                current.append(part)
                used += gap + size(part)
                continue
            if current:
                pieces.append("\n\n".join(current))
            current, used = [part], size(part)
    if current or not pieces:
        pieces.append("\n\n".join(current))
    return pieces


def split_rendered(
    text: str,
    limit: int,
    render: Callable[[str], str] = lambda s: s,
    measure: Callable[[str], int] = len,
    size: Size = len,
) -> list[str]:
    """The rendered pieces of ``text``, each ``measure``-d within ``limit``.

    A piece that outgrew ``limit`` when rendered is split again with a smaller budget;
    ``ValueError`` only if ``render`` grows even pieces of ``MIN_LIMIT`` past ``limit``.
    """
    out: list[str] = []
    todo = [(piece, limit) for piece in reversed(split_markdown(text, limit, size))]
    while todo:
        piece, budget = todo.pop()
        rendered = render(piece)
        measured = measure(rendered)
        if measured <= limit:
            out.append(rendered)
            continue
        smaller = min(budget - 1, int(size(piece) * limit / measured * 0.9))
        if smaller < MIN_LIMIT:
            raise ValueError("a piece cannot be rendered within the limit")
        todo.extend((part, smaller) for part in reversed(split_markdown(piece, smaller, size)))
    return out


def _blocks(text: str, limit: int, size: Size) -> list[str]:
    """Paragraphs and whole fences; fence lines too long to frame a piece become text."""
    blocks: list[str] = []
    lines: list[str] = []
    opener: str | None = None
    fence = ""
    for line in text.replace("\r\n", "\n").split("\n"):
        if opener is not None:
            if not closes_fence(line, fence):
                lines.append(line)
                continue
            narrow = _narrow(opener, line, limit, size)
            blocks.append("\n".join([*lines, line if narrow else fence]))
            lines, opener = ([] if narrow else [_ZW + line]), None
            continue
        match = FENCE_OPEN.match(line)
        if match and _narrow(line, match.group(1), limit, size):
            blocks.append("\n".join(lines))
            lines, opener, fence = [line], line, match.group(1)
        elif match or line.strip():
            lines.append(_ZW + line if match else line)
        else:
            blocks.append("\n".join(lines))
            lines = []
    blocks.append("\n".join(lines))
    return [block for block in blocks if block.strip()]


def _narrow(opener: str, closer: str, limit: int, size: Size) -> bool:
    """Whether a fence's opening and closing lines leave at least half a piece for code."""
    return 2 * (size(opener) + size(closer) + 2 * size("\n")) <= limit


def _fit(block: str, limit: int, size: Size) -> list[str]:
    """A block as parts within ``limit``: a fence cut and reframed, else lines then words."""
    if size(block) <= limit:
        return [block]
    lines = block.split("\n")
    match = FENCE_OPEN.match(lines[0])
    if match is None:
        return _pack(lines, limit, size, None)
    fence = match.group(1)
    closed = len(lines) > 1 and closes_fence(lines[-1], fence)
    body, closer = (lines[1:-1], lines[-1]) if closed else (lines[1:], fence)
    room = limit - size(lines[0]) - size(closer) - 2 * size("\n")
    return [f"{lines[0]}\n{part}\n{closer}" for part in _pack(body, room, size, fence)]


def _pack(lines: list[str], room: int, size: Size, fence: str | None) -> list[str]:
    """Lines joined into parts within ``room``; a longer line is cut into several."""
    parts: list[str] = []
    current: list[str] = []
    used = 0
    newline = size("\n")
    for line in lines:
        for bit in [line] if size(line) <= room else _cut(line, room, size, fence):
            if current and used + newline + size(bit) <= room:
                current.append(bit)
                used += newline + size(bit)
                continue
            if current:
                parts.append("\n".join(current))
            current, used = [bit], size(bit)
    if current:
        parts.append("\n".join(current))
    return parts


def _cut(line: str, room: int, size: Size, fence: str | None) -> list[str]:
    """``line`` (inside ``fence``, or text) cut into parts within ``room``, none read as markup."""
    parts: list[str] = []
    rest = line
    while size(part := _defuse(rest, fence, bool(parts))) > room:
        at = _cut_at(rest, _longest(rest, room, size), fence is None)
        if size(_defuse(rest[:at], fence, bool(parts))) > room:  # no room for the defusing
            at = _cut_at(rest, _longest(rest, room - size(_ZW), size), fence is None)
        parts.append(_defuse(rest[:at], fence, bool(parts)))
        rest = rest[at + 1 :] if rest[at : at + 1] == " " else rest[at:]
    parts.append(part)
    return [bit for bit in parts if bit.strip()]


def _longest(text: str, budget: int, size: Size) -> int:
    """How many leading characters of ``text`` fit in ``budget``: at least one, never all."""
    low, high = 1, len(text) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if size(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    return low


def _cut_at(rest: str, end: int, text: bool) -> int:
    """Where to cut ``rest``, of which ``end`` characters fit: a space's index, or ``end``."""
    start = len(rest) - len(rest.lstrip())
    spaces = [i for i in range(min(end, len(rest) - 1), start, -1) if rest[i] == " "]
    if text and spaces:
        markup = bytearray(end + 1)  # 1 where inline markup (code, a link, bold...) runs
        for match in INLINE.finditer(rest, 0, min(len(rest), 2 * end + 2)):
            first, last = min(match.start(), end + 1), min(match.end(), end + 1)
            markup[first:last] = b"\1" * (last - first)
        outside = [i for i in spaces if not markup[i]]
        if outside:
            return outside[0]
    if spaces:
        return spaces[0]
    at = end
    while at > max(1, end - 8) and (_mark(rest[at]) or rest[at - 1] == "\u200d"):
        at -= 1  # keep a character with its combining marks, an emoji with its joiner
    return at


def _mark(char: str) -> bool:
    """Whether ``char`` attaches to the character before it (accents, variation selectors)."""
    return unicodedata.category(char).startswith("M") or char == "\u200d"


def _defuse(part: str, fence: str | None, later: bool) -> str:
    """``part`` of a cut line, with a zero-width space in front if it would read as markup."""
    if fence is not None:
        risky = closes_fence(part, fence)
    else:
        lead = later and (HEADING.match(part) or BULLET.match(part))
        risky = bool(FENCE_OPEN.match(part) or lead)
    return _ZW + part if risky else part


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
            count_delivery_retry()
            await sleep(delay)
    raise AssertionError("unreachable")


def _reason(exc: BaseException) -> str:
    text = short_text(str(exc))  # an error page as its status line, not the whole page
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def finish_or_cut(work: asyncio.Future[Any], grace_s: float) -> None:
    """In a task the stop has just cancelled: let ``work`` (shielded from that cancel) end
    within ``grace_s``, then cut it. Nothing of it outlives this call by more than
    ``CUT_WAIT_S``; further cancels while it waits are held off until the grace is over,
    and the cut is repeated until ``work`` has ended (a cancel can meet a finished call)."""
    loop = asyncio.get_running_loop()
    grace_ends = loop.time() + grace_s
    try:
        while not work.done() and (left := grace_ends - loop.time()) > 0:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({work}, timeout=left)
    finally:
        work.add_done_callback(_retrieved)
        cut_ends = loop.time() + CUT_WAIT_S
        while not work.done() and loop.time() < cut_ends:
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({work}, timeout=CUT_WAIT_S)
        if not work.done():
            work.cancel()


def _retrieved(work: asyncio.Future[Any]) -> None:
    """Read a cut task's outcome, so asyncio does not report it as never retrieved."""
    if not work.cancelled() and (exc := work.exception()) is not None:
        log.warning("a send cut by the stop ended with %s", type(exc).__name__)
