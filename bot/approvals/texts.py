"""What people see of an approval: the request, its buttons, and the record it becomes."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo

from bot.core.messages import Button
from bot.security.approval import ApprovalRequest

Choice = Literal["once", "person", "always", "deny"]
"""Allow once; always, for the person who asked; always, for everyone; deny."""
CHOICES: tuple[Choice, ...] = ("once", "person", "always", "deny")
PREFIX = "ap:"
_RISK_MARK = {"low": "🟢", "medium": "🟠", "high": "🔴"}
_FOOTER = "\n\n_Reply_ `"
_INLINE = 500  # arguments up to this long, on one line, are inline code
_TRIPLE = re.compile(r"``(?=`)")
NAME_LIMIT = 64
"""Characters of a name in a record's decision line (the arguments are never shortened)."""


def action_id(approval_id: str, choice: Choice) -> str:
    """The button id for one choice (fits Telegram's 64-byte callback data)."""
    return f"{PREFIX}{approval_id}:{choice}"


def parse_action(value: str) -> tuple[str, Choice] | None:
    """``(approval id, choice)`` from a button id, or None if it is not one of ours."""
    if not value.startswith(PREFIX):
        return None
    approval_id, _, choice = value[len(PREFIX) :].rpartition(":")
    if not approval_id or choice not in CHOICES:
        return None
    return approval_id, choice


def parse_choice(word: str) -> Choice | None:
    """A typed choice: once/yes/allow, person/me, always, deny/no."""
    word = word.strip().lower()
    if word in ("once", "yes", "y", "allow", "ok"):
        return "once"
    if word in ("person", "me", "mine", "p"):
        return "person"
    if word in ("always", "a", "everyone", "all"):
        return "always"
    if word in ("deny", "no", "n", "reject"):
        return "deny"
    return None


def buttons(approval_id: str, risk: str, person: str = "") -> tuple[Button, ...]:
    """Allow once / Always for PERSON / Always for everyone / Deny.

    Never "always" for a high-risk call; "for PERSON" only when the request has a
    person (``person`` is their name).
    """
    offered: list[tuple[str, Choice]] = [("✅ Allow once", "once")]
    if risk != "high":
        if person:
            offered.append((f"👤 Always for {short_name(person)}", "person"))
        offered.append(("♾️ Always for everyone", "always"))
    offered.append(("❌ Deny", "deny"))
    return tuple(Button(label, action_id(approval_id, choice)) for label, choice in offered)


def request_text(
    approval_id: str,
    request: ApprovalRequest,
    expires: datetime,
    zone: ZoneInfo,
    where: str,
    command: str = "/approve",
    person: str = "",
) -> str:
    """The request message: tool, arguments, risk and why, who asked, when it expires."""
    asked = _asked_by(request)
    lines = [
        f"🔐 **Approval needed** for **{request.tool}**",
        _code(request.summary) if request.summary else "(no arguments)",
        f"{_RISK_MARK.get(request.risk, '')} {request.risk} risk"
        + (f": {request.reason}" if request.reason else ""),
        *(
            [f"⚠️ Asked after reading untrusted content: {request.after_untrusted}"]
            if request.after_untrusted
            else []
        ),
        f"Asked by {asked}{where}",
        f"Expires at {expires.astimezone(zone):%H:%M} ({zone.key})",
    ]
    always = ""
    if request.risk != "high":
        always = ("|person" if person else "") + "|always"
    footer = f"{_FOOTER}{command} {approval_id} once{always}|deny` _if the buttons fail._"
    return "\n".join(lines) + footer


def record_text(request: str, line: str) -> str:
    """The request turned into a record: its expiry and footer (its last lines, whatever
    the arguments above them hold) replaced by what happened."""
    rows = request.rsplit(_FOOTER, 1)[0].split("\n")
    if rows[-1].startswith("Expires at "):
        rows.pop()
    body = "\n".join(rows)
    return f"{body}\n\n{line}"


def decision_line(
    status: str, by: str, when: datetime, zone: ZoneInfo, rule: int = 0, person: str = ""
) -> str:
    """ "Allowed once by Ana at 14:02" and the like (``person``: whom an always rule is for).

    Names are shortened to ``NAME_LIMIT``, so a record stays within what its chat shows.
    """
    at = f"{when.astimezone(zone):%H:%M}"
    by, person = short_name(by, NAME_LIMIT), short_name(person, NAME_LIMIT)
    if status == "once":
        return f"✅ Allowed once by {by} at {at}"
    if status == "always":
        whom = f" for {person}" if person else ""
        return f"✅ Always allowed{whom} by {by} at {at} (rule #{rule})"
    if status == "denied":
        return f"❌ Denied by {by} at {at}"
    return f"⌛ Expired at {at}: {by}"


def short_name(name: str, limit: int = 24) -> str:
    """A person's name short enough for a button label."""
    name = " ".join(name.split())
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _code(summary: str) -> str:
    """The call's arguments as code, whole: a block when they span lines, hold backticks,
    or are long (a chat that splits a long line keeps each part a block, never markup)."""
    if "`" not in summary and "\n" not in summary and len(summary) <= _INLINE:
        return f"`{summary}`"
    # Three backticks end a block in Discord wherever they stand, and a fence long
    # enough for a long run would be read as text by the splitter: a zero-width
    # space (invisible, and ours: the arguments' own are marks) breaks every run.
    broken = _TRIPLE.sub("``\u200b", summary)
    return f"```\n{broken}\n```"


def _asked_by(request: ApprovalRequest) -> str:
    if request.origin.startswith("cron"):
        return f"the scheduled job {request.origin.partition(':')[2] or ''}".strip()
    if request.origin.startswith("trigger:"):
        return f"the trigger {request.origin.partition(':')[2]}"
    return request.sender_name or request.sender_id or "someone"
