"""What a person does in the panel: recorded in the audit log, answered with a notice.

``await record_action(request, "approval.decide", approval=..., choice=...)``
appends ``{"kind": "panel", "person", "person_id", "client", "action",
"outcome", "details"}`` to the same hash-chained log the policy gate writes
(its tool-call entries have no ``kind``). ``done(request, "/path", "Saved.")``
keeps a notice for the next page and redirects there (303, so a reload does
not repeat the POST).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any, NoReturn

from aiohttp import web

from bot.panel.auth import AUTH
from bot.panel.context import panel_deps, panel_session

log = logging.getLogger(__name__)


async def record_action(
    request: web.Request, action: str, *, outcome: str = "ok", **details: Any
) -> None:
    """Append one panel action, with the person logged in, to the audit log."""
    deps = panel_deps(request)
    session = panel_session(request)
    entry = {
        "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "kind": "panel",
        "person": session.person_name,
        "person_id": session.person_id,
        "client": request.app[AUTH].client(request),
        "action": action,
        "outcome": outcome,
        "details": deps.app.security.redactor.arguments(details),
    }
    try:
        await deps.audit.append(entry)
    except OSError as exc:
        log.error("could not write the audit log %s: %s", deps.audit.path, exc)


def notify(request: web.Request, text: str) -> None:
    """Show ``text`` on the session's next page."""
    request.app[AUTH].sessions.notify(panel_session(request).key, text)


def done(request: web.Request, path: str, notice: str = "") -> NoReturn:
    """Redirect to ``path`` after a state change, with an optional notice."""
    if notice:
        notify(request, notice)
    raise web.HTTPSeeOther(path)
