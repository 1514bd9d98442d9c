"""Inbound webhooks: ``POST /hooks/NAME`` on the daemon's HTTP endpoint.

Each hook is authenticated by its own secret, compared in constant time: either
``Authorization: Bearer SECRET``, or, with ``signature_header`` set, an HMAC-SHA256
of the body keyed with the secret, in hex (a ``sha256=`` prefix is accepted), as
GitHub and many devices send it. Without the right secret the answer is 401 and
nothing fires; wrong guesses from one address are limited (429 after
``WRONG_TRIES`` in a minute). A body above the hook's ``max_bytes`` is refused
with 413 before it is read whole. An ``Idempotency-Key`` header makes a retried
delivery fire once.

The body becomes ``{body}``; a JSON object's keys are placeholders of their own
(``{state}``, ``{data.temperature}``), and the query string's under ``{query.NAME}``;
JSON nested deeper than ``MAX_DEPTH`` is kept as text only. A long idempotency key
is kept as its digest.
The body is text from outside: an ``ask`` turn treats it as untrusted.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.core.messages import clean_json, decode_text
from bot.security.tries import TryLimiter
from bot.triggers.sources import Emit, SourceDeps, SourceState
from bot.triggers.spec import Event, Trigger

WRONG_TRIES = 20
WRONG_WINDOW_S = 60.0
MAX_KEY_CHARS = 200
MAX_DEPTH = 64
IDEMPOTENCY_HEADERS = ("Idempotency-Key", "X-Idempotency-Key")


@dataclass(frozen=True, slots=True)
class HookAnswer:
    """The HTTP status and JSON body to answer a hook call with."""

    status: int
    body: dict[str, Any]


class WebhookSource:
    """The hooks of the current webhook triggers, by name."""

    kind = "webhook"

    def __init__(self, emit: Emit, *, listening: bool) -> None:
        self._emit = emit
        self._hooks: dict[str, Trigger] = {}
        self._listening = listening
        self._wrong = TryLimiter(WRONG_TRIES, WRONG_WINDOW_S)

    async def start(self) -> None:
        """Nothing to open: the daemon's HTTP endpoint routes the calls here."""

    async def stop(self) -> None:
        """Forget the hooks; later calls get 404."""
        self._hooks = {}

    async def watch(self, triggers: Sequence[Trigger]) -> None:
        """The hooks now served."""
        self._hooks = {t.name: t for t in triggers}

    def states(self) -> list[SourceState]:
        """One line per hook: its path, or why nobody can reach it."""
        detail = "" if self._listening else " (but the HTTP endpoint is off: [web] listen)"
        return [
            SourceState(f"webhook {name}", self._listening, f"POST /hooks/{name}{detail}")
            for name in sorted(self._hooks)
        ]

    def wanted(self, name: str) -> Trigger | None:
        """The enabled trigger behind ``/hooks/NAME``, if any."""
        return self._hooks.get(name)

    def too_big(self, trigger: Trigger, length: int | None) -> HookAnswer | None:
        """413 when the announced body is above the hook's ``max_bytes``."""
        if length is not None and length > trigger.max_bytes:
            return HookAnswer(413, {"error": f"the body is above {trigger.max_bytes} bytes"})
        return None

    async def call(
        self,
        trigger: Trigger,
        client: str,
        headers: Mapping[str, str],
        body: bytes,
        query: Mapping[str, str],
    ) -> HookAnswer:
        """Check the secret and fire the hook's trigger with the body as its event."""
        taken = self._wrong.reserve(client)  # before any await: parallel guesses count too
        if taken is None:
            wait = self._wrong.wait_s(client)
            return HookAnswer(429, {"error": f"too many wrong secrets; wait {wait:.0f} s"})
        if not _authentic(trigger, headers, body):
            return HookAnswer(401, {"error": "wrong or missing secret"})
        self._wrong.refund(client, taken)
        if len(body) > trigger.max_bytes:
            return HookAnswer(413, {"error": f"the body is above {trigger.max_bytes} bytes"})
        key = next((headers[h] for h in IDEMPOTENCY_HEADERS if headers.get(h)), "").strip()
        outcome = await self._emit(trigger.name, _event(trigger, body, query, key))
        status = 202 if outcome == "fired" else 200
        return HookAnswer(status, {"trigger": trigger.name, "outcome": outcome})


def _authentic(trigger: Trigger, headers: Mapping[str, str], body: bytes) -> bool:
    secret = trigger.secret.encode()
    if not secret:
        return False
    if trigger.signature_header:
        sent = headers.get(trigger.signature_header, "").strip()
        sent = sent.split("=", 1)[1] if sent.lower().startswith("sha256=") else sent
        expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(_raw(sent.lower()), expected.encode())
    sent_auth = headers.get("Authorization", "").strip()
    scheme, _, token = sent_auth.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(_raw(token.strip()), secret)


def _raw(header: str) -> bytes:
    # aiohttp decodes header bytes that are not UTF-8 as surrogates: give the bytes back
    return header.encode("utf-8", "surrogateescape")


def _event(trigger: Trigger, body: bytes, query: Mapping[str, str], key: str) -> Event:
    text = decode_text(body)
    fields: dict[str, Any] = {}
    try:
        parsed = clean_json(json.loads(text)) if text.strip() else None
    except (ValueError, RecursionError):  # not JSON, or nested deeper than any real event
        parsed = None
    if parsed is not None and _depth(parsed) > MAX_DEPTH:
        parsed = None  # kept as text: storing or showing it would recurse as deep
    if isinstance(parsed, dict):
        fields.update(parsed)
    if parsed is not None:
        fields["json"] = parsed
    fields["body"] = text
    fields["query"] = {k: decode_text(_raw(v)) for k, v in query.items()}
    size = f"{len(body)} bytes" if body else "no body"
    return Event(f"POST /hooks/{trigger.name} ({size})", fields, untrusted=True, key=_key(key))


def _key(sent: str) -> str:
    """The idempotency key as stored; a long one by its digest, so that two keys differing
    only after the first ``MAX_KEY_CHARS`` characters stay two keys."""
    key = decode_text(_raw(sent))
    if len(key) <= MAX_KEY_CHARS:
        return key
    return "sha256:" + hashlib.sha256(_raw(sent)).hexdigest()


def _depth(value: Any) -> int:
    """How deeply ``value`` nests (without recursion: any depth is measured safely)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def build(deps: SourceDeps, emit: Emit) -> WebhookSource:
    """The webhook source (``listening``: whether the HTTP endpoint is on)."""
    return WebhookSource(emit, listening=deps.app.loaded.config.web.address is not None)


async def read_capped(content: Any, limit: int) -> bytes:
    """Up to ``limit + 1`` bytes of a request body (one more shows it is too big)."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = await content.read(min(65536, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
