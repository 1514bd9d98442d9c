"""HTTP for providers: one place for retries, Retry-After, timeouts and error mapping.

Every provider sends its requests through ``ProviderHttp``, so a 429 or a 5xx is
handled the same way whichever wire format is spoken: retried with exponential
backoff, honouring ``Retry-After`` (seconds, an HTTP date, or ``retry-after-ms``),
and finally turned into a ``ProviderError`` whose message a person can read.
Streaming requests are retried only before any of the body has been read.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from bot.core.errors import (
    ProviderAuthError,
    ProviderError,
    ProviderRateLimited,
    ProviderRequestError,
    ProviderResponseError,
    ProviderUnavailable,
    ProviderUnreachable,
)

log = logging.getLogger(__name__)
RETRY_LOGGER = log.name  # each retry is one warning here; ``retry_notice`` reads it

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard to try: retries after the first attempt, backoff, longest wait honoured."""

    max_retries: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0


class ProviderHttp:
    """Sends JSON to one provider with retries; owns no client (the app does)."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        label: str,
        *,
        policy: RetryPolicy | None = None,
        timeout_s: float = 60.0,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._client = client
        self.label = label
        self._policy = policy or RetryPolicy()
        self._timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))
        self._sleep = sleep

    async def post_json(self, url: str, body: Mapping[str, Any], headers: Mapping[str, str]) -> Any:
        """POST ``body`` as JSON and return the decoded JSON answer."""
        async with self._send(url, body, headers) as response:
            try:
                raw = await response.aread()
            except (httpx.TransportError, httpx.StreamError) as exc:
                raise ProviderUnreachable(
                    f"the connection to {self.label} broke mid-answer ({_describe(exc)})",
                    provider=self.label,
                ) from exc
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ProviderResponseError(
                f"{self.label} answered with something that is not JSON ({_snippet(raw)})",
                provider=self.label,
            ) from exc

    @asynccontextmanager
    async def stream(
        self, url: str, body: Mapping[str, Any], headers: Mapping[str, str]
    ) -> AsyncIterator[httpx.Response]:
        """POST ``body`` and yield the open response of a successful streaming request."""
        async with self._send(url, body, headers) as response:
            try:
                yield response
            except (httpx.TransportError, httpx.StreamError) as exc:
                raise ProviderUnreachable(
                    f"the connection to {self.label} broke mid-answer ({_describe(exc)})",
                    provider=self.label,
                ) from exc

    @asynccontextmanager
    async def _send(
        self, url: str, body: Mapping[str, Any], headers: Mapping[str, str]
    ) -> AsyncIterator[httpx.Response]:
        attempt = 0
        while True:
            response, error, wait = await self._attempt(url, body, headers)
            if response is not None:
                try:
                    yield response
                finally:
                    await response.aclose()
                return
            assert error is not None
            if not error.retryable or attempt >= self._policy.max_retries:
                raise error
            delay = wait if wait is not None else self._backoff(attempt)
            if delay > self._policy.max_delay_s:
                log.warning(
                    "%s asks to wait %.0f s, longer than the %.0f s PinClaw waits; giving up",
                    self.label,
                    delay,
                    self._policy.max_delay_s,
                )
                raise error
            attempt += 1
            log.warning(
                "%s failed (%s); retry %d of %d in %.1f s",
                self.label,
                " ".join(str(error).split()),  # one line, whatever the server wrote
                attempt,
                self._policy.max_retries,
                delay,
                extra={
                    "provider": self.label,
                    "retry_reason": _reason(error),
                    "attempt": attempt,
                    "max_retries": self._policy.max_retries,
                    "delay_s": round(delay, 2),
                },
            )
            await self._sleep(delay)

    async def _attempt(
        self, url: str, body: Mapping[str, Any], headers: Mapping[str, str]
    ) -> tuple[httpx.Response | None, ProviderError | None, float | None]:
        """One try: the open response on success, else the error and any Retry-After."""
        try:
            request = self._client.build_request(
                "POST", url, json=body, headers=dict(headers), timeout=self._timeout
            )
            response = await self._client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            message = f"{self.label} did not answer in time at {_origin(url)} ({_describe(exc)})"
            return None, ProviderUnreachable(message, provider=self.label), None
        except httpx.TransportError as exc:
            message = f"cannot reach {self.label} at {_origin(url)} ({_describe(exc)})"
            return None, ProviderUnreachable(message, provider=self.label), None
        if response.is_success:
            return response, None, None
        try:
            raw = await response.aread()
        except httpx.HTTPError:
            raw = b""
        finally:
            await response.aclose()
        error = status_error(self.label, response.status_code, raw)
        return None, error, retry_after_seconds(response.headers)

    def _backoff(self, attempt: int) -> float:
        base: float = self._policy.base_delay_s * (2**attempt)
        return min(base, self._policy.max_delay_s) * random.uniform(0.8, 1.2)


@dataclass(frozen=True, slots=True)
class RetryNotice:
    """What a retry log record says: attempt ``attempt`` of ``max_retries``, and why."""

    attempt: int
    max_retries: int
    reason: str  # unreachable | rate_limited | server_error


def retry_notice(record: logging.LogRecord) -> RetryNotice | None:
    """The retry a record of this module's logger announces, if it announces one."""
    attempt, total = getattr(record, "attempt", None), getattr(record, "max_retries", None)
    if record.name != log.name or not isinstance(attempt, int) or not isinstance(total, int):
        return None
    return RetryNotice(attempt, total, str(getattr(record, "retry_reason", "")))


