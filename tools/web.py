"""The web tools: ``http_request`` for web APIs and ``web_fetch`` for reading pages.

Both go through the network guard (``security.net``): public addresses only
unless the config allows a host, every redirect hop judged again, bodies capped
while they are read and every exchange bounded in time. Page text is pulled out
of HTML with the standard library's ``html.parser``.
"""

from __future__ import annotations

import codecs
import re
from typing import TYPE_CHECKING, Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from bot.config import LoadedConfig
from bot.core.errors import Refused, ToolError
from bot.core.tool_api import Assessment, Tool, ToolContext, tool
from bot.security.kit import SecurityKit

if TYPE_CHECKING:
    from bot.security.net.policy import Fetched

Method = Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
Url = Annotated[str, Field(description="the full http:// or https:// URL")]

_SHOWN_HEADERS = ("content-type", "content-length", "last-modified", "etag", "location")
_TEXT_TYPE = re.compile(r"text/.+|application/(json|xml|javascript|x-ndjson|[\w.+-]+\+(json|xml))")
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_CHARSET = re.compile(rb"""charset\s*=\s*["']?([\w.:-]+)""", re.IGNORECASE)


def build(loaded: LoadedConfig, security: SecurityKit) -> list[Tool]:
    """``http_request`` and ``web_fetch``, both through the kit's network guard."""

    def refusal(url: str) -> Assessment | None:
        try:
            security.net.check_url(url)
        except Refused as exc:
            return Assessment("high", str(exc), forbidden=True)
        return None

    def assess_request(
        ctx: ToolContext,
        url: str,
        method: Method,
        headers: dict[str, str] | None,
        body: str | None,
        timeout_s: int | None,
    ) -> Assessment:
        if refused := refusal(url):
            return refused
        if method in ("GET", "HEAD"):
            return Assessment("low", f"{method} {url}")
        return Assessment("medium", f"{method} {url} may send or change data on another site")

    def assess_fetch(ctx: ToolContext, url: str) -> Assessment:
        return refusal(url) or Assessment("low", f"read {url}")

    @tool(
        risk="medium",
        effect="network",
        untrusted_output=True,
        assess=assess_request,
        approval_fields=("method", "url"),
        taints=read_from_url,
    )
    async def http_request(
        ctx: ToolContext,
        url: Url,
        method: Method = "GET",
        headers: Annotated[
            dict[str, str] | None, Field(description="request headers, e.g. Accept")
        ] = None,
        body: Annotated[str | None, Field(description="request body (JSON as a string)")] = None,
        timeout_s: Annotated[
            int | None, Field(ge=1, description="seconds to wait; at most the configured limit")
        ] = None,
    ) -> str:
        """Send an HTTP request to a web API; returns the status, main headers and the body.

        Use web_fetch instead to read a web page as text.
        """
        content = body.encode() if body is not None else None
        fetched = await security.net.fetch(
            method, url, headers=headers, content=content, timeout_s=timeout_s
        )
        lines = [f"HTTP {fetched.status} {fetched.reason}".rstrip(), *_where(fetched)]
        lines += [f"{n}: {fetched.headers[n]}" for n in _SHOWN_HEADERS if n in fetched.headers]
        if method == "HEAD":
            return "\n".join(lines)
        return "\n".join(lines) + "\n\n" + _body(fetched)

    @tool(effect="network", untrusted_output=True, assess=assess_fetch, taints=read_from_url)
    async def web_fetch(ctx: ToolContext, url: Url) -> str:
        """Read a web page and return its text: title, headings, paragraphs, lists and links.

        Plain text and JSON come back as they are. For APIs use http_request.
        """
        fetched = await security.net.fetch(
            "GET", url, headers={"accept": "text/html, text/plain;q=0.9, */*;q=0.5"}
        )
        if fetched.status >= 400:
            raise ToolError(f"{fetched.url} answered HTTP {fetched.status} {fetched.reason}")
        if fetched.media_type in _HTML_TYPES:
            from tools.web_page import PageText  # html.parser: loaded on the first page

            reader = PageText(fetched.url)
            reader.feed(_decode(fetched))
            reader.close()
            head = [f"Title: {reader.title}"] if reader.title else []
            return "\n".join([*head, *_where(fetched, always=True)]) + "\n\n" + reader.text()
        return "\n".join(_where(fetched, always=True)) + "\n\n" + _body(fetched)

    return [http_request, web_fetch]


def read_from_url(ctx: ToolContext, values: BaseModel) -> str:
    """What a web call brought into the turn: the page it read (host and path, no query,
    which may hold a token)."""
    url = str(getattr(values, "url", ""))
    parts = urlsplit(url)
    page = (parts.netloc.rpartition("@")[2] + parts.path).rstrip("/") or url
    return page if len(page) <= 80 else page[:79] + "…"


def _where(fetched: Fetched, *, always: bool = False) -> list[str]:
    lines = []
    if fetched.redirects:
        lines.append(f"URL: {fetched.url} (after {len(fetched.redirects)} redirect(s))")
    elif always:
        lines.append(f"URL: {fetched.url}")
    if fetched.cut:
        lines.append(f"[cut: only the first {len(fetched.body)} bytes of the body were read]")
    return lines


def _body(fetched: Fetched) -> str:
    media = fetched.media_type
    if not fetched.body:
        return "[empty body]"
    if _TEXT_TYPE.fullmatch(media) or (not media and b"\0" not in fetched.body[:2048]):
        return _decode(fetched)
    size = f"{len(fetched.body)}{' or more' if fetched.cut else ''} bytes"
    return f"[binary body: {size} of {media or 'unknown type'}, not shown]"


def _decode(fetched: Fetched) -> str:
    declared = fetched.headers.get("content-type", "").encode("latin-1", "replace")
    match = _CHARSET.search(declared)
    if match is None and fetched.media_type in _HTML_TYPES:
        match = _CHARSET.search(fetched.body[:2048])
    charset = match.group(1).decode("ascii", "replace") if match else "utf-8"
    try:
        codecs.lookup(charset)
    except LookupError:
        charset = "utf-8"
    return fetched.body.decode(charset, errors="replace")
