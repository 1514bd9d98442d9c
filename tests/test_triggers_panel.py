"""The panel's Triggers page against the real daemon: the fake Telegram is the chat a
trigger speaks to (Ada, 7001, is the owner), webhooks are real HTTP POSTs, and the
page is read and used over HTTP with httpx, logged in through the real login form.

``doorbell`` comes from the config file; ``parcel`` is a stored webhook trigger, as
``trigger_add`` from Ada's chat leaves it. One test clicks "Test" in chromium and
takes the page's screenshots.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser

from bot.triggers.service import TriggerService
from bot.triggers.spec import Trigger
from tests.browser import Panel, log_in, open_page, panel_daemon, screenshot
from tests.channel_tables import TELEGRAM_OWNER
from tests.fake_llm import FakeLLM
from tests.fake_telegram import FakeTelegram
from tests.test_panel import CSP, assert_no_inline_code

SECRET = "doorbell-secret-0123456789"
PARCEL_SECRET = "parcel-secret-0123456789"
DOORBELL = {
    "name": "doorbell",
    "on": "webhook",
    "secret": SECRET,
    "to": f"telegram:{TELEGRAM_OWNER}",
    "say": "Someone rang: {body}",
    "cooldown": "1h",
}
PARCEL = Trigger(
    name="parcel",
    on="webhook",
    secret=PARCEL_SECRET,
    to=f"telegram:{TELEGRAM_OWNER}",
    say="A parcel: {body}",
    made_by="chat",
    creator_id="1",
    creator_name="Ada",
)
TABLES = {"heartbeat": {"interval": "0"}, "triggers": [DOORBELL]}


@pytest.fixture
async def site(tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram) -> AsyncIterator[Panel]:
    """The daemon with the panel, Telegram, the config's doorbell and a stored parcel hook."""
    async with panel_daemon(tmp_path, llm, telegram, tables=TABLES) as running:
        service = triggers(running)
        await service.store.add(PARCEL)
        await service.reload()
        yield running


def triggers(site: Panel) -> TriggerService:
    assert site.daemon.triggers is not None
    return site.daemon.triggers


@asynccontextmanager
async def logged_in(site: Panel) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    async with site.client() as client:
        yield client, await site.logged_in(client)


async def ring(site: Panel, body: str, secret: str = SECRET, name: str = "doorbell") -> int:
    async with httpx.AsyncClient() as client:
        answer = await client.post(
            f"{site.url}/hooks/{name}", content=body, headers={"Authorization": f"Bearer {secret}"}
        )
    return answer.status_code


def texts(telegram: FakeTelegram) -> list[str]:
    return [m.text for m in telegram.sent(TELEGRAM_OWNER)]


async def arrives(telegram: FakeTelegram, text: str) -> None:
    await telegram.await_until(lambda: any(text in t for t in texts(telegram)) or None, 10)


def row(page: httpx.Response, name: str) -> str:
    """The text of the triggers table's row of ``name`` (tags dropped, entities read)."""
    found = re.search(rf'<tr id="trigger-{name}">(.*?)</tr>', page.text, re.S)
    assert found is not None, page.text
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found[1])).split())


def notices(page: httpx.Response) -> list[str]:
    return [html.unescape(n) for n in re.findall(r'<p class="notice"[^>]*>(.*?)</p>', page.text)]


def panel_actions(site: Panel, action: str) -> list[dict[str, Any]]:
    path = site.daemon.app.loaded.data_dir / "audit.jsonl"
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in entries if e.get("kind") == "panel" and e["action"] == action]


async def test_each_trigger_shows_its_source_where_it_is_defined_and_its_last_firing(
    site: Panel, telegram: FakeTelegram
) -> None:
    assert await ring(site, "front door") == 202
    await arrives(telegram, "Someone rang: front door")
    assert await ring(site, "again") == 200  # held back by the hour's cooldown
    async with logged_in(site) as (client, _):
        page = await client.get("/triggers")
    assert page.status_code == 200
    assert page.headers["Content-Security-Policy"] == CSP
    assert_no_inline_code(page.text)
    assert '<a href="/triggers" aria-current="page">Triggers</a>' in page.text
    doorbell = row(page, "doorbell")
    assert "says: Someone rang: {body}" in doorbell
    assert "from the config file" in doorbell
    assert f"telegram:{TELEGRAM_OWNER}" in doorbell
    assert "POST /hooks/doorbell" in doorbell  # the webhook source's own state line
    assert "held back (cooldown)" in doorbell  # the last firing: the second ring
    assert "Remove" not in doorbell  # a config trigger is removed in the config
    parcel = row(page, "parcel")
    assert "from a chat, by Ada" in parcel and "POST /hooks/parcel" in parcel
    assert "not fired yet" in parcel and "Remove" in parcel
    latest = html.unescape(page.text.split('id="firings"', 1)[1])
    assert f"sent to telegram:{TELEGRAM_OWNER}" in latest
    assert "Someone rang: front door" in latest
    assert SECRET not in page.text and PARCEL_SECRET not in page.text


