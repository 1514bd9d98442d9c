"""The approval port: who is asked when the policy says a call needs a person's yes.

A channel that can ask (the terminal today; chat buttons later) implements
``Approver``. The gate awaits the answer; no answer, or no way to ask, is a
refusal the model is told about plainly, and so is a call too long to be shown
whole where the person would be asked (``too_long``: never asked, never run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from bot.core.messages import SessionKey
from bot.core.tool_api import Risk

Verdict = Literal["approved", "denied", "expired", "unavailable", "too_long"]


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What the person is asked about: the tool, a readable summary, the risk and why.

    ``summary`` is every argument whole (``bot.security.visible``); ``shorter`` are
    the same with a file's content standing as its size, for a chat that cannot
    show the whole. ``rule_key`` is the narrow identity of the call an "always
    allow" rule would cover (the tool and its approval fields, normalised).
    """

    tool: str
    summary: str
    risk: Risk
    reason: str
    session: SessionKey
    sender_id: str
    origin: str
    rule_key: str = ""
    sender_name: str = ""
    is_direct: bool = True
    inbound_id: int | None = None
    after_untrusted: str = ""
    """What untrusted content the turn read before this call ("" for none): an "always"
    rule does not answer such a request, a person does."""
    shorter: tuple[str, ...] = ()
    on_asked: Callable[[], None] | None = field(default=None, compare=False, repr=False)
    """Called when a person is really asked (no rule answered), just before the request is
    shown: the turn's progress line then says the call waits for approval."""


@dataclass(frozen=True, slots=True)
class ApprovalOutcome:
    """The answer, and who gave it; for ``too_long``, how long the arguments are
    (``size``) and how much of them the chat could show (``room``), as it counts."""

    verdict: Verdict
    by: str = ""
    size: int = 0
    room: int = 0


class Approver(Protocol):
    """Asks a person to allow one tool call (and keeps its own time limit)."""

    async def request_approval(self, request: ApprovalRequest) -> ApprovalOutcome:
        """Ask, wait for the answer, and return it (``expired`` when nobody answered)."""
        ...
