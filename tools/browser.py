"""The browser tools: ``browser_open`` reads a rendered page, ``browser_screenshot`` shows one.

They drive the system's Chromium through Playwright (``bot/browser``), and are
offered only when ``[browser] enabled``, Playwright is installed (the
``pinclaw[browser]`` extra) and a Chromium is found; Playwright is imported
at the first call. Every request a page makes goes through PinClaw's network
policy, as ``http_request``'s do (``bot/browser/service.py``): a page that
redirects to, or loads anything from, a refused address gets nothing from it.

Both are low risk, like ``web_fetch``: they read a page (a GET, as a person's
browser would) and show it to the people of the chat. What they bring back is
untrusted, and taints the turn with the page's address.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlsplit

from pydantic import Field

from bot.browser.chromium import find_chromium, has_playwright
from bot.config import LoadedConfig
from bot.core.errors import Refused, ToolError
from bot.core.messages import OutboundFile
from bot.core.tool_api import Assessment, Tool, ToolContext, tool
from bot.security.files.paths import PathGuard
from tools.web import Url, read_from_url

if TYPE_CHECKING:
    from playwright.async_api import Page, Response

    from bot.browser.service import BrowserService, Visit
    from bot.security.kit import SecurityKit

SETTLE_S = 3.0  # after "load", how long to wait for the page's own requests to end
MAX_SHOT_HEIGHT = 8000  # a full-page screenshot is cut there (an endless page stays a picture)
SCREENSHOTS_DIR = "screenshots"
_FAILED = re.compile(r"net::ERR_(TUNNEL_CONNECTION_FAILED|BLOCKED_BY_CLIENT|PROXY_\w+)")


def build(loaded: LoadedConfig, security: SecurityKit) -> list[Tool]:
    """The browser tools, when they are enabled and a Chromium and Playwright are there."""
    config = loaded.config.browser
    if not config.enabled or not has_playwright():
        return []
    found = find_chromium(config)
    if found.path is None:
        return []
    from bot.browser.service import BrowserService

    def check_url(url: str) -> None:
        security.net.check_url(url)  # the network guard is built at the first use

    service = BrowserService(
        config,
        found.path,
        egress=lambda: security.egress,
        check_url=check_url,
        profiles=loaded.data_dir / "browser",
    )
    security.close_with(service.aclose)
    paths = security.paths
    guard = PathGuard(paths.workspace, forbidden=paths.forbidden, home=paths.home)
    return browser_tools(service, security, guard)


def browser_tools(service: BrowserService, security: SecurityKit, guard: PathGuard) -> list[Tool]:
    """``browser_open`` and ``browser_screenshot`` on ``service``."""
    timeout_s = service.config.page_timeout_s + 60.0  # a first call also starts the browser

    def assess(ctx: ToolContext, url: str, **_: object) -> Assessment:
        try:
            security.net.check_url(url)
        except Refused as exc:
            return Assessment("high", str(exc), forbidden=True)
        return Assessment("low", f"open {url} in the browser")

    @tool(
        effect="network",
        untrusted_output=True,
        assess=assess,
        taints=read_from_url,
        timeout_s=timeout_s,
    )
    async def browser_open(ctx: ToolContext, url: Url) -> str:
        """Open a web page in a real browser (JavaScript runs) and return what it shows:
        title, text, and its links numbered [1] text → url.

        Use it for pages that build themselves with JavaScript (dashboards, web apps),
        where web_fetch comes back empty; web_fetch is quicker for plain pages.
        """
        from bot.browser.reading import MAX_LABEL, MAX_LINKS, READ_PAGE, page_text, parse_reading

        async with service.visit(url) as visit:
            response = await _navigate(visit, url)
            found = await visit.page.evaluate(READ_PAGE, [MAX_LINKS, MAX_LABEL])
            return page_text(
                title=await visit.page.title(),
                url=visit.page.url,
                redirects=_redirects(response),
                reading=parse_reading(found),
                refused=visit.refusals(),
                max_chars=security.net.max_bytes,
            )

    @tool(
        effect="network",
        untrusted_output=True,
        assess=assess,
        taints=read_from_url,
        timeout_s=timeout_s,
    )
    async def browser_screenshot(
        ctx: ToolContext,
        url: Url,
        full_page: Annotated[
            bool, Field(description="true: the whole page, scrolled; false: what fits the window")
        ] = False,
        selector: Annotated[
            str | None,
            Field(description="a CSS selector: only that part of the page (its first match)"),
        ] = None,
        send: Annotated[
            bool, Field(description="send the picture to this chat (false: only save it)")
        ] = True,
    ) -> str:
        """Take a screenshot of a web page in a real browser, save it as a PNG in the
        workspace, and send it to this chat as a picture.

        Use it to show the user what a page looks like (a dashboard, a router's status page).
        """
        async with service.visit(url) as visit:
            await _navigate(visit, url)
            shown_url = visit.page.url
            png = await _shoot(visit.page, full_page=full_page, selector=selector)
            refused = visit.refusals()
        width, height = png_size(png)
        relative = await asyncio.to_thread(_save, guard, ctx, shown_url, png)
        what = f"Screenshot of {shown_url} ({width}x{height} pixels) saved as {relative}"
        if refused:
            what += f"; the network policy refused {len(refused)} request(s) of the page"
        if not send:
            return f"{what}. To show it, call send_file with path {relative}."
        if ctx.send_file is None:
            return f"{what}. It cannot be sent from here (this turn is not in a chat)."
        from bot.core.channel import DeliveryError

        file = OutboundFile(
            channel=ctx.session.channel,
            chat_id=ctx.session.chat_id,
            thread_id=ctx.session.thread_id,
            name=relative.rsplit("/", 1)[-1],
            data=png,
            mime_type="image/png",
            caption=shown_url[:1000],
            as_photo=True,
            path=relative,
        )
        try:
            await ctx.send_file(file)
        except DeliveryError as exc:
            return f"{what}, but it was not delivered: {exc}"
        return f"{what} and sent to this chat."

    return [browser_open, browser_screenshot]


async def _navigate(visit: Visit, url: str) -> Response | None:
    """Open ``url`` and let the page settle; a refused or failed main page is an error."""
    from playwright.async_api import Error

    page = visit.page
    try:
        response = await page.goto(url, wait_until="load")
    except Error as exc:
        failed = _FAILED.search(str(exc))
        refusals = visit.refusals()
        if failed and refusals:
            raise Refused(
                f"{url} could not be opened: the network policy refused {refusals[0]}"
            ) from None
        if failed and visit.visitor.unreachable:
            raise ToolError(next(iter(visit.visitor.unreachable.values()))) from None
        raise
    if response is not None:
        final = urlsplit(response.url)
        port = final.port or (443 if final.scheme == "https" else 80)
        refusal = visit.visitor.refused_at(final.hostname or "", port)
        if refusal is not None:
            reason = refusal.partition(": ")[2]
            raise Refused(f"{url} led to {response.url}, which is refused: {reason}")
        where = visit.visitor.unreachable.get(_where(final.hostname or "", port))
        if where is not None and response.status >= 500:
            raise ToolError(where)
        if response.status >= 400:
            status = f"HTTP {response.status} {response.status_text}".rstrip()
            raise ToolError(f"{response.url} answered {status}")
    with contextlib.suppress(Error):  # a page that keeps fetching is read as it is now
        await page.wait_for_load_state("networkidle", timeout=SETTLE_S * 1000)
    return response


async def _shoot(page: Page, *, full_page: bool, selector: str | None) -> bytes:
    from playwright.async_api import Error

    if selector:
        target = page.locator(selector)
        try:
            count = await target.count()
        except Error:
            raise ToolError(f"{selector!r} is not a CSS selector the browser understands") from None
        if not count:
            raise ToolError(f"nothing on the page matches the selector {selector!r}")
        return await target.first.screenshot()
    if not full_page:
        return await page.screenshot()
    height = await page.evaluate("() => document.documentElement.scrollHeight")
    if isinstance(height, int) and height > MAX_SHOT_HEIGHT:
        width = page.viewport_size["width"] if page.viewport_size else 1280
        clip = {"x": 0, "y": 0, "width": width, "height": MAX_SHOT_HEIGHT}
        return await page.screenshot(full_page=True, clip=clip)  # type: ignore[arg-type]
    return await page.screenshot(full_page=True)


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's header."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ToolError("the browser did not return a PNG picture")
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _save(guard: PathGuard, ctx: ToolContext, url: str, png: bytes) -> str:
    """Write ``png`` as ``screenshots/HOST-WHEN.png`` in the workspace; its relative path."""
    parts = urlsplit(url)
    host = re.sub(r"[^a-z0-9.-]+", "-", (parts.hostname or "page").lower()).strip("-.") or "page"
    if parts.port:
        host += f"-{parts.port}"
    stamp = ctx.now().astimezone(ctx.timezone).strftime("%Y%m%d-%H%M%S")
    relative = f"{SCREENSHOTS_DIR}/{host}-{stamp}.png"
    target = guard.check(relative)
    for n in range(2, 100):  # two shots of one page in one second: the later one gets -2
        if not target.exists():
            break
        relative = f"{SCREENSHOTS_DIR}/{host}-{stamp}-{n}.png"
        target = guard.check(relative)
    guard.write_bytes(target, png)
    return relative


def _where(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _redirects(response: Response | None) -> int:
    count = 0
    request = response.request.redirected_from if response is not None else None
    while request is not None:
        count += 1
        request = request.redirected_from
    return count
