"""Slack's ``message_changed`` events as edits of a post.

Slack sends ``message_changed`` when a person edits a post, and also when it
only adds a link preview or the post's thread changes. Only an event whose new
message says it was ``edited``, with a text that differs from the previous one,
is an edit: the new message is read like any post, then marked as an edit of it
(``edit_of`` is the post's id, its own id ``"{channel}:{ts}:edit:{edited ts}"``,
the same on every delivery of that edit).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from bot.core.messages import InboundMessage

log = logging.getLogger(__name__)

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class EditedPost:
    """The post as a person's edit left it (shaped like a ``message`` event) and when."""

    post: JSON
    edited_ts: str


def edited_post(event: JSON) -> EditedPost | None:
    """The edited post in a ``message_changed`` event; None when it is not a person's edit."""
    new, old = event.get("message"), event.get("previous_message")
    edited = new.get("edited") if isinstance(new, dict) else None
    if not isinstance(new, dict) or not isinstance(edited, dict) or not edited.get("ts"):
        log.debug("ignored a Slack message_changed event that is not an edit")
        return None
    if isinstance(old, dict) and old.get("text") == new.get("text"):
        log.debug("ignored a Slack edit that left the text as it was")
        return None
    post = {**new, "channel": event.get("channel"), "channel_type": event.get("channel_type")}
    return EditedPost(post, str(edited["ts"]))


def as_edit(message: InboundMessage | None, edit: EditedPost) -> InboundMessage | None:
    """``message`` (the edited post as read) marked as an edit of the post."""
    if message is None or message.message_id is None:
        return None
    try:
        sent_at: float | None = float(edit.edited_ts)
    except ValueError:
        sent_at = None
    return dataclasses.replace(
        message,
        message_id=f"{message.message_id}:edit:{edit.edited_ts}",
        edit_of=message.message_id,
        sent_at=sent_at,  # as new as its edit, however old the post
    )
