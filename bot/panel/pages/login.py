"""Logging in with the token from ``pinclaw web token``, and logging out.

The login form has no session to carry a CSRF token, so it uses a second
cookie with the same random value as a hidden field (double submit). Tries are
limited per client address (``TryLimiter``): each takes one before its token
check awaits the database, the right token gives it back, and once the wrong
ones fill the window the answer is 429.
"""

from __future__ import annotations

import hmac
import logging
import secrets

from aiohttp import web

from bot.panel.actions import record_action
from bot.panel.auth import AUTH, COOKIE
from bot.panel.context import SESSION_KEY, panel_deps, panel_session
from bot.panel.render import render
from bot.panel.router import CSRF_FIELD, PanelRouter

log = logging.getLogger(__name__)

LOGIN_COOKIE = "pinclaw_login"


def routes(router: PanelRouter) -> None:
    """``/login`` (GET, POST) and ``/logout`` (POST)."""
    router.get("/login", login_page, public=True)
    router.post("/login", login, public=True)
    router.post("/logout", logout)


async def login_page(request: web.Request) -> web.StreamResponse:
    """The login form (or straight on, for a browser that is logged in)."""
    if SESSION_KEY in request:
        raise web.HTTPSeeOther(_next(request.query.get("next", "")))
    return await _form(request, "", 200)


async def login(request: web.Request) -> web.StreamResponse:
    """Check the token; start a session for the owner."""
    auth = request.app[AUTH]
    client = auth.client(request)
    form = await request.post()
    taken = auth.limiter.reserve(client)  # before the check awaits: a burst cannot outrun it
    if taken is None:
        log.warning("panel login from %s refused: too many failed tries", client)
        wait = int(auth.limiter.wait_s(client)) + 1
        message = f"Too many wrong tokens from your address. Wait {wait} seconds, then try again."
        return await _form(request, message, 429)
    sent, cookie = str(form.get(CSRF_FIELD, "")), request.cookies.get(LOGIN_COOKIE, "")
    if not sent or not hmac.compare_digest(sent.encode(), cookie.encode()):
        auth.limiter.refund(client, taken)  # no token was checked
        return await _form(request, "The login form expired; try again.", 403)
    if not await auth.tokens.check(str(form.get("token", ""))):
        log.warning("panel login from %s failed: wrong token", client)
        message = (
            "That is not the current login token. Run `pinclaw web token` on the "
            "PinClaw machine to make a new one."
        )
        return await _form(request, message, 401)
    auth.limiter.refund(client, taken)  # the right token: only wrong ones count
    owner = await panel_deps(request).app.people.owner()
    value = await auth.sessions.create(owner.id, client)
    session = await auth.sessions.get(value)
    assert session is not None  # just made
    request[SESSION_KEY] = session
    await record_action(request, "login")
    log.info("panel login by %s from %s", owner.name, client)
    response = web.HTTPSeeOther(_next(str(form.get("next", ""))))
    auth.set_cookie(response, value, panel_deps(request).web.session_lifetime_s)
    response.del_cookie(LOGIN_COOKIE, path="/login")
    raise response


async def logout(request: web.Request) -> web.StreamResponse:
    """End this browser's session."""
    session = panel_session(request)
    await record_action(request, "logout")
    await request.app[AUTH].sessions.end(session.key)
    response = web.HTTPSeeOther("/login")
    response.del_cookie(COOKIE, path="/")
    raise response


async def _form(request: web.Request, error: str, status: int) -> web.Response:
    auth = request.app[AUTH]
    value = secrets.token_urlsafe(16)
    response = render(
        request,
        "login.html",
        status=status,
        title="Log in",
        error=error,
        login_csrf=value,
        next=_next(request.query.get("next", "")),
        token_issued=await auth.tokens.exists(),
    )
    response.set_cookie(
        LOGIN_COOKIE, value, path="/login", httponly=True, samesite="Strict", secure=auth.secure
    )
    return response


def _next(target: str) -> str:
    """Only a path on this server: never ``//elsewhere`` or ``/\\elsewhere`` (browsers
    read a backslash as a slash), nor anything with control characters."""
    safe = target.startswith("/") and not target.startswith("//")
    safe = safe and "\\" not in target and target.isprintable()
    return target if safe else "/"
