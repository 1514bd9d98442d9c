"""The daemon's HTTP endpoint: ``/healthz``, ``/metrics``, ``/status`` and the web panel.

It listens where ``[web] listen`` says (``127.0.0.1:8765`` by default; ``off``
turns it off), over TLS when ``[web] tls_cert`` and ``tls_key`` are set. The
three API paths: with ``[web] token`` set, every request must carry
``Authorization: Bearer TOKEN``; without one (loopback only, the config enforces
that) requests must name a loopback host, so a web page cannot read them through
DNS rebinding. The panel (``bot/panel``, every other path) has its own session
login; served in clear text (no TLS, no proxy: loopback only) it too answers
loopback host names only. An address already in use is logged and the daemon
runs on without the endpoint: health reports are not worth refusing to answer
chats over.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import json
import logging
import ssl
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from bot.config.web import WebConfig, is_loopback
from bot.core.errors import ConfigError, log_bug
from bot.core.metrics import enable
from bot.daemon.health import Reporter
from bot.daemon.storage import full_reason

if TYPE_CHECKING:
    from bot.panel.context import PanelDeps
    from bot.triggers.service import TriggerService

log = logging.getLogger(__name__)

API_PATHS = frozenset({"/healthz", "/metrics", "/status"})
HOOKS = "/hooks/"
_REPORTER: web.AppKey[Reporter] = web.AppKey("reporter", Reporter)
_TOKEN: web.AppKey[str] = web.AppKey("token", str)
_PANEL_HOSTS: web.AppKey[bool] = web.AppKey("panel_loopback_hosts", bool)
_PROXIED: web.AppKey[bool] = web.AppKey("behind_proxy", bool)


class WebEndpoint:
    """Starts and stops the HTTP server; idempotent both ways."""

    def __init__(
        self,
        config: WebConfig,
        reporter: Reporter,
        panel: PanelDeps | None = None,
        hooks: TriggerService | None = None,
    ) -> None:
        self._hooks = hooks
        self._config = config
        self._reporter = reporter
        self._panel = panel if config.panel else None
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        """Listen, or log why not; never raises for a busy or missing address."""
        where = self._config.address
        if where is None or self._runner is not None:
            return
        token = self._config.token.get_secret_value() if self._config.token else ""
        tls = tls_context(self._config)
        app = build_app(self._reporter, token, self._hooks, self._config.behind_proxy)
        if self._panel is not None:
            from bot.panel.app import add_panel

            await add_panel(app, self._panel).setup()
            app[_PANEL_HOSTS] = not (self._config.tls or self._config.behind_proxy)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        host, port = where
        site = web.TCPSite(runner, host, port, ssl_context=tls)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            log.error(
                "the status endpoint cannot listen on %s (%s); running without it, so "
                "`pinclaw status` cannot reach this daemon: change [web] listen",
                self._config.listen,
                exc.strerror or exc,
            )
            return
        self._runner = runner
        bound = _bound_port(runner) or port
        shown = f"[{host}]" if ":" in host else host
        self.url = f"{'https' if tls else 'http'}://{shown}:{bound}"
        enable().started.set(self._reporter.started)
        log.info("status endpoint on %s (/healthz, /metrics, /status)", self.url)
        if self._panel is not None:
            log.info("web panel on %s/ (log in with `pinclaw web token`)", self.url)

    async def stop(self) -> None:
        """Stop listening."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


def tls_context(config: WebConfig) -> ssl.SSLContext | None:
    """The server's TLS context from ``[web] tls_cert``/``tls_key`` (None without them)."""
    if config.tls_cert is None or config.tls_key is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        cert, key = Path(config.tls_cert).expanduser(), Path(config.tls_key).expanduser()
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"[web] tls_cert / tls_key: cannot load the certificate {config.tls_cert} with "
            f"the key {config.tls_key} ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    return context


def build_app(
    reporter: Reporter,
    token: str = "",
    hooks: TriggerService | None = None,
    behind_proxy: bool = False,
) -> web.Application:
    """The aiohttp application with the three read-only routes and, with ``hooks``, the
    triggers' webhooks (the panel is added after)."""
    app = web.Application(middlewares=[_guard])
    app[_REPORTER] = reporter
    app[_TOKEN] = token
    app[_PANEL_HOSTS] = True
    app[_PROXIED] = behind_proxy
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/status", _status)
    if hooks is not None:
        app.router.add_post(HOOKS + "{name}", functools.partial(_hook, hooks))
    return app


