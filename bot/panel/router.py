"""How a page adds its routes: ``PanelRouter``, which guards every handler.

A GET without a live session is sent to the login page; any other method
without one gets 403. A request that is not GET, HEAD or OPTIONS must carry
the session's CSRF token (form field ``csrf`` or header ``X-CSRF-Token``) and,
when the browser names one, an ``Origin`` of this server (unless behind a
proxy, which may rewrite the host), or it gets 403 before the handler runs.
The handler then finds the session with ``panel_session(request)``.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import quote, urlsplit

from aiohttp import web

from bot.panel.auth import AUTH, COOKIE
from bot.panel.context import SESSION_KEY, PanelSession

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

CSRF_FIELD = "csrf"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class PanelRouter:
    """How a page module adds its routes; every handler is guarded by the session."""

    def __init__(self, app: web.Application) -> None:
        self._app = app

    @property
    def app(self) -> web.Application:
        """The application, for a page that keeps a long-lived part on it (``app[KEY]``,
        stopped through the application's ``on_cleanup``); only while the pages are added."""
        return self._app

    def get(self, path: str, handler: Handler, *, public: bool = False) -> None:
        """A page or a read-only endpoint (a live fragment, an event stream)."""
        self._app.router.add_get(path, _guarded(handler, public), allow_head=True)

    def post(self, path: str, handler: Handler, *, public: bool = False) -> None:
        """A state change: checked for the session and its CSRF token first."""
        self._app.router.add_post(path, _guarded(handler, public))

    def route(self, method: str, path: str, handler: Handler) -> None:
        """Any other method (PUT, DELETE, a websocket's GET), guarded the same way."""
        self._app.router.add_route(method, path, _guarded(handler, False))


def _guarded(handler: Handler, public: bool) -> Handler:
    async def guarded(request: web.Request) -> web.StreamResponse:
        auth = request.app[AUTH]
        session = await auth.sessions.get(request.cookies.get(COOKIE, ""))
        if session is not None:
            request[SESSION_KEY] = session
        if request.method not in SAFE_METHODS:
            refusal = await _refuse_change(request, session, public)
            if refusal is not None:
                return refusal
        elif session is None and not public:
            target = request.path_qs if request.path != "/" else ""
            suffix = f"?next={quote(target, safe='')}" if target else ""
            raise web.HTTPSeeOther(f"/login{suffix}")
        return await handler(request)

    guarded.__name__ = getattr(handler, "__name__", "page")
    return guarded


async def _refuse_change(
    request: web.Request, session: PanelSession | None, public: bool
) -> web.Response | None:
    """403 for a state change without a session, its CSRF token, or from another site."""
    origin = request.headers.get("Origin")
    # A proxy may rewrite Host; there the session's SameSite cookie and the token remain.
    checked = origin is not None and not request.app[AUTH].behind_proxy
    if checked and (origin == "null" or urlsplit(origin or "").netloc != request.host):
        log.warning("refused a %s to %s from origin %r", request.method, request.path, origin)
        return _forbidden("This request came from another site.")
    if public:
        return None  # the login form checks its own token (there is no session yet)
    if session is None:
        return _forbidden("Log in to the panel first.")
    sent = request.headers.get(CSRF_HEADER, "")
    if not sent and request.content_type in (
        "application/x-www-form-urlencoded",
        "multipart/form-data",
    ):
        try:
            form = await request.post()  # aiohttp keeps it: the handler reads it again
        except ValueError:  # a raw byte that is not UTF-8 (no browser sends one)
            return web.Response(
                status=400,
                text="400 Bad Request: this form was not UTF-8 text, so it was not read.\n",
            )
        field = form.get(CSRF_FIELD, "")
        sent = field if isinstance(field, str) else ""
    if not sent or not hmac.compare_digest(sent.encode(), session.csrf.encode()):
        log.warning("refused a %s to %s without a valid CSRF token", request.method, request.path)
        return _forbidden("This form has expired. Go back, reload the page and try again.")
    return None


def _forbidden(text: str) -> web.Response:
    return web.Response(status=403, text=f"403 Forbidden: {text}\n")
