"""The one browser: launched on first use, shared by calls, closed when idle or on stop.

Where memory may not be both writable and executable (systemd's
``MemoryDenyWriteExecute=yes``, which PinClaw's unit sets), Chromium and the
Playwright driver run JavaScript without their JIT compiler (``--jitless``).

At most one Chromium runs, started under a lock by the first call that needs
it and reused by the next ones. Each call gets a browser context of its own
(no cookies, no cache, downloads off, service workers blocked) whose every
request goes through PinClaw's egress proxy (``EgressProxy.tcp_door``), signed
in with the call's own credentials: the proxy judges each destination like
``http_request`` (DNS checked at connect time, private and loopback addresses
refused unless allowed) and tells the call what it refused. A route on the
context refuses other schemes and literal private addresses before they leave.

A context whose page's host belongs to a ``[browser.profiles]`` entry starts
from that profile's saved cookies and storage and saves them back when the
call ends (``DATA_DIR/browser/NAME.json``, mode 0600).

While a call runs, the memory of Chromium's process tree (proportional set
size: shared pages split between the processes sharing them) is read every
half second; above ``max_memory_mib`` the browser is killed and the call told
why. ``idle_s`` after the last call the browser is closed; ``aclose``
closes it at once (the daemon's stop).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from bot.browser import processes
from bot.browser.chromium import switches, writable_code_refused
from bot.config.browser import BrowserConfig
from bot.core.errors import Refused, ToolError, log_bug

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page, Playwright, Route

    from bot.security.net.egress import EgressProxy, TcpDoor, Visitor

log = logging.getLogger(__name__)

MIB = 1024 * 1024
LAUNCH_TIMEOUT_S = 60.0
WATCH_EVERY_S = 0.5
_NET_ERROR = re.compile(r"net::(ERR_[A-Z_]+)")
_TIMEOUT_NAME = "TimeoutError"


@dataclass(eq=False)
class _Running:
    """One launched browser and what closes it."""

    browser_id: str
    browser: Browser
    door: TcpDoor
    stack: AsyncExitStack
    playwright: Playwright
    watch: asyncio.Task[None] | None = None
    over_memory: int = 0
    """Bytes in use when the watch killed the browser (0: it did not)."""
    peak: int = 0

    @property
    def usable(self) -> bool:
        """Whether calls may still use it."""
        return not self.over_memory and self.browser.is_connected()


@dataclass(eq=False)
class Visit:
    """One call's page: a fresh context, signed in to the proxy as ``visitor``."""

    page: Page
    visitor: Visitor
    refused: list[str] = field(default_factory=list)
    """Requests the route refused before they left (another scheme, a private address)."""

    def refusals(self) -> list[str]:
        """Every request refused in this call, the route's then the proxy's, each once."""
        return list(dict.fromkeys([*self.refused, *self.visitor.refused]))


