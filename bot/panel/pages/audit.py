"""The Audit page: the audit log, filtered and paged, and its hash chain verified.

The log is the JSON-lines file the policy gate appends to
(``bot.security.audit``), the one ``pinclaw audit show`` reads; it holds tool
calls and, marked ``"kind": "panel"``, what people did in the panel
(``bot.panel.actions``). It is read line by line in a worker thread, newest
entries first, keeping only the entries of the page asked for, so a long log
costs time but not memory. "Verify chain" runs ``bot.security.audit.verify``,
as ``pinclaw audit verify``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from aiohttp import web

from bot.panel.context import panel_deps
from bot.panel.render import render
from bot.panel.router import PanelRouter
from bot.panel.tool_calls import PANEL
from bot.security.audit import verify
from bot.store.people import PeopleStore
from bot.store.people_rows import identity_of

PER_PAGE = 50
ARGUMENT_CHARS = 200


@dataclass(frozen=True, slots=True)
class AuditFilters:
    """What to show: entries of one tool, decision, person, chat or day; one page."""

    tool: str = ""  # a tool's name, or a panel action such as "cron.add"
    decision: str = ""  # a tool call's decision, or a panel action's outcome
    person: int | None = None  # a person's id: entries from any of their accounts
    chat: str = ""  # part of the session, e.g. "telegram:7001"
    day: str = ""  # YYYY-MM-DD in the configured time zone
    page: int = 1


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One entry, readably: a tool call, or (``kind`` "panel") a person's action in the panel."""

    kind: str
    seq: int
    time: str
    session: str
    sender: str
    who: str  # the person behind the sender, where PinClaw knows them
    origin: str
    tool: str
    arguments: str
    risk: str
    decision: str
    approved_by: str
    reason: str
    outcome: str
    error: str
    duration_ms: float


@dataclass(frozen=True, slots=True)
class AuditView:
    """A page of the log and what the filters can choose from."""

    exists: bool
    filters: AuditFilters
    rows: tuple[AuditRow, ...]
    matched: int
    pages: int
    tools: tuple[str, ...]
    decisions: tuple[str, ...]
    people: tuple[tuple[int, str], ...]
    unreadable: int  # lines that are not entries (the chain check says more)


@dataclass(frozen=True, slots=True)
class ChainCheck:
    """The hash-chain verification, in the words of ``pinclaw audit verify``."""

    ok: bool
    entries: int
    text: str


async def audit_view(
    path: Path, people: PeopleStore, filters: AuditFilters, zone: ZoneInfo
) -> AuditView:
    """The page of entries ``filters`` asks for, newest first."""
    everyone = await people.all()
    # Calls made in the panel name the person by id (``bot.panel.tool_calls``).
    owned = {p.id: {i.identity for i in p.identities} | {identity_of(PANEL, str(p.id))}
             for p in everyone}  # fmt: skip
    names = {identity: p.name for p in everyone for identity in owned[p.id]}
    choices = tuple((p.id, f"{p.name} #{p.id}") for p in everyone)
    chosen = owned.get(filters.person or 0, set())
    accounts = frozenset(chosen)
    view = await asyncio.to_thread(_read, path, filters, names, accounts, zone)
    return replace(view, people=choices)


async def check_chain(path: Path) -> ChainCheck:
    """Verify the log's hash chain (in a worker thread: it reads the whole file)."""
    return await asyncio.to_thread(_check, path)


def _check(path: Path) -> ChainCheck:
    if not path.exists():
        return ChainCheck(True, 0, "No audit log yet (no tool has been called): nothing to verify.")
    result = verify(path)
    if result.ok:
        text = f"OK: {result.entries} entries, the hash chain is intact."
        return ChainCheck(True, result.entries, text)
    return ChainCheck(
        False,
        result.entries,
        f"BROKEN at line {result.line}: {result.problem} "
        f"(the {result.entries} entries before it are intact).",
    )


