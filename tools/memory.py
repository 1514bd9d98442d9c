"""The memory tools: the model keeps, looks up and drops long-term memories itself.

What is stored belongs to the person who is talking (wherever they write from:
the terminal, Telegram, a linked Discord account) unless it is marked shared,
which only the owner may do; recall only ever sees that person's own memories
and the shared (household) ones, also in a group chat.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated

from pydantic import Field

from bot.core.errors import ToolError
from bot.core.tool_api import Tool, ToolContext, tool
from bot.memory.models import CONVERSATION, CORE, SHARED, NewMemory
from bot.memory.service import MemoryService
from bot.store.people import Person

_KEY_WORDS = 6


def memory_tools(memory: MemoryService) -> list[Tool]:
    """``memory_store``, ``memory_recall`` and ``memory_forget`` bound to ``memory``."""

    async def speaker(ctx: ToolContext) -> Person | None:
        return await memory.speaker(ctx.session.channel, ctx.sender_id, ctx.sender_name, ctx.origin)

    async def scopes(ctx: ToolContext, *, writable: bool = False) -> list[str]:
        person = await speaker(ctx)
        own = [person.scope] if person is not None else []
        shared = [SHARED] if not writable or (person is not None and person.is_owner) else []
        return own + shared

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
            bool,
            Field(
                description="true only for household facts everyone may know; "
                "only the owner can store shared entries"
            ),
        ] = False,
    ) -> str:
        """Remember something for later conversations: what the user likes, facts about
        them or their home, decisions. Use it when they state something worth keeping.
        It is remembered for this person wherever they talk to you."""
        text = content.strip()
        if not text:
            raise ToolError("content is empty; say what to remember")
        if category.strip().lower() == CONVERSATION:
            raise ToolError("the conversation category is kept automatically; use core or daily")
        person = await speaker(ctx)
        if shared and (person is None or not person.is_owner):
            raise ToolError(
                "only the owner can store shared (household) memories; "
                "store it without shared to keep it for this person"
            )
        if person is None and not shared:
            raise ToolError("this turn has no person to remember for; only shared entries")
        name = (key or "").strip() or _derive_key(text, category, ctx)
        scope = SHARED if shared or person is None else person.scope
        item = NewMemory(name, text, category.strip().lower() or CORE, scope, str(ctx.session))
        stored = await memory.remember(item)
        where = "for everyone" if shared else f"for {_whom(person)}"
        return f"Remembered {where} under '{stored.key}' ({stored.category})."

    @tool()
    async def memory_recall(
        ctx: ToolContext,
        query: Annotated[str, Field(description="What to look for, in a few words")],
        limit: Annotated[int, Field(ge=1, le=20, description="How many entries at most")] = 5,
    ) -> str:
        """Search long-term memory (this person's and shared entries), best matches first."""
        found = await memory.recall(query, await scopes(ctx), limit)
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
        """Forget one long-term memory entry of this person (or, for the owner, a shared
        one) for good."""
        removed = await memory.forget(key.strip(), await scopes(ctx, writable=True))
        if removed is None:
            raise ToolError(
                f"nothing this person may forget is remembered under {key!r}; "
                "look it up with memory_recall"
            )
        return f"Forgot '{removed.key}'."

    return [memory_store, memory_recall, memory_forget]


def _whom(person: Person | None) -> str:
    if person is None:
        return "nobody"
    return "the owner" if person.is_owner else person.name


def _derive_key(text: str, category: str, ctx: ToolContext) -> str:
    if category == "daily":
        return f"daily {ctx.now().astimezone(ctx.timezone):%Y-%m-%d %H:%M}"
    words = re.findall(r"\w+", text.lower())[:_KEY_WORDS]
    return " ".join(words) or "note"