class BrowserService:
    """Owns the browser process: one at most, shared by calls, closed when idle."""

    def __init__(
        self,
        config: BrowserConfig,
        executable: str,
        *,
        egress: Callable[[], EgressProxy | None],
        check_url: Callable[[str], None],
        profiles: Path,
    ) -> None:
        self.config = config
        self.executable = executable
        self._egress = egress
        self._check_url = check_url
        self._profiles = profiles
        self._lock = asyncio.Lock()
        self._running: _Running | None = None
        self._active = 0
        self._idle: asyncio.Task[None] | None = None
        self._sandbox = os.geteuid() != 0  # Chromium refuses its sandbox to root
        self.jitless = writable_code_refused()
        """Whether JavaScript runs without its JIT compiler (``writable_code_refused``)."""
        self.launches = 0
        """How many times a browser was started (the tests count them)."""

    @property
    def running(self) -> bool:
        """Whether a browser process is up."""
        return self._running is not None

    def pids(self) -> set[int]:
        """The running browser's processes (none when it is not running)."""
        running = self._running
        return set() if running is None else processes.tree(running.browser_id)

    @contextlib.asynccontextmanager
    async def visit(self, url: str) -> AsyncIterator[Visit]:
        """A fresh page for one call to open ``url``; its context is closed afterwards.

        ``url`` is judged first (``Refused``: not http(s), or a refused address by
        its spelling); Playwright's failures in the block become ``ToolError`` sentences.
        """
        self._check_url(url)
        host = urlsplit(url).hostname or ""
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        self._active += 1
        running: _Running | None = None
        try:
            async with self._lock:
                running = await self._ensure()
            async with running.door.visit() as visitor:
                context = await self._context(running, visitor, host)
                try:
                    refused: list[str] = []
                    await context.route("**/*", lambda route: self._guard(route, refused))
                    yield Visit(await context.new_page(), visitor, refused)
                    await self._save_profile(context, host)
                finally:
                    with contextlib.suppress(Exception):
                        await context.close()
        except ToolError:
            raise
        except Exception as exc:
            raise self._explain(exc, running) from None
        finally:
            self._active -= 1
            if self._active == 0 and self._running is not None:
                self._idle = asyncio.create_task(self._close_when_idle(), name="browser: idle")

    async def aclose(self) -> None:
        """Close the browser now (the daemon's stop); idempotent."""
        idle, self._idle = self._idle, None
        if idle is not None:
            idle.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await idle
        async with self._lock:
            await self._close_running()

    async def _ensure(self) -> _Running:
        if self._running is not None and not self._running.usable:
            await self._close_running()
        if self._running is None:
            self._running = await self._launch()
        return self._running

    async def _launch(self) -> _Running:
        from playwright.async_api import Error, async_playwright

        egress = self._egress()
        if egress is None:
            raise ToolError("the browser has no way to the network in this process")
        stack = AsyncExitStack()
        try:
            door = await stack.enter_async_context(egress.tcp_door())
            with _node_jitless(self.jitless):
                playwright = await stack.enter_async_context(async_playwright())
            browser_id = secrets.token_hex(6)
            try:
                browser = await self._start(playwright, browser_id)
            except Error as exc:
                if not self._sandbox or "sandbox" not in str(exc).lower():
                    raise
                log.warning("Chromium's sandbox is not available here; running without it")
                self._sandbox = False
                browser = await self._start(playwright, browser_id)
            stack.push_async_callback(_close_browser, browser)
        except BaseException:
            await stack.aclose()
            raise
        self.launches += 1
        running = _Running(browser_id, browser, door, stack, playwright)
        running.watch = asyncio.create_task(self._watch(running), name="browser: memory watch")
        log.info("browser started: %s", self.executable)
        return running

    async def _start(self, playwright: Playwright, browser_id: str) -> Browser:
        return await playwright.chromium.launch(
            executable_path=self.executable,
            headless=True,
            args=switches(self.config, browser_id, jitless=self.jitless),
            chromium_sandbox=self._sandbox,
            timeout=LAUNCH_TIMEOUT_S * 1000,
        )

    async def _context(self, running: _Running, visitor: Visitor, host: str) -> BrowserContext:
        profile = self._profile_file(host)
        state = str(profile) if profile is not None and profile.is_file() else None
        context = await running.browser.new_context(
            proxy={"server": running.door.server, "username": visitor.name,
                   "password": visitor.password},
            accept_downloads=False,
            service_workers="block",
            viewport={"width": self.config.width, "height": self.config.height},
            device_scale_factor=1,
            storage_state=state,
        )  # fmt: skip
        timeout_ms = self.config.page_timeout_s * 1000
        context.set_default_timeout(timeout_ms)
        context.set_default_navigation_timeout(timeout_ms)
        return context

    async def _guard(self, route: Route, refused: list[str]) -> None:
        """Let a request go on to the proxy, or refuse it here: another scheme than
        http(s), or an address refused by its spelling alone."""
        url = route.request.url
        reason = ""
        if not url.lower().startswith(("http://", "https://")):
            reason = f"{url[:80]}: only http:// and https:// pages can be opened"
        else:
            try:
                self._check_url(url)
            except Refused as exc:
                said = str(exc)
                reason = f"{url[:100]}: {said.partition(' is refused: ')[2] or said}"
        if reason:
            refused.append(reason)
            await route.abort("blockedbyclient")
        else:
            await route.fallback()

    def _profile_file(self, host: str) -> Path | None:
        name = self.config.profile_for(host)
        return None if name is None else self._profiles / f"{name}.json"

    async def _save_profile(self, context: BrowserContext, host: str) -> None:
        target = self._profile_file(host)
        if target is None:
            return
        state = await context.storage_state()
        await asyncio.to_thread(_write_private, target, state)

    async def _watch(self, running: _Running) -> None:
        """Kill the browser when its processes hold more than ``max_memory_mib``."""
        cap = self.config.max_memory_mib * MIB
        while True:
            await asyncio.sleep(WATCH_EVERY_S)
            if not self._active:
                continue
            pids, used = await asyncio.to_thread(_measure, running.browser_id)
            running.peak = max(running.peak, used)
            if used > cap:
                running.over_memory = used
                log.warning(
                    "the browser used %d MiB, more than [browser] max_memory_mib = %d: stopped",
                    used // MIB,
                    self.config.max_memory_mib,
                )
                await asyncio.to_thread(processes.kill, pids)
                return

    async def _close_when_idle(self) -> None:
        await asyncio.sleep(self.config.idle_s)
        await asyncio.shield(self._close_if_idle())

    async def _close_if_idle(self) -> None:
        async with self._lock:
            if not self._active:
                await self._close_running()
                log.info("browser closed after %g s unused", self.config.idle_s)

    async def _close_running(self) -> None:
        """Close the browser (under the lock); ``running`` stays true until it is closed."""
        running = self._running
        if running is None:
            return
        if running.watch is not None:
            running.watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running.watch
        try:
            await running.stack.aclose()
        except Exception as exc:  # the browser is gone either way: nothing for a caller
            log_bug(log, "closing the browser failed", exc)
        # Whatever Playwright left (a browser that ignored the close): nothing outlives it.
        await asyncio.to_thread(_kill_tree, running.browser_id)
        self._running = None

    def _explain(self, exc: Exception, running: _Running | None) -> ToolError:
        """A sentence for the model about a Playwright failure."""
        if running is not None and running.over_memory:
            return ToolError(
                f"the page needed more than the {self.config.max_memory_mib} MiB of memory the "
                "browser may use, so the browser was stopped; try a lighter page, or web_fetch"
            )
        message = str(exc)
        if type(exc).__name__ == _TIMEOUT_NAME:
            return ToolError(
                f"the page did not finish loading within {self.config.page_timeout_s:g} s"
            )
        code = _NET_ERROR.search(message)
        if code is not None:
            return ToolError(f"the browser could not load the page ({code.group(1)})")
        if running is None:
            error_id = log_bug(log, f"the browser ({self.executable}) could not be started", exc)
            return ToolError(
                f"the browser could not be started (error id {error_id}); "
                "`pinclaw doctor` checks it"
            )
        error_id = log_bug(log, "the browser failed", exc)
        return ToolError(f"the browser failed (error id {error_id}); tell the user it failed")


@contextlib.contextmanager
def _node_jitless(jitless: bool) -> Iterator[None]:
    """``NODE_OPTIONS=--jitless`` in the environment while Playwright starts its driver
    (Node.js, which copies the environment), when memory may not be made executable."""
    if not jitless:
        yield
        return
    before = os.environ.get("NODE_OPTIONS")
    os.environ["NODE_OPTIONS"] = f"{before} --jitless" if before else "--jitless"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("NODE_OPTIONS", None)
        else:
            os.environ["NODE_OPTIONS"] = before


async def _close_browser(browser: Browser) -> None:
    with contextlib.suppress(Exception):
        async with asyncio.timeout(10):
            await browser.close()


def _measure(browser_id: str) -> tuple[set[int], int]:
    pids = processes.tree(browser_id)
    return pids, processes.proportional_bytes(pids)


def _kill_tree(browser_id: str) -> None:
    processes.kill(processes.tree(browser_id))


def _write_private(target: Path, state: Any) -> None:
    import json

    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        json.dump(state, file)
    partial.replace(target)
