"""The web panel in a real browser: the daemon on a free port, Debian's chromium, logging in.

Loaded as a pytest plugin (``conftest.py``), so every test module can use the
fixtures ``panel`` (the real daemon with the fake Telegram, the fake model and
the panel on 127.0.0.1) and ``browser`` (headless chromium through Playwright,
``/usr/bin/chromium``: no ``playwright install``). Helpers log a Playwright
page or an httpx client in with a token from the real ``pinclaw web token``
(the installed command, run in a thread so the daemon on this loop keeps
answering), and take screenshots at a phone and a desktop width: into pytest's
temporary folder, or into the README's ``docs/screenshots`` with
``--update-screenshots`` (so a plain test run changes no tracked file).
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, async_playwright

from bot.daemon.main import Daemon
from tests.channel_tables import telegram_table
from tests.cli_helpers import run
from tests.daemon_harness import running_daemon
from tests.fake_llm import FakeLLM
from tests.fake_telegram import FakeTelegram

CHROMIUM = Path("/usr/bin/chromium")
DOCS_SCREENSHOTS = Path(__file__).resolve().parents[1] / "docs" / "screenshots"
DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Panel:
    """A running daemon with its panel: where it answers and how to get a login token."""

    daemon: Daemon
    url: str
    config: Path
    home: Path

    async def token(self, *, rotate: bool = False) -> str:
        """A login token from the installed ``pinclaw web token`` (``--rotate``: ends sessions)."""
        args = ["web", "token", "--config", str(self.config), *(["--rotate"] if rotate else [])]
        done = await asyncio.to_thread(run, self.home, *args)
        assert done.returncode == 0, done.stderr
        token = done.stdout.strip()
        assert token and "\n" not in token, done.stdout
        return token

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        """An httpx client for the panel, logged out, redirects not followed."""
        return httpx.AsyncClient(base_url=self.url, timeout=10, **kwargs)

    async def logged_in(self, client: httpx.AsyncClient, token: str | None = None) -> str:
        """Log ``client`` in through the login form; the session's CSRF token."""
        form = await client.get("/login")
        answer = await client.post(
            "/login", data={"csrf": csrf_of(form.text), "token": token or await self.token()}
        )
        assert answer.status_code == 303, answer.text
        return csrf_of((await client.get("/")).text)


def csrf_of(html: str) -> str:
    """The CSRF token in a page's forms."""
    found = _CSRF.search(html)
    assert found is not None, "the page has no form with a CSRF token"
    return found.group(1)


@asynccontextmanager
async def panel_daemon(
    tmp_path: Path,
    llm: FakeLLM,
    telegram: FakeTelegram | None = None,
    *,
    web: dict[str, Any] | None = None,
    tables: dict[str, Any] | None = None,
    **daemon: Any,
) -> AsyncIterator[Panel]:
    """The real daemon (Telegram on its fake, if given) with the panel on a free port.

    A config file naming the same data folder and address is written for the
    command line (``pinclaw web token``).
    """
    port = free_port()
    web_table = {"listen": f"127.0.0.1:{port}", **(web or {})}
    config = tmp_path / "config.toml"
    config.write_text(
        '[general]\ndata_dir = "state"\n'
        f'[provider]\nkind = "openai"\nmodel = "fake"\nbase_url = "{llm.url}/v1"\n'
        f'[web]\nlisten = "127.0.0.1:{port}"\n'
    )
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    channels = {"telegram": telegram_table(telegram)} if telegram is not None else {}
    async with running_daemon(
        tmp_path, llm, channels, tables={"web": web_table, **(tables or {})}, **daemon
    ) as running:
        if telegram is not None:
            assert await running.channels["telegram"].status.wait_connected(30)
        yield Panel(running, f"http://127.0.0.1:{port}", config, home)


# Where ``screenshot`` writes this session, set once by the ``screenshot_folder`` fixture.
_SCREENSHOTS: dict[str, Path] = {}


@pytest.fixture(scope="session", autouse=True)
def screenshot_folder(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """``docs/screenshots`` with ``--update-screenshots``, else ``screenshots`` in pytest's temp."""
    if pytestconfig.getoption("update_screenshots"):
        folder = DOCS_SCREENSHOTS
    else:
        folder = tmp_path_factory.getbasetemp() / "screenshots"
    _SCREENSHOTS["folder"] = folder
    return folder


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say where this run's screenshots are, when it took any."""
    folder = _SCREENSHOTS.get("folder")
    if folder is not None and folder.is_dir() and any(folder.glob("*.png")):
        terminalreporter.write_line(f"screenshots: {folder}")


def chromium_path() -> str:
    """Debian's chromium, or the test fails saying how to install it."""
    if not CHROMIUM.exists():
        pytest.fail(f"the browser tests need {CHROMIUM}: apt-get install chromium")
    return str(CHROMIUM)


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """Debian's chromium, headless, driven by Playwright."""
    executable = chromium_path()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, headless=True)
        try:
            yield browser
        finally:
            await browser.close()


@pytest.fixture
async def panel(tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram) -> AsyncIterator[Panel]:
    """The daemon with Telegram (Ada, user 7001, allowed) and the panel on a free port."""
    async with panel_daemon(tmp_path, llm, telegram) as running:
        yield running


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    """Headless chromium."""
    async with chromium() as running:
        yield running


async def open_page(browser: Browser, *, phone: bool = False) -> Page:
    """A new page in a fresh context (its own cookies) at a desktop or a phone width."""
    context = await browser.new_context(
        viewport=PHONE if phone else DESKTOP,  # type: ignore[arg-type]
        device_scale_factor=1,
        is_mobile=phone,
        has_touch=phone,
    )
    return await context.new_page()


async def log_in(page: Page, panel: Panel, token: str | None = None) -> None:
    """Log ``page`` in through the login form, as a person pasting the token would."""
    await page.goto(f"{panel.url}/login")
    await page.get_by_label("Login token").fill(token or await panel.token())
    await page.get_by_role("button", name="Log in").click()
    await page.wait_for_url(f"{panel.url}/")


async def screenshot(page: Page, name: str) -> None:
    """``NAME.png`` (desktop) and ``NAME-phone.png`` (phone), whole page, in the session's folder.

    The folder is ``docs/screenshots`` only with ``--update-screenshots``.
    """
    folder = _SCREENSHOTS["folder"]
    folder.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size or DESKTOP
    await page.set_viewport_size(DESKTOP)  # type: ignore[arg-type]
    await page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
    await page.set_viewport_size(PHONE)  # type: ignore[arg-type]
    await page.screenshot(path=str(folder / f"{name}-phone.png"), full_page=True)
    await page.set_viewport_size(size)  # type: ignore[arg-type]
