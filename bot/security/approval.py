"""The approval port: who is asked when the policy says a call needs a person's yes.

A channel that can ask (the terminal today; chat buttons later) implements
``Approver``. The gate awaits the answer; no answer, or no way to ask, is a
refusal the model is told about plainly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from bot.core.messages import SessionKey
from bot.core.tool_api import Risk

Verdict = Literal["approved", "denied", "expired", "unavailable"]


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What the person is asked about: the tool, a readable summary, the risk and why.

    ``rule_key`` is the narrow identity of the call an "always allow" rule would
    cover (the tool and its approval fields, normalised).
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


@dataclass(frozen=True, slots=True)
class ApprovalOutcome:
    """The answer, and who gave it."""

    verdict: Verdict
    by: str = ""


class Approver(Protocol):
    """Asks a person to allow one tool call (and keeps its own time limit)."""

    async def request_approval(self, request: ApprovalRequest) -> ApprovalOutcome:
        """Ask, wait for the answer, and return it (``expired`` when nobody answered)."""
        ...
