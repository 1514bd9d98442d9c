"""What the owner does in the web chat, as PinClaw's ``InboundMessage`` and ``ButtonPress``.

A message's id is the form's ``nonce``, a random value the page puts in the form
(and the page's script renews for each message), so a form sent twice (a double
click, a retried request) is recognised by the inbound store and answered once.
A missing or malformed nonce gets a fresh one: that message cannot be recognised
again, but it is never refused. The text is cleaned first (``clean_text``: a
control character such as NUL, or a lone surrogate, becomes U+FFFD).
"""

from __future__ import annotations

import re
import secrets

from bot.core.channel import ButtonPress
from bot.core.messages import InboundMessage, clean_text
from channels.web.settings import OWNER_ID

CHANNEL = "web"
CHAT_ID = OWNER_ID  # one chat: the owner's
_NONCE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")


def new_nonce() -> str:
    """A fresh message id for the form."""
    return secrets.token_urlsafe(12)


def inbound(text: str, nonce: str, name: str) -> InboundMessage:
    """The owner's message from the chat form; ``name`` is the owner's name in the panel."""
    message_id = nonce if _NONCE.match(nonce) else new_nonce()
    return InboundMessage(
        channel=CHANNEL,
        chat_id=CHAT_ID,
        sender_id=OWNER_ID,
        text=clean_text(text.replace("\r\n", "\n")).strip(),
        sender_name=clean_text(name) or OWNER_ID,
        message_id=message_id,
        is_direct=True,
    )


def button_press(action_id: str, entry_ref: str, name: str) -> ButtonPress:
    """A button pressed under entry ``entry_ref`` of the chat page."""
    return ButtonPress(
        channel=CHANNEL,
        chat_id=CHAT_ID,
        user_id=OWNER_ID,
        user_name=name or OWNER_ID,
        action_id=action_id,
        message_ref=entry_ref,
    )