def _read(
    path: Path,
    filters: AuditFilters,
    names: Mapping[str, str],
    accounts: frozenset[str],
    zone: ZoneInfo,
) -> AuditView:
    page = max(1, filters.page)
    kept: deque[dict[str, Any]] = deque(maxlen=page * PER_PAGE)
    tools: set[str] = set()
    decisions: set[str] = set()
    matched = unreadable = 0
    exists = path.exists()
    for entry in _entries(path) if exists else iter(()):
        if entry is None:
            unreadable += 1
            continue
        tools.add(_what(entry))
        decisions.add(_verdict(entry))
        if _matches(entry, filters, accounts, zone):
            matched += 1
            kept.append(entry)
    pages = max(1, -(-matched // PER_PAGE))
    page = min(page, pages)
    # ``kept`` holds the newest ``page * PER_PAGE`` matches, oldest first.
    newest_first = list(reversed(kept))[(page - 1) * PER_PAGE : page * PER_PAGE]
    rows = tuple(_row(entry, names, zone) for entry in newest_first)
    return AuditView(
        exists,
        replace(filters, page=page),
        rows,
        matched,
        pages,
        tuple(sorted(tools - {""})),
        tuple(sorted(decisions - {""})),
        (),
        unreadable,
    )


def _entries(path: Path) -> Iterator[dict[str, Any] | None]:
    with path.open(encoding="utf-8", errors="replace") as handle:
        for raw in handle:
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw)
            except ValueError:
                yield None
                continue
            yield entry if isinstance(entry, dict) else None


def _is_panel(entry: Mapping[str, Any]) -> bool:
    return entry.get("kind") == "panel"


def _what(entry: Mapping[str, Any]) -> str:
    return str(entry.get("action" if _is_panel(entry) else "tool", ""))


def _verdict(entry: Mapping[str, Any]) -> str:
    return str(entry.get("outcome" if _is_panel(entry) else "decision", ""))


def _identity(entry: Mapping[str, Any]) -> str:
    channel = str(entry.get("session", "")).partition(":")[0]
    return identity_of(channel, str(entry.get("sender", "")))


def _matches(
    entry: Mapping[str, Any], filters: AuditFilters, accounts: frozenset[str], zone: ZoneInfo
) -> bool:
    if filters.tool and _what(entry) != filters.tool:
        return False
    if filters.decision and _verdict(entry) != filters.decision:
        return False
    if filters.chat and filters.chat.lower() not in str(entry.get("session", "")).lower():
        return False
    if filters.person is not None:
        if _is_panel(entry):
            if entry.get("person_id") != filters.person:
                return False
        elif _identity(entry) not in accounts:
            return False
    return not filters.day or _local(entry, zone)[:10] == filters.day


def _row(entry: Mapping[str, Any], names: Mapping[str, str], zone: ZoneInfo) -> AuditRow:
    panel = _is_panel(entry)
    arguments = json.dumps(entry.get("details" if panel else "arguments", {}), ensure_ascii=False)
    if len(arguments) > ARGUMENT_CHARS:
        arguments = arguments[: ARGUMENT_CHARS - 1] + "…"
    who = str(entry.get("person", "")) if panel else names.get(_identity(entry), "")
    return AuditRow(
        kind="panel" if panel else "tool",
        seq=int(entry.get("seq", 0) or 0),
        time=_local(entry, zone)[:19].replace("T", " "),
        session=str(entry.get("client" if panel else "session", "")),
        sender=str(entry.get("sender", "")),
        who=who,
        origin="panel" if panel else str(entry.get("origin", "")),
        tool=_what(entry),
        arguments=arguments,
        risk=str(entry.get("risk", "")),
        decision=_verdict(entry),
        approved_by=str(entry.get("approved_by", "")),
        reason=str(entry.get("reason", "")),
        outcome=str(entry.get("outcome", "")),
        error=str(entry.get("error", "")),
        duration_ms=float(entry.get("duration_ms", 0) or 0),
    )


def _local(entry: Mapping[str, Any], zone: ZoneInfo) -> str:
    """The entry's time in ``zone``, ISO-formatted ("" when it has none)."""
    stamp = str(entry.get("ts", ""))
    try:
        return datetime.fromisoformat(stamp).astimezone(zone).isoformat()
    except ValueError:
        return stamp


def routes(router: PanelRouter) -> None:
    """``/audit`` (filters in the query) and ``/audit/verify`` (the same, chain checked)."""
    router.get("/audit", page)
    router.get("/audit/verify", verify_page)


async def page(request: web.Request) -> web.StreamResponse:
    """A page of the log, newest first, filtered."""
    return await _render(request, None)


async def verify_page(request: web.Request) -> web.StreamResponse:
    """The log with the result of verifying its hash chain on top (changes nothing)."""
    return await _render(request, await check_chain(panel_deps(request).audit.path))


def filters_of(query: Mapping[str, str]) -> AuditFilters:
    """The filters in a query string; what cannot be read is left out."""
    person = query.get("person", "")
    day = query.get("day", "").strip()
    page = query.get("page", "1")
    return AuditFilters(
        tool=query.get("tool", "").strip(),
        decision=query.get("decision", "").strip(),
        person=int(person) if person.isdigit() else None,
        chat=query.get("chat", "").strip(),
        day=day if _DAY.fullmatch(day) else "",
        page=int(page) if page.isdigit() else 1,
    )


async def _render(request: web.Request, check: ChainCheck | None) -> web.StreamResponse:
    deps = panel_deps(request)
    filters = filters_of(request.query)
    view = await audit_view(deps.audit.path, deps.app.people, filters, deps.app.loaded.timezone())
    query = {k: v for k, v in request.query.items() if k != "page" and v}
    return render(request, "audit.html", title="Audit log", view=view, check=check, query=query)


_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
