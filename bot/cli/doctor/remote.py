"""Checks over the network: each model provider (one tiny request, timed), each chat
channel's credentials (without starting it), and whether a daemon answers locally."""

from __future__ import annotations

import asyncio
import time

import httpx
from pydantic import BaseModel

from bot.cli.doctor.findings import Finding
from bot.config import Config
from bot.config.provider import ProviderSpec
from bot.config.web import WebConfig
from bot.core.errors import (
    ProviderAuthError,
    ProviderError,
    ProviderRateLimited,
    ProviderRequestError,
    ProviderResponseError,
    ProviderUnavailable,
    ProviderUnreachable,
)

PROVIDER_TIMEOUT_S = 10.0
LOCAL_MODEL_TIMEOUT_S = 30.0  # Ollama loads the model into memory on the first request
CHANNEL_TIMEOUT_S = 10.0
DAEMON_TIMEOUT_S = 2.0


def provider_specs(config: Config) -> list[tuple[str, str, ProviderSpec]]:
    """Every distinct provider the config names: its key, how the report names it, the spec."""
    specs: list[tuple[str, str, ProviderSpec]] = [("provider", "provider", config.provider)]
    specs += [
        (f"provider.fallbacks[{i}]", f"fallback provider {i + 1}", spec)
        for i, spec in enumerate(config.provider.fallbacks)
    ]
    specs += [
        (f"agents.{name}.provider", f"agent {name}'s provider", agent.provider)
        for name, agent in config.agents.items()
        if agent.provider
    ]
    seen: set[tuple[str, str, str, str]] = set()
    distinct = []
    for where, title, spec in specs:
        same = (spec.kind, spec.url, spec.model, spec.key())
        if same not in seen:
            seen.add(same)
            distinct.append((where, title, spec))
    return distinct


def provider_timeout(spec: ProviderSpec) -> float:
    """How long the tiny request may take."""
    return LOCAL_MODEL_TIMEOUT_S if spec.kind == "ollama" else PROVIDER_TIMEOUT_S


async def provider(where: str, title: str, spec: ProviderSpec) -> Finding:
    """Ask for one token, once (no retries), and time the answer."""
    from bot.core.conversation import ChatMessage, CompletionRequest
    from bot.core.tls import shared_ssl_context
    from bot.providers import build_provider

    name = f"{title} {spec.label}"
    quick = spec.model_copy(update={"max_retries": 0, "timeout_s": provider_timeout(spec)})
    request = CompletionRequest(system="", messages=(ChatMessage("user", "ping"),), max_tokens=1)
    async with httpx.AsyncClient(verify=shared_ssl_context(), follow_redirects=False) as client:
        model = build_provider(quick, client)
        started = time.monotonic()
        try:
            await model.complete(request)
        except ProviderError as exc:
            said = str(exc)  # names the provider, as a rule
            text = f"{title}: {said}" if spec.label in said else f"{name}: {said}"
            return Finding(where, "fail", text, _provider_fix(where, spec, exc))
    took = round((time.monotonic() - started) * 1000)
    return Finding(where, "ok", f"{name} answered in {took} ms", latency_ms=took)


def _provider_fix(where: str, spec: ProviderSpec, exc: ProviderError) -> str:
    if isinstance(exc, ProviderAuthError):
        return f"check {where}.api_key: the key may be wrong, expired or revoked"
    if isinstance(exc, ProviderUnreachable):
        if spec.base_url is not None:
            return f"check {where}.base_url and that the server runs"
        if spec.kind == "ollama":
            return f"check that Ollama runs (ollama serve), or set {where}.base_url"
        return "check the network connection"
    if isinstance(exc, ProviderRateLimited):
        return "wait a minute and run doctor again; if it persists, check the account's quota"
    if isinstance(exc, ProviderUnavailable):
        return "the provider's servers are failing; try again later, or add provider.fallbacks"
    if isinstance(exc, ProviderRequestError):
        pull = f" (Ollama: ollama pull {spec.model})" if spec.kind == "ollama" else ""
        return f"check {where}.model (spelled as the provider lists it?) and base_url{pull}"
    if isinstance(exc, ProviderResponseError):
        return f"check {where}.kind and base_url: the server may not speak the {spec.kind} API"
    return ""


async def channel(name: str, settings: BaseModel) -> Finding:
    """The channel's own credential check (``channels.NAME.check``), loaded only now."""
    from bot.core.channel_registry import credential_check
    from bot.core.tls import shared_ssl_context

    try:
        check = credential_check(name)
    except ModuleNotFoundError as exc:
        if exc.name != f"channels.{name}.check":
            raise
        return Finding(name, "info", f"{name}: no credential check for this channel yet")
    try:
        async with asyncio.timeout(CHANNEL_TIMEOUT_S):
            found = await check(settings, shared_ssl_context())
    except TimeoutError:
        return Finding(
            name,
            "fail",
            f"{name}: no answer within {CHANNEL_TIMEOUT_S:.0f} s",
            f"check the network connection, and channels.{name}.api_base_url if it is set",
        )
    return Finding(name, "ok" if found.ok else "fail", f"{name}: {found.detail}", found.fix)


async def daemon(web: WebConfig) -> Finding:
    """Whether a daemon answers at ``[web] listen`` (never a failure: both are normal)."""
    if not web.url:
        return Finding(
            "daemon", "info", 'daemon: cannot tell whether one runs ([web] listen = "off")'
        )
    headers = {}
    if web.token is not None:
        headers["Authorization"] = f"Bearer {web.token.get_secret_value()}"
    try:
        async with httpx.AsyncClient(timeout=DAEMON_TIMEOUT_S) as client:
            response = await client.get(f"{web.url}/healthz", headers=headers)
    except httpx.HTTPError:
        return Finding(
            "daemon",
            "info",
            f"daemon: no daemon running (nothing answers at {web.url})",
            "start it with `pinclaw run`, or `pinclaw service install` to run it as a service",
        )
    if response.status_code in (200, 503) and not _is_pinclaw(response):
        return Finding(
            "daemon",
            "warn",
            f"daemon: something else answers at {web.url}, not a PinClaw daemon",
            "give PinClaw a free port with [web] listen",
        )
    if response.status_code == 200:
        from bot.core.version import pinclaw_version

        version, installed = response.json().get("version", "?"), pinclaw_version()
        text = f"daemon: PinClaw {version} running, healthy (at {web.url})"
        if version != installed:
            return Finding("daemon", "warn", text, f"restart it to run the installed {installed}")
        return Finding("daemon", "info", text)
    if response.status_code == 503:
        return Finding(
            "daemon",
            "warn",
            f"daemon: running at {web.url}, but it reports a problem",
            "`pinclaw status` shows what is down",
        )
    if response.status_code in (401, 403):
        return Finding(
            "daemon",
            "warn",
            f"daemon: something at {web.url} refused the request ({response.status_code})",
            "check [web] token",
        )
    return Finding(
        "daemon",
        "info",
        f"daemon: something at {web.url} answers HTTP {response.status_code}, "
        "not like a PinClaw daemon",
    )


def _is_pinclaw(response: httpx.Response) -> bool:
    """Whether a /healthz answer is PinClaw's report."""
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and {"ok", "version", "channels"} <= body.keys()
