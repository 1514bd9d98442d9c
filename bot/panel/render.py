"""Rendering a page: Jinja2 templates (autoescaped) in the shared layout ``base.html``.

``render(request, "page.html", title=..., **context)`` returns the HTML
response. Every template sees ``nav``, ``active`` (the current section's
path), ``session``, ``csrf`` (put it in every form as ``<input type="hidden"
name="csrf" value="{{ csrf }}">``), ``notices`` (from ``actions.notify``) and
``zone``. Filters: ``when`` (a Unix time as local date and time, in ``zone``),
``ago`` and ``until`` (a Unix time relative to now), ``duration`` (seconds).
"""

from __future__ import annotations

import functools
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from aiohttp import web

from bot.core.durations import format_duration
from bot.panel.auth import AUTH
from bot.panel.context import SESSION_KEY, PanelSession, panel_deps
from bot.panel.pages import NAV

if TYPE_CHECKING:
    from jinja2 import Environment


def render(
    request: web.Request, template: str, *, status: int = 200, **context: Any
) -> web.Response:
    """``template`` rendered with ``context`` and the layout's own values."""
    session: PanelSession | None = request.get(SESSION_KEY)
    notices: list[str] = []
    if session is not None:
        notices = request.app[AUTH].sessions.notices(session.key)
    deps = panel_deps(request)
    values: dict[str, Any] = {
        "title": "",
        "nav": NAV,
        "active": _section(request.path),
        "session": session,
        "csrf": session.csrf if session is not None else "",
        "notices": notices,
        "zone": deps.app.loaded.timezone(),
        **context,
    }
    html = environment().get_template(template).render(values)
    return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")


def _section(path: str) -> str:
    first = path.strip("/").split("/", 1)[0]
    return f"/{first}"


@functools.cache
def environment() -> Environment:
    """The templates' environment, built on the first page served (Jinja2 costs about
    2 MiB, which a daemon whose panel nobody opens need not carry)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined, pass_context

    env = Environment(
        loader=PackageLoader("bot.panel", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = pass_context(_when)
    env.filters["duration"] = format_duration
    env.filters["ago"] = _ago
    env.filters["until"] = _until
    return env


def _when(context: Any, timestamp: float | None) -> str:
    if not timestamp:
        return "—"
    zone: ZoneInfo = context["zone"]
    return datetime.fromtimestamp(timestamp, zone).strftime("%Y-%m-%d %H:%M")


def _ago(timestamp: float | None) -> str:
    if not timestamp:
        return "—"
    return f"{format_duration(max(0.0, time.time() - timestamp))} ago"


def _until(timestamp: float | None) -> str:
    if not timestamp:
        return "—"
    left = timestamp - time.time()
    return f"in {format_duration(left)}" if left > 0 else "now"
