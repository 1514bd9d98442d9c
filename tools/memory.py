"""The memory tools: the model keeps, looks up and drops long-term memories itself.

What is stored in a chat belongs to that chat (a private chat is one person's)
unless it is marked shared; recall only ever sees the chat's own memories and
the shared ones.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated

from pydantic import Field

from bot.core.errors import ToolError
from bot.core.tool_api import Tool, ToolContext, tool
from bot.memory.models import CONVERSATION, CORE, SHARED, NewMemory, chat_scope
from bot.memory.service import MemoryService

_KEY_WORDS = 6


def memory_tools(memory: MemoryService) -> list[Tool]:
    """``memory_store``, ``memory_recall`` and ``memory_forget`` bound to ``memory``."""

    def scopes(ctx: ToolContext) -> list[str]:
        return [chat_scope(ctx.session.channel, ctx.session.chat_id), SHARED]

    @tool(effect="write")
    async def memory_store(
        ctx: ToolContext,
        content: Annotated[
            str, Field(description="The fact, preference or decision, in one or two sentences")
        ],
        key: Annotated[
            str | None,
            Field(
                description="A short stable name, e.g. 'coffee preference'; storing the "
                "same key again replaces the old content. Omit to derive one"
            ),
        ] = None,
        category: Annotated[
            str,
            Field(description="core (facts and preferences), daily (today's log), or a name"),
        ] = CORE,
        shared: Annotated[
            bool, Field(description="true only for what every chat may know (household facts)")
        ] = False,
    ) -> str:
        """Remember something for later conversations: what the user likes, facts about
        them or their home, decisions. Use it when they state something worth keeping."""
        text = content.strip()
        if not text:
            raise ToolError("content is empty; say what to remember")
        if category.strip().lower() == CONVERSATION:
            raise ToolError("the conversation category is kept automatically; use core or daily")
        name = (key or "").strip() or _derive_key(text, category, ctx)
        scope = SHARED if shared else scopes(ctx)[0]
        item = NewMemory(name, text, category.strip().lower() or CORE, scope, str(ctx.session))
        stored = await memory.remember(item)
        where = "for every chat" if shared else "for this chat"
        return f"Remembered {where} under '{stored.key}' ({stored.category})."

    @tool()
    async def memory_recall(
        ctx: ToolContext,
        query: Annotated[str, Field(description="What to look for, in a few words")],
        limit: Annotated[int, Field(ge=1, le=20, description="How many entries at most")] = 5,
    ) -> str:
        """Search long-term memory (this chat's and shared entries), best matches first."""
        found = await memory.recall(query, scopes(ctx), limit)
        if not found:
            return "Nothing remembered about that."
        lines = []
        for hit in found:
            m = hit.memory
            day = datetime.fromtimestamp(m.updated_at, UTC).strftime("%Y-%m-%d")
            lines.append(f"- [{m.category}] {m.key}: {m.content} ({day}, score {hit.score:.2f})")
        return "\n".join(lines)

    @tool(effect="write")
    async def memory_forget(
        ctx: ToolContext,
        key: Annotated[str, Field(description="The entry's key, as memory_recall shows it")],
    ) -> str:
        """Forget one long-term memory entry of this chat (or a shared one) for good."""
        removed = await memory.forget(key.strip(), scopes(ctx))
        if removed is None:
            raise ToolError(f"nothing is remembered under {key!r}; look it up with memory_recall")
        return f"Forgot '{removed.key}'."

    return [memory_store, memory_recall, memory_forget]


def _derive_key(text: str, category: str, ctx: ToolContext) -> str:
    if category == "daily":
        return f"daily {ctx.now().astimezone(ctx.timezone):%Y-%m-%d %H:%M}"
    words = re.findall(r"\w+", text.lower())[:_KEY_WORDS]
    return " ".join(words) or "note"
