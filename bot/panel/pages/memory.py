"""The Memory page: what PinClaw remembers, per person, searched, viewed, forgotten.

It reads and forgets through ``MemoryService``, as ``pinclaw memory`` does:
the list is ``MemoryStore.list`` (newest first), a search is ``recall`` (the
same keyword and vector search the agent uses), and forgetting goes through
``forget_id`` so the vector cache forgets the entry too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from aiohttp import web

from bot.core.errors import UserError
from bot.memory.models import SHARED, Memory
from bot.memory.service import MemoryService
from bot.panel.actions import done, record_action
from bot.panel.context import panel_deps
from bot.panel.render import render
from bot.panel.router import PanelRouter

PER_PAGE = 50
SEARCH_LIMIT = 50
PREVIEW_CHARS = 160


@dataclass(frozen=True, slots=True)
class Whose:
    """A choice of the person filter: a memory scope and how it is shown."""

    scope: str
    label: str


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """One entry as the list shows it (``content`` whole, ``preview`` shortened)."""

    id: int
    key: str
    content: str
    preview: str
    category: str
    scope: str
    whose: str
    created: str
    updated: str
    score: float | None = None


@dataclass(frozen=True, slots=True)
class MemoryQuery:
    """What the page was asked for: a search or a list, for everyone or one person."""

    text: str = ""
    scope: str = ""  # "" = everyone's
    category: str = ""
    page: int = 1


@dataclass(frozen=True, slots=True)
class MemoryView:
    """Everything the Memory page shows."""

    query: MemoryQuery
    rows: tuple[MemoryRow, ...]
    total: int  # entries listed (a search shows its hits only)
    pages: int
    people: tuple[Whose, ...]
    searched: bool


async def memory_view(memory: MemoryService, query: MemoryQuery, zone: ZoneInfo) -> MemoryView:
    """The entries matching ``query``: the best hits of a search, else a page of the list."""
    people = await whose_choices(memory)
    names = {choice.scope: choice.label for choice in people}
    scope = query.scope if query.scope in names else ""
    scopes = [scope] if scope else None
    category = query.category.strip() or None
    if query.text.strip():
        everyone = sorted(await memory.store.count_by_scope())
        hits = await memory.recall(query.text, scopes or everyone, SEARCH_LIMIT)
        found = [h for h in hits if category is None or h.memory.category == category]
        rows = tuple(memory_row(h.memory, names, zone, h.score) for h in found)
        shown = MemoryQuery(query.text, scope, category or "", 1)
        return MemoryView(shown, rows, len(rows), 1, people, True)
    total = await memory.store.count(category, scopes)
    pages = max(1, -(-total // PER_PAGE))
    page = min(max(1, query.page), pages)
    entries = await memory.store.list(
        category, scopes, limit=PER_PAGE, offset=(page - 1) * PER_PAGE
    )
    rows = tuple(memory_row(m, names, zone) for m in entries)
    shown = MemoryQuery("", scope, category or "", page)
    return MemoryView(shown, rows, total, pages, people, False)


async def memory_entry(memory: MemoryService, memory_id: int, zone: ZoneInfo) -> MemoryRow:
    """One entry, whole; ``UserError`` if it does not exist (any more)."""
    found = await memory.store.get_by_id(memory_id)
    if found is None:
        raise UserError(f"there is no memory #{memory_id}; it may have been forgotten")
    names = {choice.scope: choice.label for choice in await whose_choices(memory)}
    return memory_row(found, names, zone)


async def forget_memory(memory: MemoryService, memory_id: int) -> Memory:
    """Forget one entry by id (as ``pinclaw memory forget ID``); the entry it was."""
    found = await memory.store.get_by_id(memory_id)
    if found is None or not await memory.forget_id(found.id):
        raise UserError(f"there is no memory #{memory_id}; it may have been forgotten already")
    return found


async def whose_choices(memory: MemoryService) -> tuple[Whose, ...]:
    """Shared first, then every person (the owner first), as ``pinclaw memory`` names them."""
    choices = [Whose(SHARED, "shared (everyone)")]
    for person in await memory.people.all():
        owner = ", owner" if person.is_owner else ""
        choices.append(Whose(person.scope, f"{person.name} #{person.id}{owner}"))
    return tuple(choices)


def memory_row(
    memory: Memory, names: dict[str, str], zone: ZoneInfo, score: float | None = None
) -> MemoryRow:
    """A stored entry for the page."""
    text = " ".join(memory.content.split())
    preview = text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
    return MemoryRow(
        id=memory.id,
        key=memory.key,
        content=memory.content,
        preview=preview,
        category=memory.category,
        scope=memory.scope,
        whose=names.get(memory.scope, memory.scope),
        created=_local(memory.created_at, zone),
        updated=_local(memory.updated_at, zone),
        score=score,
    )


def _local(stamp: float | None, zone: ZoneInfo) -> str:
    return datetime.fromtimestamp(stamp, zone).strftime("%Y-%m-%d %H:%M") if stamp else "-"


def routes(router: PanelRouter) -> None:
    """``/memory`` (list and search), ``/memory/ID`` and ``/memory/ID/forget``."""
    router.get("/memory", page)
    router.get("/memory/{memory_id:\\d+}", entry)
    router.post("/memory/{memory_id:\\d+}/forget", forget)


async def page(request: web.Request) -> web.StreamResponse:
    """A page of entries, newest first, or the hits of a search; for everyone or one person."""
    memory = panel_deps(request).app.memory
    if memory is None:
        return render(request, "memory.html", title="Memory", off=MEMORY_OFF, view=None)
    query = MemoryQuery(
        text=request.query.get("q", "").strip(),
        scope=request.query.get("whose", ""),
        category=request.query.get("category", ""),
        page=_number(request.query.get("page", "1")),
    )
    view = await memory_view(memory, query, _zone(request))
    return render(request, "memory.html", title="Memory", off="", view=view)


async def entry(request: web.Request) -> web.StreamResponse:
    """One entry, whole, with the button that forgets it."""
    memory = panel_deps(request).app.memory
    if memory is None:
        raise web.HTTPNotFound(text=MEMORY_OFF)
    try:
        row = await memory_entry(memory, int(request.match_info["memory_id"]), _zone(request))
    except UserError as exc:
        raise web.HTTPNotFound(text=f"{exc}.") from None
    return render(request, "memory_entry.html", title=f"Memory #{row.id}", entry=row)


async def forget(request: web.Request) -> web.StreamResponse:
    """Forget one entry (as ``pinclaw memory forget ID``)."""
    memory = panel_deps(request).app.memory
    memory_id = int(request.match_info["memory_id"])
    if memory is None:
        done(request, "/memory", MEMORY_OFF)
    try:
        gone = await forget_memory(memory, memory_id)
    except UserError as exc:
        await record_action(request, "memory.forget", outcome="refused", memory=memory_id)
        done(request, "/memory", f"Nothing forgotten: {exc}.")
    await record_action(
        request, "memory.forget", memory=gone.id, key=gone.key, scope=gone.scope,
        category=gone.category,
    )  # fmt: skip
    done(request, "/memory", f"Forgot #{gone.id} '{gone.key}'.")


def _zone(request: web.Request) -> ZoneInfo:
    return panel_deps(request).app.loaded.timezone()


def _number(text: str) -> int:
    return int(text) if text.isdigit() else 1


MEMORY_OFF = (
    "Memory is turned off ([memory] enabled = false): turn it on in the config and restart PinClaw."
)