def _reason(error: ProviderError) -> str:
    if isinstance(error, ProviderRateLimited):
        return "rate_limited"
    if isinstance(error, ProviderUnavailable):
        return "server_error"
    return "unreachable"  # refused, timed out, or cut off


def status_error(label: str, status: int, raw: bytes) -> ProviderError:
    """Map an unsuccessful HTTP status to the matching ``ProviderError``."""
    detail = error_detail(raw)
    suffix = f": {detail}" if detail else ""
    if status in (401, 403):
        return ProviderAuthError(
            f"{label} rejected the API key (HTTP {status}){suffix}", provider=label, status=status
        )
    if status == 429:
        return ProviderRateLimited(
            f"{label} is rate limiting requests (HTTP 429){suffix}", provider=label, status=status
        )
    if status >= 500:
        return ProviderUnavailable(
            f"{label} failed with a server error (HTTP {status}){suffix}",
            provider=label,
            status=status,
        )
    return ProviderRequestError(
        f"{label} refused the request (HTTP {status}){suffix}", provider=label, status=status
    )


def error_detail(raw: bytes, limit: int = 300) -> str:
    """Pull the human-readable message out of a provider's error body."""
    try:
        data = json.loads(raw)
    except ValueError:
        return _snippet(raw, limit)
    candidates: list[Any] = []
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):
            candidates.append(err.get("message"))
        candidates += [err, data.get("message"), data.get("detail")]
    elif isinstance(data, list) and data and isinstance(data[0], dict):
        return error_detail(json.dumps(data[0]).encode(), limit)
    for item in candidates:
        if isinstance(item, str) and item.strip():
            return _shorten(" ".join(item.split()), limit)  # one line: it may reach a chat
    return _snippet(raw, limit)


def retry_after_seconds(headers: httpx.Headers) -> float | None:
    """Read ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date); None if absent."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


async def iter_sse(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """Yield ``(event, data)`` pairs of a server-sent event stream."""
    event, data = "", list[str]()
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "", []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
    if data:
        yield event, "\n".join(data)


async def iter_ndjson(response: httpx.Response) -> AsyncIterator[Any]:
    """Yield one decoded JSON value per non-empty line."""
    async for line in response.aiter_lines():
        if line.strip():
            yield json.loads(line)


def _origin(url: str) -> str:
    parsed = httpx.URL(url)
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{parsed.host}{port}"


def _describe(exc: Exception) -> str:
    text = str(exc).strip()
    name = type(exc).__name__
    return f"{name}: {_shorten(text, 120)}" if text else name


def _snippet(raw: bytes, limit: int = 120) -> str:
    """A body that is not the provider's JSON, in a few words: an HTML page (a proxy's or a
    crashed server's, which may hold a traceback) by its title only."""
    text = raw.decode("utf-8", "replace").strip()
    if _HTML.match(text):
        title = _TITLE.search(text)
        name = " ".join(title.group(1).split()) if title else ""
        return f'an HTML page ("{_shorten(name, 80)}")' if name else "an HTML page"
    text = " ".join(text.split())
    return _shorten(text, limit) if text else "empty body"


_HTML = re.compile(r"<(!doctype\s+html|html|head|body)\b", re.IGNORECASE)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title", re.IGNORECASE | re.DOTALL)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
