"""Slack's text formats: PinClaw markdown out as mrkdwn, Slack's markup in as plain text.

Outgoing replies are rendered with ``MrkdwnStyle`` and cut into pieces of at most
``MESSAGE_LIMIT`` characters *after* rendering (escaping ``&``, ``<`` and ``>``
makes text grow). 3,000 is Slack's limit for the text of a section block, so any
piece can carry buttons in Block Kit unchanged; it also stays under the 4,000
characters after which Slack folds a message behind "Show more", far below the
40,000 at which it truncates. Incoming text arrives escaped, with mentions and
links as ``<...>`` tokens; ``plain_text`` turns it back into what the person typed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from bot.core.delivery import split_rendered
from bot.core.markdown import render
from bot.core.messages import Button

MESSAGE_LIMIT = 3000
BUTTON_LABEL_LIMIT = 75  # Slack's limit for a button's text
BUTTONS_PER_BLOCK = 25  # Slack's limit for the elements of an actions block
BUTTONS_BLOCK_ID = "pinclaw_buttons"

_TOKEN = re.compile(r"<([^<>\n]+)>")


class MrkdwnStyle:
    """Slack mrkdwn: ``*bold*``, ``_italic_``, ``~strike~``, ``<url|text>``, fences."""

    def text(self, raw: str) -> str:
        """Escape the three characters Slack treats as markup."""
        return raw.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    def bold(self, inner: str) -> str:
        """``*inner*``."""
        return f"*{inner}*"

    def italic(self, inner: str) -> str:
        """``_inner_``."""
        return f"_{inner}_"

    def strike(self, inner: str) -> str:
        """``~inner~``."""
        return f"~{inner}~"

    def code(self, raw: str) -> str:
        """Inline code (still escaped: Slack reads ``&<>`` as markup even there)."""
        return f"`{self.text(raw)}`"

    def link(self, inner: str, url: str) -> str:
        """``<url|text>``; a ``|`` or ``>`` in the URL would end the link early."""
        safe = self.text(url).replace("|", "%7C")
        return f"<{safe}|{inner}>"

    def pre(self, raw: str, language: str) -> str:
        """A code block; Slack shows no language, and a fence inside would close it."""
        body = self.text(raw).replace("```", "`\u200b``")
        return f"```\n{body}\n```"

    def heading(self, inner: str) -> str:
        """Slack has no headings: a bold line (bold inside it would end the bold early)."""
        return f"*{inner.replace('*', '')}*"


STYLE = MrkdwnStyle()


def to_mrkdwn(text: str) -> str:
    """Render PinClaw markdown as Slack mrkdwn."""
    return render(text, STYLE)


def split_for_slack(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """The rendered pieces of a reply, each within ``limit``; empty pieces are dropped."""
    pieces = split_rendered(text, limit, to_mrkdwn)
    return [piece for piece in pieces if piece.strip()]


def button_blocks(text: str, buttons: Sequence[Button]) -> list[dict[str, Any]]:
    """Block Kit for a message with buttons: its text as a section, then the buttons."""
    blocks: list[dict[str, Any]] = []
    if text.strip():
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text}})
    for start in range(0, len(buttons), BUTTONS_PER_BLOCK):
        elements = [
            {
                "type": "button",
                "action_id": button.action_id,
                "text": {"type": "plain_text", "text": _label(button.label), "emoji": True},
            }
            for button in buttons[start : start + BUTTONS_PER_BLOCK]
        ]
        block_id = BUTTONS_BLOCK_ID if start == 0 else f"{BUTTONS_BLOCK_ID}_{start}"
        blocks.append({"type": "actions", "block_id": block_id, "elements": elements})
    return blocks


def _label(label: str) -> str:
    label = label.strip() or "?"
    if len(label) <= BUTTON_LABEL_LIMIT:
        return label
    return label[: BUTTON_LABEL_LIMIT - 1] + "…"


def plain_text(text: str, bot_user_id: str) -> tuple[str, bool]:
    """What the person typed, and whether it @mentioned the bot (the mention removed).

    Other mentions become ``@name`` (or ``@U…`` when Slack sent no name), channel
    links ``#name``, and links ``label (url)``; ``&amp;``, ``&lt;``, ``&gt;`` are undone.
    """
    mentioned = False

    def token(match: re.Match[str]) -> str:
        nonlocal mentioned
        target, _, label = match.group(1).partition("|")
        if target.startswith("@"):
            if target[1:] == bot_user_id:
                mentioned = True
                return "\0"
            return f"@{label or target[1:]}"
        if target.startswith("#"):
            return f"#{label or target[1:]}"
        if target.startswith("!"):
            special = target[1:].split("^", 1)[0]
            return label or f"@{special}"
        address = target.removeprefix("mailto:")
        return f"{label} ({address})" if label and label != address else address

    replaced = _TOKEN.sub(token, text)
    if mentioned:
        replaced = re.sub(r"[ \t]*\0[,:]?[ \t]*", " ", replaced)  # "@bot, do this"
    cleaned = replaced.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return cleaned.strip(), mentioned
