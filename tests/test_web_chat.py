"""The web chat end to end: the real daemon, its panel on 127.0.0.1, httpx as the browser.

A client logs in the way a person does (a token from the installed ``pinclaw web
token``, then the login form), opens ``/chat``, follows ``/chat/events`` (Server-Sent
Events) and posts messages and button presses with the page's CSRF token. The fake
model writes slowly, so the stream must show the reply growing before it shows the
whole; the message must have gone through the inbound store like any chat's; an
approval request must appear with its buttons and a press must settle it through the
same path as a tap in any chat; without a session or a CSRF token nothing changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from playwright.async_api import Browser, expect

from bot.config import parse_config
from bot.core.errors import ConfigError
from bot.store.db import Database
from bot.store.people import PeopleStore
from channels.web.format import to_html
from tests.browser import Panel, free_port, log_in, open_page, screenshot
from tests.daemon_harness import running_daemon
from tests.fake_llm import CallTools, FakeLLM, Say

T = TypeVar("T")
# Markdown with what must never reach the page as markup.
TEXT = "Here is **the plan**: check the <limits> & `x < 2`, then [docs](https://example.org)."
SLOW = Say(TEXT, pieces=10, pause_s=0.3)
MKDIR = CallTools([("shell", {"command": "mkdir build"})])
HIDDEN = re.compile(r'name="(csrf|nonce)" value="([^"]*)"')


@asynccontextmanager
async def web_daemon(
    tmp_path: Path, llm: FakeLLM, *, stream: bool = True, **chat: Any
) -> AsyncIterator[Panel]:
    """The daemon with the web chat and the panel on a free port, replies streamed; a config
    file naming the same data folder and address is written for ``pinclaw web token``."""
    port = free_port()
    config = tmp_path / "config.toml"
    config.write_text(
        '[general]\ndata_dir = "state"\n'
        f'[provider]\nkind = "openai"\nmodel = "fake"\nbase_url = "{llm.url}/v1"\n'
        f'[web]\nlisten = "127.0.0.1:{port}"\n'
    )
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    tables = {"web": {"listen": f"127.0.0.1:{port}"}, "agent": {"stream": stream}}
    async with running_daemon(tmp_path, llm, {"web": chat}, tables=tables) as daemon:
        yield Panel(daemon, daemon.web.url, config, home)


@dataclass
class Page:
    """What the chat page says: its form's hidden values and the event stream's start."""

    html: str
    csrf: str
    nonce: str
    epoch: str
    after: int


async def open_chat(client: httpx.AsyncClient) -> Page:
    """``GET /chat`` and what it carries."""
    response = await client.get("/chat")
    assert response.status_code == 200, response.text
    hidden = dict(HIDDEN.findall(response.text))
    epoch = re.search(r'data-epoch="([^"]+)"', response.text)
    after = re.search(r'data-after="(\d+)"', response.text)
    assert epoch is not None and after is not None
    return Page(response.text, hidden["csrf"], hidden["nonce"], epoch.group(1), int(after.group(1)))


@dataclass(frozen=True)
class Event:
    """One Server-Sent Event."""

    id: str
    name: str
    data: dict[str, Any]


class EventReader:
    """Follows ``/chat/events`` in the background, as the page's EventSource does."""

    def __init__(self, client: httpx.AsyncClient, page: Page) -> None:
        self.events: list[Event] = []
        self.status = 0
        self.content_type = ""
        self._client = client
        self._page = page
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> EventReader:
        self._task = asyncio.create_task(self._read(), name="test: read the chat's events")
        await self.wait_for(lambda: self.status or None)
        return self

    async def ended(self) -> None:
        """Wait until the server ends the stream."""
        assert self._task is not None
        await self._task

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def wait_for(self, found: Callable[[], T | None], timeout_s: float = 30.0) -> T:
        """The first non-empty value of ``found``, evaluated as events arrive."""
        async with asyncio.timeout(timeout_s), self._changed:
            while True:
                value = found()
                if value:
                    return value
                await self._changed.wait()

    def entries(self, kind: str | None = None) -> list[dict[str, Any]]:
        """The ``entry`` events' data, in order (only those of ``kind`` if given)."""
        return [
            e.data
            for e in self.events
            if e.name == "entry" and (kind is None or e.data["kind"] == kind)
        ]

    async def _read(self) -> None:
        query = {"epoch": self._page.epoch, "after": str(self._page.after)}
        async with self._client.stream("GET", "/chat/events", params=query) as response:
            async with self._changed:
                self.status, self.content_type = (
                    response.status_code,
                    response.headers.get("content-type", ""),
                )
                self._changed.notify_all()
            fields: dict[str, str] = {}
            async for line in response.aiter_lines():
                if line:
                    name, _, value = line.partition(":")
                    fields[name] = value.removeprefix(" ")
                    continue
                if "event" in fields:
                    event = Event(fields.get("id", ""), fields["event"], json.loads(fields["data"]))
                    async with self._changed:
                        self.events.append(event)
                        self._changed.notify_all()
                fields = {}


