"""The chat page's entries when it opens: the history first, then the feed.

The feed keeps what the web chat showed since PinClaw started (replies, approval
requests and their records, answers to presses), and begins with a message the
owner sent. The history (what the model remembers, ``web:owner``'s current
conversation) supplies what came before that: the owner's messages and the
replies, without tool calls or the text written before them (as in any chat,
the reply is the last round's text).
"""

from __future__ import annotations

from bot.agent.history import HistoryStore
from bot.core.messages import SessionKey
from channels.web.events import CHANNEL, CHAT_ID
from channels.web.feed import Entry, Feed

ROWS_PER_MESSAGE = 4  # history rows read per message shown: tool calls and results are rows too


async def opening_entries(history: HistoryStore, feed: Feed, limit: int) -> list[Entry]:
    """The last ``limit`` entries of the conversation, oldest first."""
    since = feed.since()
    earlier: list[Entry] = []
    current = await history.current_session(SessionKey(CHANNEL, CHAT_ID))
    if current is not None:
        rows = await history.transcript(current.id, limit=limit * ROWS_PER_MESSAGE)
        for number, row in enumerate(rows):
            message = row.message
            if since is not None and row.created_at >= since:
                break
            if not message.content.strip():
                continue
            if message.role == "user":
                earlier.append(Entry(f"h{number}", "user", message.content, row.created_at))
            elif message.role == "assistant" and not message.tool_calls:
                earlier.append(Entry(f"h{number}", "bot", message.content, row.created_at))
    return [*earlier, *feed.entries()][-limit:]
