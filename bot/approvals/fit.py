"""Whether an approval request can be shown whole in the chat where it is asked.

A request is never cut for display. A surface with a size limit says so with an
``approval_limit`` attribute, a ``CardLimit``: how much one request may hold, as
that platform counts (Telegram one message of 4,096 after its markdown becomes
HTML, Discord one message of 2,000, Slack one message of 12,000 in section
blocks of up to 3,000).
A surface without one (the terminal, the web chat) shows any request whole.

``fitting`` takes the first rendering of the call's arguments (whole; then, for
a file write, with its content standing as its size) whose request, and the
record it becomes after any decision, fit. When none does, the call is not
asked and not run: ``TooLong`` says how long the arguments are and how much
room that chat has for them (its limit less the rest of the request), and the
gate tells the model so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from bot.approvals.texts import NAME_LIMIT, decision_line, record_text
from bot.security.approval import ApprovalRequest


@dataclass(frozen=True, slots=True)
class CardLimit:
    """At most ``limit`` per request, as ``measure`` counts a request's markdown."""

    limit: int
    measure: Callable[[str], int]


@dataclass(frozen=True, slots=True)
class TooLong:
    """Arguments of ``size`` where the chat has ``room`` for them, as the chat counts."""

    size: int
    room: int


def card_limit(surface: object) -> CardLimit | None:
    """The surface's ``approval_limit``, or None when it shows requests of any size."""
    limit = getattr(surface, "approval_limit", None)
    return limit if isinstance(limit, CardLimit) else None


def fitting(
    request: ApprovalRequest, card: Callable[[ApprovalRequest], str], limit: CardLimit | None
) -> ApprovalRequest | TooLong:
    """``request`` with the first of its summaries (``summary``, then ``shorter``) whose
    card, written by ``card``, and whose longest possible record fit ``limit``."""
    if limit is None:
        return request
    summaries = (request.summary, *request.shorter)
    needed = 0
    for summary in summaries:
        shown = replace(request, summary=summary)
        text = card(shown)
        # No platform counts a text as less than half its characters: what is longer
        # is not measured (measuring Slack's sections of a huge call takes a while).
        needed = _needed(text, limit) if len(text) <= 2 * limit.limit else 0
        if 0 < needed <= limit.limit:
            return shown
    rest = _needed(card(replace(request, summary="x")), limit) - 1  # all but the arguments
    size = needed - rest if needed else len(summaries[-1])
    return TooLong(size, max(0, limit.limit - rest))


def _needed(text: str, limit: CardLimit) -> int:
    """What a request takes, or the longest record it can become if that is more."""
    records = (limit.measure(record_text(text, line)) for line in _LONGEST)
    return max(limit.measure(text), *records)


def _longest_lines() -> tuple[str, ...]:
    """The longest decision lines a record can end with, in characters that grow most
    when escaped or counted in UTF-16."""
    when, zone = datetime(2000, 1, 1, 23, 59, tzinfo=UTC), ZoneInfo("UTC")
    return tuple(
        decision_line("always", fill * NAME_LIMIT, when, zone, 10**12, fill * NAME_LIMIT)
        for fill in ("W", "&", "<", "\U0001f600")
    )


_LONGEST = _longest_lines()