def inbound_rows(tmp_path: Path) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(channel, session key, status, message) of every stored inbound message."""
    with contextlib.closing(sqlite3.connect(tmp_path / "state" / "pinclaw.db")) as db:
        rows = db.execute("SELECT channel, session_key, status, payload FROM inbound").fetchall()
    return [(r[0], r[1], r[2], json.loads(r[3])) for r in rows]


def client_for(url: str = "") -> httpx.AsyncClient:
    """A browser-like client of the panel at ``url`` (redirects are checked, not followed;
    reads wait long enough for a quiet event stream)."""
    return httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(30.0))


async def test_a_message_streams_its_reply_and_goes_through_the_inbound_store(
    tmp_path: Path, llm: FakeLLM
) -> None:
    llm.queue(SLOW)
    async with web_daemon(tmp_path, llm) as panel, client_for(panel.url) as client:
        await panel.logged_in(client)
        page = await open_chat(client)
        assert "No messages yet" in page.html
        async with EventReader(client, page) as events:
            assert events.status == 200 and events.content_type.startswith("text/event-stream")
            sent = await client.post(
                "/chat/send",
                data={"text": "what is the plan?", "nonce": page.nonce, "csrf": page.csrf},
                headers={"X-Requested-With": "fetch"},
            )
            assert sent.status_code == 200 and sent.json()["duplicate"] is False
            final = await events.wait_for(lambda: events.entries("bot"))
            assert await events.wait_for(
                lambda: any(e.name == "typing" and not e.data["on"] for e in events.events)
            )
        assert llm.requests[0].view.stream
        (user,) = events.entries("user")
        assert user["text"] == "what is the plan?"
        drafts = [e for e in events.entries("draft") if not e["progress"]]
        partial = {e["text"] for e in drafts if e["text"] != TEXT}
        assert len(partial) >= 2 and all(TEXT.startswith(text) for text in partial)
        assert {e["ref"] for e in drafts} == {final[0]["ref"]}  # the draft became the reply
        assert final[0]["text"] == TEXT and final[0]["html"] == to_html(TEXT)
        assert "&lt;limits&gt;" in final[0]["html"] and "<limits>" not in final[0]["html"]
        # The page, opened again (no script needed), shows both, escaped.
        again = await open_chat(client)
        assert "what is the plan?" in again.html and to_html(TEXT) in again.html
        assert "<limits>" not in again.html
    [(channel, session, status, message)] = inbound_rows(tmp_path)
    assert (channel, session, status) == ("web", "web:owner", "answered")
    assert message["sender_id"] == "owner" and message["message_id"] == page.nonce
    with contextlib.closing(sqlite3.connect(tmp_path / "state" / "pinclaw.db")) as db:
        owner = db.execute("SELECT person_id FROM identities WHERE identity = 'web:owner'")
        assert owner.fetchall() == [(1,)]  # the owner's account, not a new person
        assert db.execute("SELECT COUNT(*) FROM people").fetchone() == (1,)


async def test_an_approval_request_shows_its_buttons_and_a_press_settles_it(
    tmp_path: Path, llm: FakeLLM
) -> None:
    llm.queue(MKDIR, Say("Done."))
    async with web_daemon(tmp_path, llm) as panel, client_for(panel.url) as client:
        await panel.logged_in(client)
        page = await open_chat(client)
        async with EventReader(client, page) as events:
            fields = {"text": "make a build folder", "nonce": page.nonce, "csrf": page.csrf}
            await client.post("/chat/send", data=fields, headers={"X-Requested-With": "fetch"})
            request = (await events.wait_for(lambda: events.entries("approval")))[0]
            assert "Approval needed" in request["text"] and "mkdir build" in request["text"]
            actions = {b["action"].rpartition(":")[2]: b["action"] for b in request["buttons"]}
            assert sorted(actions) == ["always", "deny", "once", "person"]
            assert not (tmp_path / "state" / "workspace" / "build").exists()
            # The page, reloaded without script, has the request with its buttons as forms.
            reloaded = await open_chat(client)
            assert f'value="{actions["once"]}"' in reloaded.html

            pressed = await client.post(
                "/chat/press",
                data={"action": actions["once"], "ref": request["ref"], "csrf": page.csrf},
                headers={"X-Requested-With": "fetch"},
            )
            assert pressed.status_code == 200 and pressed.json()["text"] == "Allowed once."
            record = await events.wait_for(
                lambda: [
                    e
                    for e in events.entries("approval")
                    if e["ref"] == request["ref"] and not e["buttons"]
                ]
            )
            done = await events.wait_for(lambda: events.entries("bot"))
            final = await open_chat(client)
        # The reply reads after the request and the answer to the press, not above them.
        order = [final.html.index(text) for text in ("mkdir build", "Allowed once.", "Done.")]
        assert order == sorted(order)
        assert "Allowed once by owner" in record[0]["text"]
        assert done[0]["text"] == "Done."
        assert [e["text"] for e in events.entries("notice")] == ["Allowed once."]
        assert (tmp_path / "state" / "workspace" / "build").is_dir()
        assert llm.requests[-1].view.last_role == "tool"  # the result reached the model
    audit = [json.loads(line) for line in (tmp_path / "state" / "audit.jsonl").open()]
    logged = [entry for entry in audit if entry.get("kind") == "panel"]
    assert [e["action"] for e in logged] == ["login", "chat.send", "approval.once"]
    assert logged[-1]["person"] == "owner" and logged[-1]["details"]["via"] == "chat"


async def test_without_a_session_or_the_csrf_token_nothing_is_taken(
    tmp_path: Path, llm: FakeLLM
) -> None:
    async with web_daemon(tmp_path, llm) as panel:
        async with client_for(panel.url) as stranger:
            for path in ("/chat", "/chat/events"):
                response = await stranger.get(path)
                assert response.status_code == 303
                assert response.headers["location"].startswith("/login")
            fields = {"text": "hello", "nonce": "abcdefgh12345678", "csrf": "guess"}
            assert (await stranger.post("/chat/send", data=fields)).status_code == 403
            press = {"action": "ap:x:once", "ref": "w1", "csrf": "guess"}
            assert (await stranger.post("/chat/press", data=press)).status_code == 403
        async with client_for(panel.url) as owner:
            await panel.logged_in(owner)
            page = await open_chat(owner)
            fields = {"text": "hello", "nonce": page.nonce}
            assert (await owner.post("/chat/send", data=fields)).status_code == 403
            wrong = {**fields, "csrf": page.csrf[::-1]}
            assert (await owner.post("/chat/send", data=wrong)).status_code == 403
            elsewhere = await owner.post(
                "/chat/send",
                data={**fields, "csrf": page.csrf},
                headers={"Origin": "http://evil.example"},
            )
            assert elsewhere.status_code == 403
            # A page from before a restart (another epoch) is told to reload.
            stale = await owner.get("/chat/events", params={"epoch": "old", "after": "3"})
            assert "event: reload" in stale.text
        assert inbound_rows(tmp_path) == [] and llm.requests == []


async def test_a_plain_form_post_comes_back_to_the_page_and_a_second_post_is_answered_once(
    tmp_path: Path, llm: FakeLLM
) -> None:
    llm.queue(Say("Hello there."))
    async with web_daemon(tmp_path, llm, stream=False) as panel, client_for(panel.url) as client:
        await panel.logged_in(client)
        page = await open_chat(client)
        fields = {"text": "hi", "nonce": page.nonce, "csrf": page.csrf}
        first = await client.post("/chat/send", data=fields)
        assert first.status_code == 303 and first.headers["location"] == "/chat"
        again = await client.post("/chat/send", data=fields)  # a double click, a retry
        assert again.status_code == 303
        for _ in range(200):
            if "Hello there." in (await open_chat(client)).html:
                break
            await asyncio.sleep(0.05)
        shown = await open_chat(client)
    assert shown.html.count("Hello there.") == 1 and shown.html.count(">hi<") == 1
    assert len(inbound_rows(tmp_path)) == 1 and len(llm.requests) == 1


async def test_after_a_restart_the_page_shows_the_conversation_from_the_history(
    tmp_path: Path, llm: FakeLLM
) -> None:
    llm.queue(Say("Noted: **blue**."))
    async with client_for() as client, contextlib.AsyncExitStack() as stack:
        async with web_daemon(tmp_path, llm, stream=False) as panel:
            client.base_url = httpx.URL(panel.url)
            await panel.logged_in(client)
            page = await open_chat(client)
            events = await stack.enter_async_context(EventReader(client, page))
            fields = {"text": "my car is blue", "nonce": page.nonce, "csrf": page.csrf}
            await client.post("/chat/send", data=fields, headers={"X-Requested-With": "fetch"})
            await events.wait_for(lambda: events.entries("bot"))
        # Stopping the daemon ends the open event stream (it does not hold the stop up).
        async with asyncio.timeout(5):
            await events.ended()
    async with web_daemon(tmp_path, llm) as panel, client_for(panel.url) as client:
        await panel.logged_in(client)
        page = await open_chat(client)
    assert "my car is blue" in page.html and "Noted: <strong>blue</strong>." in page.html
    assert page.after == 0  # nothing new since this start: it all came from the history


def test_the_web_chat_needs_the_panel_and_has_no_access_keys(llm: FakeLLM) -> None:
    provider = {"kind": "openai", "model": "fake", "base_url": f"{llm.url}/v1"}
    with pytest.raises(ConfigError, match=r"channels\.web: the web chat is a page of the web"):
        parse_config({"provider": provider, "web": {"listen": "off"}, "channels": {"web": {}}}, {})
    with pytest.raises(ConfigError, match="allowed_users: not used by the web chat"):
        parse_config({"provider": provider, "channels": {"web": {"allowed_users": ["x"]}}}, {})
    config = parse_config({"provider": provider, "channels": {"web": {}}}, {})
    settings = config.channels["web"]
    assert getattr(settings, "allowed_users", None) == ["owner"]
    assert getattr(settings, "pairing", None) is False


async def test_in_a_browser_the_answer_streams_in_and_an_approval_is_allowed_on_the_page(
    tmp_path: Path, llm: FakeLLM, browser: Browser
) -> None:
    llm.queue(SLOW, MKDIR, Say("Done: the **build** folder is there."))
    async with web_daemon(tmp_path, llm) as panel:
        page = await open_page(browser)
        problems: list[str] = []
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.on(
            "console",
            lambda m: (
                None
                if m.type != "error" or m.location.get("url", "").endswith("/favicon.ico")
                else problems.append(f"{m.text} ({m.location.get('url')})")
            ),
        )
        await log_in(page, panel)
        await page.get_by_role("link", name="Chat").click()
        await expect(page.get_by_text("No messages yet")).to_be_visible()

        await page.get_by_label("Message").fill("what is the plan?")
        await page.get_by_role("button", name="Send").click()
        await expect(page.locator(".chat-entry-user")).to_have_text("what is the plan?")
        await expect(page.get_by_label("Message")).to_have_value("")
        # The reply shows while it is written: a draft first, then the whole reply in its place.
        await expect(page.locator(".chat-entry-draft")).to_be_visible()
        assert await page.locator("#chat-typing").is_visible()
        reply = page.locator(".chat-entry-bot")
        await expect(reply).to_contain_text("then docs.", timeout=20_000)
        await expect(reply.locator("strong")).to_have_text("the plan")
        await expect(reply.locator("code")).to_have_text("x < 2")
        await expect(page.locator(".chat-entry-draft")).to_have_count(0)
        await expect(page.locator("#chat-typing")).to_be_hidden()

        await page.get_by_label("Message").fill("make a build folder")
        await page.get_by_role("button", name="Send").click()
        request = page.locator(".chat-entry-approval")
        await expect(request).to_contain_text("mkdir build")
        await screenshot(page, "chat")
        await request.get_by_role("button", name="Allow once").click()
        await expect(request).to_contain_text("Allowed once by owner")
        await expect(request.get_by_role("button")).to_have_count(0)
        await expect(page.locator(".chat-entry-bot").last).to_contain_text("folder is there")
        assert (tmp_path / "state" / "workspace" / "build").is_dir()
        assert problems == []  # no script error, nothing the CSP refused
        await page.context.close()


async def test_the_web_chat_account_is_the_owners_and_cannot_be_given_away(
    tmp_path: Path,
) -> None:
    db = Database(tmp_path / "people.db")
    await db.open()
    try:
        people = PeopleStore(db)
        await people.setup()
        eve = await people.person_for("telegram", "5", "Eve")
        code, _ = await people.new_link(eve.id)
        assert (await people.redeem(code, "web", "owner")).kind == "invalid"  # a first /link
        web = await people.person_for("web", "owner", "Olga")
        assert web.is_owner and web.id == (await people.owner()).id
        assert await people.unlink("web:owner") is None
        assert (await people.of_identity("web:owner")) == await people.owner()
    finally:
        await db.close()
