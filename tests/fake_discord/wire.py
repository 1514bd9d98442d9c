"""HTTP plumbing shared by the REST handlers: the request view, JSON answers, rejections.

discord.py parses a body as JSON only when ``Content-Type`` is exactly
``application/json`` (aiohttp's ``json_response`` appends a charset), so answers
are built here with that header set by hand.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from tests.fake_discord.payloads import JSON

if TYPE_CHECKING:
    from tests.fake_discord.gateway import Gateway
    from tests.fake_discord.state import World


@dataclass
class Req:
    """A REST request as handlers see it: path parameters, query and decoded body."""

    method: str
    path: str
    params: dict[str, str]
    query: dict[str, str]
    body: Any
    files: list[JSON] = field(default_factory=list)

    def json(self) -> JSON:
        """The body as a JSON object (empty when there is none)."""
        return self.body if isinstance(self.body, dict) else {}


@dataclass
class Ctx:
    """What a handler may touch: the data and the gateway (for echoing events)."""

    world: World
    gateway: Gateway


class Rejected(Exception):
    """Raised by a handler to answer with a Discord error body."""

    def __init__(self, status: int, body: JSON) -> None:
        super().__init__(f"{status}: {body.get('message')}")
        self.status = status
        self.body = body


def reply(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON answer with ``Content-Type: application/json`` exactly."""
    return web.Response(
        status=status,
        body=json.dumps(data).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def no_content() -> web.Response:
    """A 204 answer."""
    return web.Response(status=204)


def rate_limit_headers(bucket: str, *, remaining: int, reset_after: float) -> dict[str, str]:
    """The X-RateLimit-* headers Discord sends (discord.py reads Remaining, Reset-After, Bucket)."""
    return {
        "X-RateLimit-Limit": "5",
        "X-RateLimit-Remaining": str(remaining),
        "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
        "X-RateLimit-Reset-After": f"{reset_after:.3f}",
        "X-RateLimit-Bucket": bucket,
    }


def rate_limited(bucket: str, retry_after: float, *, global_: bool) -> web.Response:
    """A 429 as Discord sends it.

    discord.py retries a 429 only if a ``Via`` header is present (without one it
    assumes a Cloudflare ban and raises), then sleeps ``retry_after`` from the body.
    """
    headers = rate_limit_headers(bucket, remaining=0, reset_after=retry_after)
    headers["Retry-After"] = f"{retry_after:g}"
    headers["X-RateLimit-Scope"] = "global" if global_ else "user"
    headers["Via"] = "1.1 google"
    if global_:
        headers["X-RateLimit-Global"] = "true"
    body = {"message": "You are being rate limited.", "retry_after": retry_after, "global": global_}
    return reply(body, status=429, headers=headers)
