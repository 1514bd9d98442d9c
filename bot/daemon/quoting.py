"""Replies to earlier messages, as the model reads them: the quoted text before the message.

A person's reply carries the text of the message it answers (``quoted_text``,
cut by the adapter) and who wrote it (``quoted_from``; "PinClaw" for the bot's
own). PinClaw's own words and the sender's own are quoted plainly::

    [replying to PinClaw's earlier message: «…»]

Someone else's words (the adapter set ``quotes``, which also starts the turn as
having read untrusted content) go inside the marker the policy gate puts around
tool output, so the model treats them as data, not instructions (and every
message's ``quotes`` joins the turn's untrusted sources, ``with_quoted_sources``)::

    [replying to a message from Ana, quoted below]
    <untrusted source="quoted message" from="a message quoted from Ana">
    …
    </untrusted>
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from bot.core.messages import BOT_AUTHOR, InboundMessage, one_line
from bot.media.prepare import TurnInput
from bot.security.gate import mark_untrusted


def quote_lines(message: InboundMessage) -> str:
    """The lines that show the model what ``message`` replies to ("" when nothing)."""
    quoted = message.quoted_text.strip()
    if not quoted:
        return ""
    # The author's name is outside the marker: one short line, whatever they are called.
    author = one_line(message.quoted_from, 100) or "someone"
    # ``quotes`` is the adapter's word (by id) that someone else wrote it: whoever is
    # called "PinClaw" there is not the bot.
    if message.quotes:
        intro = f"[replying to a message from {author}, quoted below]"
        return f"{intro}\n{mark_untrusted('quoted message', quoted, message.quotes)}"
    if author == BOT_AUTHOR:
        whose = "PinClaw's"
    elif author == message.sender_name:
        whose = "their own"
    else:
        whose = f"{author}'s"
    return f"[replying to {whose} earlier message: «{quoted}»]"


def with_quote(message: InboundMessage) -> InboundMessage:
    """``message`` with what it replies to before its text, for the model."""
    lines = quote_lines(message)
    if not lines:
        return message
    return dataclasses.replace(message, text=f"{lines}\n{message.text}".rstrip())


def with_quoted_sources(given: TurnInput, messages: Sequence[InboundMessage]) -> TurnInput:
    """``given`` with whose words the turn's messages carry (``quotes``: a forward, someone
    else's quoted message) among its untrusted sources, for every message of the turn."""
    quoted = [m.quotes for m in messages if m.quotes and m.quotes not in given.untrusted]
    if not quoted:
        return given
    return dataclasses.replace(given, untrusted=(*given.untrusted, *dict.fromkeys(quoted)))
