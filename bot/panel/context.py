"""What a page handler gets: the daemon's parts (``PanelDeps``) and who is logged in.

Handlers read both from the request: ``panel_deps(request)`` and
``panel_session(request)``; the app sets them before any page handler runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from bot.config.web import WebConfig
from bot.core.channel import Channel
from bot.security.audit import AuditLog

if TYPE_CHECKING:
    from bot.approvals.service import ApprovalService
    from bot.daemon.app import App
    from bot.daemon.cron import Scheduling
    from bot.daemon.health import Reporter
    from bot.triggers.service import TriggerService


@dataclass(frozen=True, slots=True)
class PanelDeps:
    """The running daemon's parts, as the panel's pages use them.

    ``app`` is the core (database, people, memory, usage, sensor readings, the
    loaded config with its time zone); ``approvals``, ``scheduling`` and
    ``triggers`` are None where the daemon has none; ``reporter`` builds the
    status report of ``pinclaw status``; ``audit`` is the same hash-chained log
    the policy gate writes.
    """

    app: App
    channels: Mapping[str, Channel]
    reporter: Reporter
    audit: AuditLog
    web: WebConfig
    approvals: ApprovalService | None = None
    scheduling: Scheduling | None = None
    triggers: TriggerService | None = None


@dataclass(frozen=True, slots=True)
class PanelSession:
    """A logged-in browser: the person it acts for and its CSRF token."""

    key: str  # the session's hash, as stored (never the cookie itself)
    person_id: int
    person_name: str
    csrf: str
    expires_at: float


DEPS: web.AppKey[PanelDeps] = web.AppKey("panel_deps", PanelDeps)
SESSION_KEY: web.RequestKey[PanelSession] = web.RequestKey("panel_session", PanelSession)


def panel_deps(request: web.Request) -> PanelDeps:
    """The daemon's parts for this request's handler."""
    return request.app[DEPS]


def panel_session(request: web.Request) -> PanelSession:
    """The logged-in session (every page but login has one; the app makes sure)."""
    if SESSION_KEY not in request:
        raise web.HTTPForbidden(text="log in first")
    return request[SESSION_KEY]
