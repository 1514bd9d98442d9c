"""A reply's draft in the web chat: one entry of the feed, changed as the model writes.

The page has no flood limits, so drafts change often (``INTERVAL_S``) and show from
the first piece (no grace period). The finished reply replaces the draft's text
and the entry becomes an ordinary reply, in the same place on the page. When
PinClaw showed something after the draft began (an approval request, the answer
to a press), the draft moves below it as it changes, so the reply reads after
what it follows; after a new message of the owner's it stays where it was.
"""

from __future__ import annotations

from bot.core.draft import STATUS_MARK
from bot.core.messages import OutboundMessage
from channels.web.feed import Feed

INTERVAL_S = 0.25  # at most four changes a second: smooth, and light on a phone
GRACE_S = 0.0


class WebDraft:
    """The ``DraftSurface`` of a reply in the web chat."""

    def __init__(self, feed: Feed) -> None:
        self._feed = feed

    def fit(self, text: str) -> str:
        """The page shows the whole text: nothing is cut."""
        return text

    async def post(self, shown: str) -> str:
        """Add the draft to the page; its entry id."""
        return self._feed.add("draft", shown, progress=shown.startswith(STATUS_MARK)).ref

    async def edit(self, ref: str, shown: str) -> bool:
        """Show ``shown`` in the draft; False when the entry is gone."""
        self._feed.bring_down(ref)
        changed = self._feed.change(ref, text=shown, progress=shown.startswith(STATUS_MARK))
        return changed is not None

    async def finish(self, ref: str, message: OutboundMessage, shown: str) -> bool:
        """Turn the draft into the reply; False (nothing shown) when the entry is gone.

        Done even when the text is ``shown`` already: the entry still becomes a reply
        (its kind, buttons and progress mark change), and the page pays nothing for it."""
        self._feed.bring_down(ref)
        changed = self._feed.change(
            ref, kind="bot", text=message.text, buttons=message.buttons, progress=False
        )
        return changed is not None

    async def delete(self, ref: str) -> None:
        """Take the draft off the page."""
        self._feed.remove(ref)
