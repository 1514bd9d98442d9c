"""The decision for one tool call: allow it, ask a person, or block it, and why.

Precedence: a forbidden target is refused at every level; ``readonly`` refuses
anything that writes, runs commands or actuates; a tool in ``always_ask`` asks;
then the autonomy level: ``supervised`` runs low risk, asks for medium (unless
the tool is in ``auto_approve``) and blocks high; ``full`` runs everything.
Reasons are written for the model to pass on; they never say how to widen
permissions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.config.security import SecurityConfig
from bot.core.tool_api import Assessment, Risk, Tool

Action = Literal["allow", "ask", "block"]

_EFFECTS = {"write": "change files", "shell": "run commands", "actuate": "operate devices"}


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with a call, its risk, and the reason in plain words."""

    action: Action
    risk: Risk
    reason: str = ""


def decide(config: SecurityConfig, tool: Tool, assessment: Assessment) -> Decision:
    """Apply the policy to one assessed call."""
    risk, why = assessment.risk, assessment.reason
    if assessment.forbidden:
        return Decision("block", risk, why or "it touches a forbidden location")
    if config.autonomy == "readonly" and (tool.effect in _EFFECTS or risk != "low"):
        action = _EFFECTS.get(tool.effect, "do anything but read")
        return Decision(
            "block", risk, f"PinClaw may only read here, and {tool.name} would {action}"
        )
    if tool.name in config.always_ask:
        return Decision("ask", risk, why or f"{tool.name} always needs approval")
    if config.autonomy == "full":
        return Decision("allow", risk, why)
    if risk == "low":
        return Decision("allow", risk, why)
    if risk == "medium":
        if tool.name in config.auto_approve:
            return Decision("allow", risk, why)
        return Decision("ask", risk, why or f"{tool.name} can change things")
    return Decision("block", risk, why or f"{tool.name} is high risk")