@web.middleware
async def _guard(request: web.Request, handler: Any) -> web.StreamResponse:
    if request.path.startswith(HOOKS):  # each hook checks its own secret
        response: web.StreamResponse = await handler(request)
        response.headers["Cache-Control"] = "no-store"
        return response
    if request.path not in API_PATHS:  # the panel: its own login, and its own headers
        if request.app[_PANEL_HOSTS] and not _loopback_host(request.host):
            return web.Response(status=403, text="Open the panel with a loopback address.\n")
        return await handler(request)  # type: ignore[no-any-return]
    token = request.app[_TOKEN]
    if token:
        sent = request.headers.get("Authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            return _json({"error": "send the [web] token as 'Authorization: Bearer …'"}, 401)
    elif not _loopback_host(request.host):
        return _json({"error": "only loopback host names are served without a token"}, 403)
    response = await handler(request)
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


async def _hook(hooks: TriggerService, request: web.Request) -> web.Response:
    """``POST /hooks/NAME``: a webhook trigger's call (``bot.triggers.sources.webhook``)."""
    from bot.triggers.sources.webhook import WebhookSource, read_capped

    source = hooks.sources.get("webhook")
    name = request.match_info["name"]
    trigger = source.wanted(name) if isinstance(source, WebhookSource) else None
    if trigger is None or not isinstance(source, WebhookSource):
        return _json({"error": "there is no such hook"}, 404)
    if answer := source.too_big(trigger, request.content_length):
        return _json(answer.body, answer.status)
    body = await read_capped(request.content, trigger.max_bytes)
    client = _client(request)
    try:
        answer = await source.call(trigger, client, request.headers, body, request.query)
    except Exception as exc:  # nothing was recorded: the caller may send it again
        if full_reason(exc):
            log.warning("webhook %s refused: the data folder is full", trigger.name)
            response = _json({"error": "PinClaw's data folder is full; send it again later"}, 503)
            response.headers["Retry-After"] = "60"
            return response
        error_id = log_bug(log, f"the webhook {trigger.name} could not be taken", exc)
        return _json({"error": f"something went wrong (error id {error_id})"}, 500)
    return _json(answer.body, answer.status)


async def _healthz(request: web.Request) -> web.Response:
    report = await request.app[_REPORTER].health()
    return _json(report, 200 if report["ok"] else 503)


async def _status(request: web.Request) -> web.Response:
    return _json(await request.app[_REPORTER].status())


async def _metrics(request: web.Request) -> web.Response:
    from prometheus_client import CONTENT_TYPE_LATEST

    reporter, metrics = request.app[_REPORTER], enable()
    for name, channel in reporter.channels.items():
        metrics.channel_up.labels(name).set(1 if channel.status.state == "connected" else 0)
    metrics.trigger_source_up.clear()  # a trigger removed since is no longer reported
    for state in reporter.trigger_sources():
        metrics.trigger_source_up.labels(state.what).set(1 if state.ok else 0)
    metrics.inbox_depth.set(await reporter.inbox_depth())
    metrics.owner_inbox_unread.set(await reporter.owner_unread())
    response = web.Response(body=metrics.text())
    response.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return response


def _json(body: dict[str, Any], status: int = 200) -> web.Response:
    return web.Response(
        text=json.dumps(body, ensure_ascii=False),
        status=status,
        content_type="application/json",
    )


def _client(request: web.Request) -> str:
    """Who is calling, for the limit on wrong secrets: behind a proxy, the address the
    proxy saw (the last X-Forwarded-For entry, as the panel's login reads it), so one
    stranger's guesses do not lock out every sender; else the peer, whatever it claims."""
    if request.app[_PROXIED]:
        last = request.headers.get("X-Forwarded-For", "").rsplit(",", 1)[-1].strip()
        if last:
            return last
    return request.remote or "unknown"


def _loopback_host(host: str) -> bool:
    name = host.strip()
    if name.startswith("["):
        name = name[1 : name.find("]")] if "]" in name else name[1:]
    else:
        name = name.rsplit(":", 1)[0] if name.count(":") == 1 else name
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return is_loopback(name.lower())


def _bound_port(runner: web.AppRunner) -> int | None:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    return None