async def test_the_test_button_sends_once_despite_the_cooldown_and_needs_the_csrf_token(
    site: Panel, telegram: FakeTelegram
) -> None:
    assert await ring(site, "front door") == 202
    await arrives(telegram, "Someone rang: front door")
    async with logged_in(site) as (client, csrf):
        refused = await client.post("/triggers/doorbell/test", data={})
        assert refused.status_code == 403
        forged = await client.post("/triggers/doorbell/test", data={"csrf": csrf[:-1] + "!"})
        assert forged.status_code == 403
        answer = await client.post("/triggers/doorbell/test", data={"csrf": csrf})
        assert answer.status_code == 303 and answer.headers["Location"] == "/triggers"
        await arrives(telegram, "Someone rang: a test from")
        page = await client.get("/triggers")
    owner = (await site.daemon.app.people.owner()).name
    assert f"Test of doorbell recorded: it goes to telegram:{TELEGRAM_OWNER} within seconds." in (
        notices(page)
    )
    await asyncio.sleep(0.5)  # a second delivery would have come by now
    assert texts(telegram) == [
        "Someone rang: front door",
        f"Someone rang: a test from {owner} (web panel)",
    ]
    firings = await triggers(site).store.history("doorbell")
    assert [(f.kind, f.status) for f in firings] == [("test", "sent"), ("event", "sent")]
    (entry,) = panel_actions(site, "trigger.test")
    assert entry["outcome"] == "ok" and entry["details"]["trigger"] == "doorbell"
    assert entry["person"] == owner


async def test_remove_deletes_a_stored_trigger_and_refuses_a_config_one(
    site: Panel, telegram: FakeTelegram
) -> None:
    assert await ring(site, "a box", PARCEL_SECRET, "parcel") == 202
    await arrives(telegram, "A parcel: a box")
    async with logged_in(site) as (client, csrf):
        kept = await client.post("/triggers/doorbell/remove", data={"csrf": csrf})
        assert kept.status_code == 303
        page = await client.get("/triggers")
        assert (
            "doorbell is defined in the config file: delete its [[triggers]] table there "
            "and restart PinClaw."
        ) in notices(page)
        gone = await client.post("/triggers/parcel/remove", data={"csrf": csrf})
        assert gone.status_code == 303
        page = await client.get("/triggers")
        assert "Removed the trigger parcel." in notices(page)
        assert 'id="trigger-parcel"' not in page.text and 'id="trigger-doorbell"' in page.text
        missing = await client.post("/triggers/parcel/remove", data={"csrf": csrf})
        assert missing.status_code == 303
        page = await client.get("/triggers")
        assert "There is no trigger called parcel (any more)." in notices(page)
    service = triggers(site)
    assert [t.name for t in await service.store.triggers()] == []
    assert sorted(service.triggers) == ["doorbell"]
    assert await ring(site, "another box", PARCEL_SECRET, "parcel") == 404  # no longer served
    assert await ring(site, "front door") == 202  # the config one still is
    removed = panel_actions(site, "trigger.remove")
    assert [(e["details"]["trigger"], e["outcome"]) for e in removed] == [
        ("doorbell", "refused"),
        ("parcel", "ok"),
        ("parcel", "refused"),
    ]
    assert "on webhook" in removed[1]["details"]["was"]


async def test_without_a_session_the_page_goes_to_the_login_and_nothing_fires(
    site: Panel, telegram: FakeTelegram
) -> None:
    async with site.client() as client:
        page = await client.get("/triggers")
        assert page.status_code == 303 and page.headers["Location"].startswith("/login")
        refused = await client.post("/triggers/doorbell/test", data={"csrf": "guess"})
        assert refused.status_code == 403
        refused = await client.post("/triggers/parcel/remove", data={"csrf": "guess"})
        assert refused.status_code == 403
    await asyncio.sleep(0.5)
    assert await triggers(site).store.history() == []
    assert "parcel" in triggers(site).triggers
    assert texts(telegram) == []


async def test_the_test_button_in_chromium_with_screenshots(
    site: Panel, browser: Browser, telegram: FakeTelegram
) -> None:
    assert await ring(site, "front door") == 202
    await arrives(telegram, "Someone rang: front door")
    page = await open_page(browser)
    await log_in(page, site)
    await page.get_by_role("link", name="Triggers").click()
    await page.wait_for_url(f"{site.url}/triggers")
    doorbell = page.locator("#trigger-doorbell")
    await doorbell.get_by_role("button", name="Test").click()
    await page.get_by_text("Test of doorbell recorded").wait_for()
    await arrives(telegram, "Someone rang: a test from")
    await page.reload()
    assert "(test)" in await doorbell.inner_text()
    await screenshot(page, "triggers")
