"""The panel on the daemon's aiohttp application.

``add_panel`` registers the static files and every page of ``pages.PAGES``
(each through a guarding ``PanelRouter``) on the daemon's application, and a
middleware that puts security headers on every response: a
Content-Security-Policy that allows no inline script or style, no framing,
no referrer sent to other sites.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import web

from bot.panel.auth import AUTH, PanelAuth
from bot.panel.context import DEPS, PanelDeps
from bot.panel.pages import load_pages
from bot.panel.router import PanelRouter

STATIC = Path(__file__).parent / "static"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'self'"
)


def add_panel(app: web.Application, deps: PanelDeps) -> PanelAuth:
    """Put the panel on ``app`` (before it starts); call ``PanelAuth.setup`` before serving."""
    auth = PanelAuth(deps)
    app[DEPS] = deps
    app[AUTH] = auth
    app.middlewares.append(_headers)
    app.router.add_static("/static/", STATIC, append_version=False)
    load_pages(PanelRouter(app))
    return auth


@web.middleware
async def _headers(request: web.Request, handler: Any) -> web.StreamResponse:
    """Security headers on every response (the API's JSON included: they do no harm)."""
    try:
        response: web.StreamResponse = await handler(request)
    except web.HTTPException as exc:
        _secure(exc, request)
        raise
    _secure(response, request)
    return response


def _secure(response: web.StreamResponse, request: web.Request) -> None:
    headers = response.headers
    headers["Content-Security-Policy"] = CSP
    headers["X-Frame-Options"] = "DENY"
    # Not "no-referrer": with it, browsers send ``Origin: null`` with the panel's own forms.
    headers["Referrer-Policy"] = "same-origin"
    headers["X-Content-Type-Options"] = "nosniff"
    if request.app[AUTH].secure:
        headers["Strict-Transport-Security"] = "max-age=31536000"
    if not request.path.startswith("/static/"):
        headers["Cache-Control"] = "no-store"
