"""The live web chat never misses a reply: the event stream over real sockets and in chromium.

The real daemon serves the panel on 127.0.0.1; httpx follows ``/chat/events`` the
way ``EventSource`` does (the query from the page, then ``Last-Event-ID`` when it
reconnects). A turn that waits for an approval ends with its reply and "writing"
off on the stream whether the approval is allowed or denied or the model then
fails; a stream dropped mid-turn and resumed from its last id gets exactly the
events it missed. In chromium, through a proxy that cuts the stream or answers
it with a 502, the page still shows the reply and leaves "PinClaw is writing…".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from playwright.async_api import Browser, Page, expect

from channels.web.event_stream import frame
from channels.web.feed import FeedEvent
from tests.browser import Panel, log_in, open_page
from tests.cutting_proxy import CuttingProxy
from tests.fake_llm import CallTools, Fail, FakeLLM, Say
from tests.test_web_chat import Event, client_for, open_chat, web_daemon

MKDIR = CallTools([("shell", {"command": "mkdir build"})])
REPLY = "All right, I left the folder alone."
SLOW_REPLY = Say(REPLY, pieces=8, pause_s=0.15)
FETCH = {"X-Requested-With": "fetch"}


class Stream:
    """One ``GET /chat/events`` connection, read in the background until it is dropped."""

    def __init__(self, client: httpx.AsyncClient, query: dict[str, str], last_id: str = "") -> None:
        self.events: list[Event] = []
        self._client = client
        self._query = query
        self._headers = {"Last-Event-ID": last_id} if last_id else {}
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Stream]:
        """Follow the stream inside the block; leaving it drops the connection."""
        self._task = asyncio.create_task(self._read(), name="test: follow the chat's events")
        try:
            yield self
        finally:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def until(self, found: Callable[[list[Event]], bool], timeout_s: float = 30.0) -> None:
        """Wait until ``found`` holds for the events so far."""
        async with asyncio.timeout(timeout_s), self._changed:
            await self._changed.wait_for(lambda: found(self.events))

    @property
    def last_id(self) -> str:
        """The id of the last event read."""
        return self.events[-1].id

    async def _read(self) -> None:
        request = self._client.stream(
            "GET", "/chat/events", params=self._query, headers=self._headers
        )
        async with request as response:
            assert response.status_code == 200
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


def writing_ended(events: list[Event]) -> bool:
    """The turn is over: its reply was shown and "writing" went off after it."""
    return (
        len(events) >= 2
        and events[-1].name == "typing"
        and not events[-1].data["on"]
        and any(e.name == "entry" and e.data["kind"] == "bot" for e in events)
    )


def reply_begun(event: Event) -> bool:
    """Part of the reply is shown (a draft, not a progress line)."""
    return event.name == "entry" and event.data["kind"] == "draft" and not event.data["progress"]


def approval(events: list[Event]) -> dict[str, Any] | None:
    """The approval request with its buttons, once shown."""
    for event in events:
        if event.name == "entry" and event.data["kind"] == "approval" and event.data["buttons"]:
            return event.data
    return None


async def press(client: httpx.AsyncClient, csrf: str, request: dict[str, Any], choice: str) -> str:
    """Press the request's ``choice`` button as the page's script does; the answer."""
    action = next(b["action"] for b in request["buttons"] if b["action"].endswith(f":{choice}"))
    pressed = await client.post(
        "/chat/press", data={"action": action, "ref": request["ref"], "csrf": csrf}, headers=FETCH
    )
    assert pressed.status_code == 200, pressed.text
    return str(pressed.json()["text"])


@pytest.mark.parametrize(
    ("choice", "then", "answer", "reply"),
    [
        ("once", Say(REPLY), "Allowed once.", REPLY),
        ("deny", SLOW_REPLY, "Denied.", REPLY),
        ("deny", Fail(500, "the model broke"), "Denied.", "Sorry, I could not answer"),
    ],
    ids=["allowed", "denied", "denied-then-error"],
)
async def test_a_turn_that_waited_for_an_approval_ends_with_its_reply_on_the_stream(
    tmp_path: Path, llm: FakeLLM, choice: str, then: Say | Fail, answer: str, reply: str
) -> None:
    llm.queue(MKDIR, then)
    async with web_daemon(tmp_path, llm) as panel, client_for(panel.url) as client:
        await panel.logged_in(client)
        page = await open_chat(client)
        query = {"epoch": page.epoch, "after": str(page.after)}
        async with Stream(client, query).open() as stream:
            fields = {"text": "make a build folder", "nonce": page.nonce, "csrf": page.csrf}
            assert (await client.post("/chat/send", data=fields, headers=FETCH)).status_code == 200
            await stream.until(lambda events: approval(events) is not None)
            request = approval(stream.events)
            assert request is not None
            assert await press(client, page.csrf, request, choice) == answer
            await stream.until(writing_ended)
        final = [e.data for e in stream.events if e.name == "entry" and e.data["kind"] == "bot"]
        assert len(final) == 1 and final[0]["text"].startswith(reply)
        assert stream.events[-2].name == "entry" and stream.events[-2].data == final[0]
        numbers = [int(e.id.rpartition(":")[2]) for e in stream.events]
        assert numbers == list(range(page.after + 1, page.after + 1 + len(numbers)))
        # The page opened now shows the same reply, and nobody writing.
        again = await open_chat(client)
        assert 'id="chat-typing" class="muted chat-typing" role="status" hidden' in again.html
        assert final[0]["html"] in again.html
    assert (tmp_path / "state" / "workspace" / "build").is_dir() == (choice == "once")


async def test_a_stream_dropped_mid_turn_resumes_with_exactly_the_missed_events(
    tmp_path: Path, llm: FakeLLM
) -> None:
    llm.queue(MKDIR, SLOW_REPLY)
    async with web_daemon(tmp_path, llm) as panel, client_for(panel.url) as client:
        await panel.logged_in(client)
        page = await open_chat(client)
        query = {"epoch": page.epoch, "after": str(page.after)}
        async with Stream(client, query).open() as whole:  # stays connected: the reference
            async with Stream(client, query).open() as first:
                fields = {"text": "make a build folder", "nonce": page.nonce, "csrf": page.csrf}
                await client.post("/chat/send", data=fields, headers=FETCH)
                await first.until(lambda events: approval(events) is not None)
            # Dropped while the turn waits; the press and part of the reply happen unseen.
            request = approval(first.events)
            assert request is not None
            await press(client, page.csrf, request, "deny")
            await whole.until(lambda events: any(map(reply_begun, events)))
            # The browser reconnects with the page's URL and the last id it got.
            async with Stream(client, query, first.last_id).open() as resumed:
                await resumed.until(writing_ended)
            await whole.until(writing_ended)
    seen = [e.id for e in first.events]
    assert len(seen) >= 4 and seen == [e.id for e in whole.events[: len(seen)]]
    assert resumed.events == whole.events[len(seen) :]  # the missed ones, once each
    assert [e.id for e in first.events + resumed.events] == [e.id for e in whole.events]


async def test_a_resume_point_from_before_a_restart_or_past_the_feed_reloads_the_page(
    tmp_path: Path, llm: FakeLLM
) -> None:
    async with web_daemon(tmp_path, llm) as panel, client_for(panel.url) as client:
        await panel.logged_in(client)
        page = await open_chat(client)
        for last in ("0badc0de:3", f"{page.epoch}:{page.after + 5}"):
            answer = await client.get("/chat/events", headers={"Last-Event-ID": last})
            assert answer.status_code == 200
            assert "event: reload" in answer.text


@given(st.text(st.characters(exclude_categories=())), st.booleans())  # lone surrogates too
def test_every_event_goes_out_as_ascii_and_reads_back_the_same(text: str, on: bool) -> None:
    data = {"ref": "w1", "kind": "bot", "text": text, "html": text, "on": on}
    wire = frame("abcd1234", FeedEvent(7, "entry", data))
    lines = wire.decode("ascii").split("\n")
    assert lines[:2] == ["id: abcd1234:7", "event: entry"] and lines[3:] == ["", ""]
    assert json.loads(lines[2].removeprefix("data: ")) == data


async def open_chat_page(browser: Browser, panel: Panel) -> Page:
    """A logged-in browser page on the (empty) Chat page."""
    page = await open_page(browser)
    await log_in(page, panel)
    await page.goto(f"{panel.url}/chat")
    await expect(page.get_by_text("No messages yet")).to_be_visible()
    return page


async def send_and_wait_for_the_request(page: Page) -> None:
    """Send a message whose turn asks for an approval; wait for its buttons."""
    await page.get_by_label("Message").fill("make a build folder")
    await page.get_by_role("button", name="Send").click()
    card = page.locator(".chat-entry-approval")
    await expect(card.get_by_role("button", name="Deny")).to_be_visible()


@pytest.mark.parametrize("network", ["steady", "dropped", "refused"])
async def test_in_a_browser_a_denied_approval_ends_with_the_reply_and_writing_off(
    tmp_path: Path, llm: FakeLLM, browser: Browser, network: str
) -> None:
    llm.queue(MKDIR, SLOW_REPLY)
    async with web_daemon(tmp_path, llm) as direct:
        port = int(direct.url.rpartition(":")[2])
        proxy = await CuttingProxy(port).start()
        panel = Panel(direct.daemon, f"http://127.0.0.1:{proxy.port}", direct.config, direct.home)
        try:
            page = await open_chat_page(browser, panel)
            problems: list[str] = []
            page.on("pageerror", lambda error: problems.append(str(error)))
            await send_and_wait_for_the_request(page)
            assert await page.locator("#chat-typing").is_visible()
            card = page.locator(".chat-entry-approval")
            if network != "steady":
                # The stream drops while the turn waits; "refused": its reconnect gets a
                # 502, after which EventSource gives up and the page opens a new stream.
                proxy.refuse(1 if network == "refused" else 0)
                assert proxy.cut() == 1
            await card.get_by_role("button", name="Deny").click()
            # (a reconnect waits 3 s, the new stream after a 502 another 3 s)
            await expect(card).to_contain_text("Denied by owner", timeout=20_000)
            await expect(page.locator(".chat-entry-bot")).to_have_text(REPLY, timeout=20_000)
            await expect(page.locator("#chat-typing")).to_be_hidden()
            await expect(page.locator(".chat-entry-draft")).to_have_count(0)
            await expect(page.locator(".chat-entry-notice")).to_have_text("Denied.")
            assert problems == []
            resumed = proxy.requests[-1].lower()
            if network == "dropped":  # the browser's own reconnect, from the last event
                assert len(proxy.requests) == 2 and "last-event-id: " in resumed
            elif network == "refused":  # the page's new stream, from the last event shown
                assert len(proxy.requests) == 3 and "after=0 " not in resumed
            await page.context.close()
        finally:
            await proxy.stop()
    assert not (tmp_path / "state" / "workspace" / "build").exists()
