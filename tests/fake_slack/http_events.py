"""Deliver events to an app's Request URL the way Slack does over HTTP (a client, not a route).

Slack signs each request: ``X-Slack-Signature: v0=<hex>`` is HMAC-SHA256 with the
signing secret over ``v0:{timestamp}:{body}``, and ``X-Slack-Request-Timestamp`` carries
the timestamp. Retries add ``X-Slack-Retry-Num`` and ``X-Slack-Retry-Reason``.
Events are JSON; interactive payloads are ``payload=<json>`` forms; slash commands
are plain forms.

``post_event`` is a coroutine: await it in async tests (the app may run on the same
loop); from a synchronous test use ``fake.call(post_event(...))``, which runs it on
the fake's loop.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp

from tests.fake_slack.records import JSON

JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"


@dataclass(frozen=True)
class HttpAnswer:
    """The app's HTTP answer to one delivery."""

    status: int
    text: str
    content_type: str

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.text)


def signature(body: bytes, signing_secret: str, timestamp: int | str) -> str:
    """Slack's request signature: ``v0=`` + HMAC-SHA256 hex over ``v0:{ts}:{body}``."""
    base = b"v0:" + str(timestamp).encode() + b":" + body
    return "v0=" + hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()


def encode(envelope_type: str, payload: JSON) -> tuple[bytes, str]:
    """The body and content type Slack posts for a payload of this envelope type."""
    if envelope_type == "interactive":
        return urlencode({"payload": json.dumps(payload)}).encode(), FORM_TYPE
    if envelope_type == "slash_commands":
        return urlencode({k: str(v) for k, v in payload.items()}).encode(), FORM_TYPE
    return json.dumps(payload).encode(), JSON_TYPE


def signed_headers(
    body: bytes,
    signing_secret: str,
    *,
    timestamp: int | None = None,
    retry_num: int | None = None,
    retry_reason: str | None = None,
    content_type: str = JSON_TYPE,
) -> dict[str, str]:
    """The headers of a signed delivery (timestamp defaults to now)."""
    stamp = int(time.time()) if timestamp is None else timestamp
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": str(stamp),
        "X-Slack-Signature": signature(body, signing_secret, stamp),
        "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
    }
    if retry_num is not None:
        headers["X-Slack-Retry-Num"] = str(retry_num)
        headers["X-Slack-Retry-Reason"] = retry_reason or "http_timeout"
    return headers


async def post_event(
    app_url: str,
    body: JSON | str | bytes,
    signing_secret: str,
    *,
    timestamp: int | None = None,
    retry_num: int | None = None,
    retry_reason: str | None = None,
    content_type: str | None = None,
) -> HttpAnswer:
    """POST ``body`` to the app signed like Slack; a dict is sent as JSON, str/bytes as given.

    There is no timeout of its own: wrap it in ``asyncio.timeout`` where one matters.
    """
    if isinstance(body, dict):
        raw, kind = json.dumps(body).encode(), JSON_TYPE
    else:
        raw = body.encode() if isinstance(body, str) else body
        kind = FORM_TYPE if raw[:1] not in (b"{", b"[") else JSON_TYPE
    headers = signed_headers(
        raw,
        signing_secret,
        timestamp=timestamp,
        retry_num=retry_num,
        retry_reason=retry_reason,
        content_type=content_type or kind,
    )
    async with (
        aiohttp.ClientSession() as session,
        session.post(app_url, data=raw, headers=headers) as response,
    ):
        return HttpAnswer(response.status, await response.text(), response.content_type)
