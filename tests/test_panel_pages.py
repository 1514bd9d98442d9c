"""The panel's Cron, Memory, Audit and Hardware pages against the real daemon.

The daemon runs on the fake Telegram (Ada, 7001, is the owner) and the fake
model, with a simulated porch light and greenhouse sensor (``pin_factory =
"mock"``) and the panel on a free port. Tests put data in the way a person
would (``pinclaw cron add`` and ``pinclaw memory add`` on the command line, a
chat message that makes the model call a tool), then read and change it over
HTTP with httpx, logged in through the real login form, and check the stores,
the command line, the scheduler, the pins and the audit log behind the pages.
One test adds a job through the real form in chromium and takes the pages'
screenshots for the README.
"""

from __future__ import annotations

import asyncio
import html
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from gpiozero.pins.mock import MockFactory
from playwright.async_api import Browser

from bot.cron.service import CronService
from bot.cron.store import CronJob
from bot.daemon.main import Daemon
from bot.memory.service import MemoryService
from bot.store.readings import Measurement, ReadingStore
from tests.browser import Panel, log_in, open_page, panel_daemon, screenshot
from tests.channel_tables import TELEGRAM_OWNER
from tests.cli_helpers import run
from tests.daemon_harness import wait_until
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.fake_telegram import FakeTelegram
from tests.telegram_taps import button, request_in, said, tap
from tools.gpio import GpioTool

ADA = FakeTelegram.user(TELEGRAM_OWNER, "Ada", "ada")
HARDWARE = {
    "pin_factory": "mock",
    "gpio": {"porch_light": {"pin": 17}, "door": {"pin": 27, "kind": "input"}},
    "i2c": {"buses": [1]},
    "sensors": {"greenhouse": {"driver": "bme280", "address": 0x76}},
}
TABLES = {"hardware": HARDWARE, "heartbeat": {"interval": "0"}}
IMAGES_LOADED = "() => [...document.images].every((i) => i.complete && i.naturalWidth > 0)"


@pytest.fixture
async def site(tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram) -> AsyncIterator[Panel]:
    """The daemon with the panel, Telegram, a porch light, a door contact and a sensor."""
    async with panel_daemon(tmp_path, llm, telegram, tables=TABLES) as running:
        yield running


async def pinclaw(site: Panel, *args: str) -> str:
    """Run the installed ``pinclaw`` on the daemon's config (in a thread: the daemon runs
    on this loop); what it printed, its error line included."""
    done = await asyncio.to_thread(run, site.home, *args, "--config", str(site.config))
    return done.stdout + done.stderr


@asynccontextmanager
async def logged_in(site: Panel) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """A client logged in through the login form, and its session's CSRF token."""
    async with site.client() as client:
        yield client, await site.logged_in(client)


def cron(daemon: Daemon) -> CronService:
    assert daemon.scheduling is not None and daemon.scheduling.service is not None
    return daemon.scheduling.service


def memory(daemon: Daemon) -> MemoryService:
    assert daemon.app.memory is not None
    return daemon.app.memory


def audit(site: Panel) -> list[dict[str, Any]]:
    """Every entry of the audit log, oldest first."""
    path = site.daemon.app.loaded.data_dir / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def panel_actions(site: Panel, action: str) -> list[dict[str, Any]]:
    return [e for e in audit(site) if e.get("kind") == "panel" and e["action"] == action]


def text(page: httpx.Response) -> str:
    """The page's HTML with entities read back (``'`` is escaped as ``&#39;``)."""
    return html.unescape(page.text)


async def jobs(daemon: Daemon) -> list[CronJob]:
    return await cron(daemon).store.jobs()


async def add_job_on_the_command_line(site: Panel, name: str = "water plants") -> CronJob:
    said = await pinclaw(site, "cron", "add", name, "--cron", "0 9 * * *", "--prompt", "Remind Ada")
    assert said.startswith("Added #"), said
    found = [job for job in await jobs(site.daemon) if job.name == name]
    assert len(found) == 1
    return found[0]


async def calculator_call(site: Panel, telegram: FakeTelegram, llm: FakeLLM) -> None:
    """Ada asks; the model calls ``calculator``; the gate writes it to the audit log."""
    llm.queue(CallTools([("calculator", {"expression": "6*7"})]), Say("It is 42."))
    telegram.user_sends(TELEGRAM_OWNER, ADA, "what is 6 times 7?")
    await said(telegram, TELEGRAM_OWNER, "It is 42.")


async def test_each_page_shows_its_data_from_the_running_daemon(
    site: Panel, telegram: FakeTelegram, llm: FakeLLM
) -> None:
    job = await add_job_on_the_command_line(site)
    remembered = await pinclaw(
        site, "memory", "add", "The tomatoes like 24 degrees", "--key", "tomatoes"
    )
    assert remembered.startswith("Remembered #"), remembered
    await calculator_call(site, telegram, llm)
    readings = ReadingStore(site.daemon.app.db)
    now = time.time()
    for minutes_ago, value in ((90, 19.5), (60, 20.25), (30, 22.0)):
        await readings.add(
            "greenhouse", [Measurement("temperature", value, "°C")], now - minutes_ago * 60
        )

    async with logged_in(site) as (client, _):
        page = await client.get("/cron")
        assert page.status_code == 200
        assert f"#{job.id} water plants" in text(page)
        assert "cron 0 9 * * * (UTC)" in text(page)
        assert "asks the agent: Remind Ada" in text(page)

        page = await client.get("/memory")
        assert page.status_code == 200
        assert "The tomatoes like 24 degrees" in text(page)
        assert "owner #1, owner" in text(page)  # whose it is, as `pinclaw memory list` says
        found = await client.get("/memory", params={"q": "tomatoes"})
        assert "1 best match for “tomatoes”" in text(found)
        nothing = await client.get("/memory", params={"q": "cucumbers"})
        assert "Nothing remembered about “cucumbers”." in text(nothing)

        page = await client.get("/audit")
        assert page.status_code == 200
        assert "calculator" in page.text and '{"expression": "6*7"}' in text(page)
        assert "Ada" in page.text and "allowed" in page.text

        page = await client.get("/hardware")
        assert page.status_code == 200
        body = text(page)
        assert "porch_light" in body and "not switched yet (starts off)" in body
        assert "door" in body and "off (reads low)" in body  # an input is read live
        assert "22.0 °C" in body  # the greenhouse's latest stored temperature
        assert "/hardware/chart/greenhouse/temperature.png" in body
        assert "/hardware/chart/greenhouse/humidity.png" not in body  # nothing to chart

        chart = await client.get("/hardware/chart/greenhouse/temperature.png")
        assert chart.status_code == 200
        assert chart.headers["Content-Type"] == "image/png"
        assert chart.content.startswith(b"\x89PNG\r\n\x1a\n")
        missing = await client.get("/hardware/chart/greenhouse/humidity.png")
        assert missing.status_code == 404
        assert "no humidity readings from the last 24 h" in missing.text
    workspace_charts = site.daemon.app.loaded.workspace / "charts"
    assert not workspace_charts.exists()  # served from memory, no file


async def test_a_job_added_through_the_form_is_listed_scheduled_and_audited(
    site: Panel,
) -> None:
    async with logged_in(site) as (client, csrf):
        form = {
            "csrf": csrf, "name": "check the mail", "kind": "every", "schedule": "2h",
            "action": "agent", "text": "Look for letters", "target": "log",
        }  # fmt: skip
        added = await client.post("/cron/add", data=form)
        assert added.status_code == 303 and added.headers["Location"] == "/cron"
        page = await client.get("/cron")
    (job,) = await jobs(site.daemon)
    assert (job.name, job.schedule_kind, job.schedule_expr, job.payload) == (
        "check the mail", "every", "7200", "Look for letters",
    )  # fmt: skip
    assert str(job.target) == "log" and job.creator_name == "owner (web panel)"
    assert f"Added job #{job.id} 'check the mail'." in text(page)  # the notice
    assert f"#{job.id} check the mail" in text(page) and "every 2h" in text(page)
    listed = await pinclaw(site, "cron", "list")
    assert f"#{job.id} check the mail: every 2h" in listed
    # The running scheduler picks it up, as after `pinclaw cron add`.
    scheduler = site.daemon.scheduling.scheduler  # type: ignore[union-attr]
    await asyncio.to_thread(wait_until, lambda: scheduler.get_job(str(job.id)) is not None)
    (entry,) = panel_actions(site, "cron.add")
    assert entry["person"] == "owner" and entry["person_id"] == 1
    assert entry["details"]["job"] == job.id and entry["details"]["schedule"] == "every 2h"


async def test_a_bad_schedule_shows_the_command_line_s_error_by_the_form(site: Panel) -> None:
    cli = await pinclaw(site, "cron", "add", "x", "--cron", "61 * * * *", "--prompt", "p")
    error = cli.strip().removeprefix("pinclaw: ")
    assert error != cli.strip() and "minute" in error
    async with logged_in(site) as (client, csrf):
        form = {"csrf": csrf, "name": "x", "kind": "cron", "schedule": "61 * * * *", "text": "p"}
        page = await client.post("/cron/add", data=form)
    assert page.status_code == 400
    assert f'<p class="error" role="alert" id="add-error">{error}</p>' in text(page)
    assert 'value="61 * * * *"' in page.text  # what was typed stays in the form
    assert await jobs(site.daemon) == []
    (entry,) = panel_actions(site, "cron.add")
    assert entry["outcome"] == "refused" and entry["details"]["error"] == error


async def test_pause_and_resume_a_job(site: Panel) -> None:
    job = await add_job_on_the_command_line(site)
    scheduler = site.daemon.scheduling.scheduler  # type: ignore[union-attr]
    await asyncio.to_thread(wait_until, lambda: scheduler.get_job(str(job.id)) is not None)
    async with logged_in(site) as (client, csrf):
        paused = await client.post(f"/cron/{job.id}/pause", data={"csrf": csrf})
        assert paused.status_code == 303
        page = await client.get("/cron")
        assert f"Paused job #{job.id} 'water plants'." in text(page)
        assert "Resume</button>" in page.text
        stored = await cron(site.daemon).store.get(job.id)
        assert stored is not None and stored.state == "paused"
        await asyncio.to_thread(wait_until, lambda: scheduler.get_job(str(job.id)) is None)
        assert "[paused]" in await pinclaw(site, "cron", "list")

        resumed = await client.post(f"/cron/{job.id}/resume", data={"csrf": csrf})
        assert resumed.status_code == 303
        stored = await cron(site.daemon).store.get(job.id)
        assert stored is not None and stored.state == "active"
        await asyncio.to_thread(wait_until, lambda: scheduler.get_job(str(job.id)) is not None)
        gone = await client.post("/cron/999/pause", data={"csrf": csrf})
        assert "Could not pause job #999: there is no job #999" in text(await client.get("/cron"))
        assert gone.status_code == 303
    actions = [e["action"] for e in audit(site) if e.get("kind") == "panel"]
    assert actions == ["login", "cron.pause", "cron.resume", "cron.pause"]
    assert panel_actions(site, "cron.pause")[1]["outcome"] == "refused"


async def test_run_now_and_delete(site: Panel, llm: FakeLLM) -> None:
    job = await add_job_on_the_command_line(site)
    llm.queue(Say("Water the plants, Ada."))
    async with logged_in(site) as (client, csrf):
        ran = await client.post(f"/cron/{job.id}/run", data={"csrf": csrf})
        assert ran.status_code == 303
        store = cron(site.daemon).store

        async def one_run() -> bool:
            return any(r.status == "ok" for r in await store.history(job.id))

        for _ in range(200):
            if await one_run():
                break
            await asyncio.sleep(0.05)
        page = await client.get("/cron")
        assert "Water the plants, Ada." in text(page)  # the run's output, in the history
        deleted = await client.post(f"/cron/{job.id}/delete", data={"csrf": csrf})
        assert deleted.status_code == 303
    assert await jobs(site.daemon) == []
    assert "No scheduled jobs." in await pinclaw(site, "cron", "list")


async def test_forget_a_memory(site: Panel) -> None:
    await pinclaw(site, "memory", "add", "Ada's bike code is 4711", "--key", "bike")
    await pinclaw(site, "memory", "add", "The cat is called Mo", "--key", "cat", "--shared")
    entries = {m.key: m for m in await memory(site.daemon).store.list()}
    async with logged_in(site) as (client, csrf):
        one = await client.get(f"/memory/{entries['bike'].id}")
        assert one.status_code == 200 and "Ada's bike code is 4711" in text(one)
        owners = await client.get("/memory", params={"whose": "person:1"})
        assert "bike" in owners.text and "The cat is called Mo" not in owners.text
        forgot = await client.post(f"/memory/{entries['bike'].id}/forget", data={"csrf": csrf})
        assert forgot.status_code == 303
        page = await client.get("/memory")
        assert f"Forgot #{entries['bike'].id} 'bike'." in text(page)
        assert "4711" not in page.text and "The cat is called Mo" in page.text
        missing = await client.get(f"/memory/{entries['bike'].id}")
        assert missing.status_code == 404
    assert await memory(site.daemon).store.get_by_id(entries["bike"].id) is None
    assert "4711" not in await pinclaw(site, "memory", "list")
    (entry,) = panel_actions(site, "memory.forget")
    assert entry["details"]["key"] == "bike" and entry["person"] == "owner"


async def test_posts_without_the_csrf_token_or_a_session_are_refused_and_change_nothing(
    site: Panel,
) -> None:
    job = await add_job_on_the_command_line(site)
    await pinclaw(site, "memory", "add", "Keep me", "--key", "keep")
    (kept,) = await memory(site.daemon).store.list()
    form = {"name": "sneaky", "kind": "every", "schedule": "1h", "text": "p"}
    async with logged_in(site) as (client, _), site.client() as stranger:
        for who in (client, stranger):
            for path, data in (
                ("/cron/add", form),
                (f"/cron/{job.id}/pause", {}),
                (f"/cron/{job.id}/delete", {}),
                (f"/memory/{kept.id}/forget", {}),
                ("/hardware/gpio/porch_light/switch", {"on": "1"}),
            ):
                refused = await who.post(path, data={**data, "csrf": "not-the-token"})
                assert refused.status_code == 403, path
                bare = await who.post(path, data=data)
                assert bare.status_code == 403, path
    assert [j.name for j in await jobs(site.daemon)] == ["water plants"]
    assert (await cron(site.daemon).store.get(job.id)).state == "active"  # type: ignore[union-attr]
    assert await memory(site.daemon).store.get_by_id(kept.id) is not None
    bank = gpio_tool(site.daemon).bank
    assert bank.factory is None  # no pin was even opened
    assert [e["action"] for e in audit(site) if e.get("kind") == "panel"] == ["login"]


async def until_shown(client: httpx.AsyncClient, path: str, wanted: str) -> httpx.Response:
    """The page at ``path`` once it shows ``wanted`` (a call finishing in the background)."""
    for _ in range(100):
        page = await client.get(path)
        if wanted in text(page):
            return page
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path} never showed {wanted!r}:\n{page.text}")


def gpio_tool(daemon: Daemon) -> GpioTool:
    found = daemon.app.tools.get("gpio_write")
    assert isinstance(found, GpioTool)
    return found


async def test_switching_goes_through_the_policy_gate_and_its_approval(
    site: Panel, telegram: FakeTelegram
) -> None:
    async with logged_in(site) as (client, csrf):
        asked = await client.post(
            "/hardware/gpio/porch_light/switch", data={"csrf": csrf, "on": "1"}
        )
        assert asked.status_code == 303
        page = await client.get("/hardware")
        assert "gpio_write (device=porch_light, on=True) is waiting for an approval" in text(page)
        assert 'data-refresh="5"' in page.text  # the page follows the call
        assert "not switched yet (starts off)" in page.text  # not before the approval
        bank = gpio_tool(site.daemon).bank

        # The supervised policy asks the owner in their private chat, like a job's call.
        request = await request_in(telegram, TELEGRAM_OWNER)
        assert "gpio_write" in request.text and "device=porch_light, on=true" in request.text
        allowed = await tap(
            telegram, TELEGRAM_OWNER, ADA, button(request, "once"), request.message_id
        )
        assert allowed["text"] == "Allowed once."
        await asyncio.to_thread(
            wait_until, lambda: isinstance(bank.factory, MockFactory) and bank.factory.pin(17).state
        )
        page = await until_shown(client, "/hardware", "done: porch_light (pin 17) is now on.")
        assert "porch_light" in page.text and ">on<" in page.text

        mine = await client.get("/audit", params={"person": "1", "tool": "gpio_write"})
        assert "1 entry match" in text(mine)
    call = next(e for e in audit(site) if e.get("tool") == "gpio_write")
    assert call["session"] == "panel:1" and call["origin"] == "panel"
    assert call["decision"] == "approved" and call["approved_by"] == "Ada"
    assert call["outcome"] == "ok"
    (pressed,) = panel_actions(site, "hardware.switch")
    assert pressed["outcome"] == "waiting" and pressed["details"]["arguments"] == {
        "device": "porch_light",
        "on": True,
    }


async def test_a_call_still_waiting_for_approval_is_cancelled_when_the_daemon_stops(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    running = panel_daemon(tmp_path, llm, telegram, tables=TABLES)
    async with running as site, logged_in(site) as (client, csrf):
        data = {"csrf": csrf, "on": "1"}
        await client.post("/hardware/gpio/porch_light/switch", data=data)
        await request_in(telegram, TELEGRAM_OWNER)  # asked, and nobody answers
        assert [t for t in asyncio.all_tasks() if t.get_name() == "panel gpio_write"]
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "panel gpio_write"]
    assert not [e for e in audit(site) if e.get("tool") == "gpio_write"]  # it never ran


async def test_reading_a_sensor_now_is_a_tool_call_that_feeds_the_chart(site: Panel) -> None:
    async with logged_in(site) as (client, csrf):
        before = await client.get("/hardware")
        assert "no readings yet" in before.text
        read = await client.post("/hardware/sensor/greenhouse/read", data={"csrf": csrf})
        assert read.status_code == 303
        page = await client.get("/hardware")
        assert "greenhouse (BME280 at 0x76, bus 1, simulated): 21.5 °C" in text(page)  # notice
        assert "21.5 °C" in text(page) and "1013.2 hPa" in text(page)
        chart = await client.get("/hardware/chart/greenhouse/pressure.png", params={"hours": 1})
        assert chart.status_code == 200 and chart.content.startswith(b"\x89PNG")
        wrong = await client.post("/hardware/gpio/door/switch", data={"csrf": csrf, "on": "1"})
        assert wrong.status_code == 303
        refused = await client.get("/hardware")
        assert "Not done: door is an input and cannot be changed that way." in text(refused)
    reads = [e for e in audit(site) if e.get("tool") == "sensor_read"]
    assert [(e["decision"], e["session"]) for e in reads] == [("allowed", "panel:1")]


async def test_the_audit_page_filters_pages_and_verifies_the_chain(
    site: Panel, telegram: FakeTelegram, llm: FakeLLM
) -> None:
    await calculator_call(site, telegram, llm)
    async with logged_in(site) as (client, csrf):
        await client.post("/hardware/sensor/greenhouse/read", data={"csrf": csrf})
        only = await client.get("/audit", params={"tool": "sensor_read"})
        assert "1 entry matches" in text(only)
        assert "calculator" not in only.text.split('id="entries"')[1]
        ada = await site.daemon.app.people.of_identity(f"telegram:{TELEGRAM_OWNER}")
        assert ada is not None and not ada.is_owner  # Ada chats; the owner logged in
        adas = await client.get("/audit", params={"person": str(ada.id)})
        assert "1 entry matches" in text(adas) and "calculator" in adas.text
        owners = await client.get("/audit", params={"person": "1", "tool": "calculator"})
        assert "No entry matches these filters." in owners.text
        logins = await client.get("/audit", params={"tool": "login", "decision": "ok"})
        assert "1 entry matches" in text(logins)
        other_day = await client.get("/audit", params={"day": "2001-01-01"})
        assert "No entry matches these filters." in other_day.text

        checked = await client.get("/audit/verify", params={"tool": "calculator"})
        entries = len(audit(site))
        assert f"OK: {entries} entries, the hash chain is intact." in text(checked)
        assert "1 entry matches" in text(checked)  # the filters stay

        path = site.daemon.app.loaded.data_dir / "audit.jsonl"
        lines = path.read_text().splitlines()
        number = next(n for n, line in enumerate(lines, 1) if "6*7" in line)
        lines[number - 1] = lines[number - 1].replace("6*7", "6*8")
        path.write_text("\n".join(lines) + "\n")
        broken = await client.get("/audit/verify")
    why = f"BROKEN at line {number}: its content does not match its hash"
    assert f"{why} (the {number - 1} entries before it are intact)." in text(broken)
    assert why in await pinclaw(site, "audit", "verify")


async def test_a_job_added_in_chromium_is_listed_with_screenshots(
    site: Panel, browser: Browser, telegram: FakeTelegram, llm: FakeLLM
) -> None:
    await pinclaw(site, "memory", "add", "The tomatoes like 24 degrees", "--key", "tomatoes")
    await pinclaw(
        site, "memory", "add", "Bins go out on Tuesday evening", "--key", "bins", "--shared"
    )
    await calculator_call(site, telegram, llm)
    readings = ReadingStore(site.daemon.app.db)
    now = time.time()
    for step in range(48):  # a warm afternoon and a cool night, every half hour
        warmth = abs(((step % 24) - 12) / 12)
        values = [
            Measurement("temperature", 17 + 6 * warmth, "°C"),
            Measurement("humidity", 70 - 20 * warmth, "%RH"),
            Measurement("pressure", 1009 + step * 0.1, "hPa"),
        ]
        await readings.add("greenhouse", values, now - (48 - step) * 1800)
    page = await open_page(browser)
    await log_in(page, site)
    await page.goto(f"{site.url}/cron")
    await page.get_by_label("Name").fill("water plants")
    await page.get_by_label("When").select_option("cron")
    await page.get_by_label("Schedule").fill("0 7 * * *")
    await page.get_by_label("Prompt or command").fill("Remind Ada to water the tomatoes")
    await page.get_by_role("button", name="Add job").click()
    await page.wait_for_url(f"{site.url}/cron")
    row = page.locator("tr", has_text="water plants")
    await row.first.wait_for()
    assert "cron 0 7 * * *" in await row.first.inner_text()
    (job,) = await jobs(site.daemon)
    assert job.name == "water plants"
    await screenshot(page, "cron")
    await page.goto(f"{site.url}/hardware")
    await page.get_by_role("button", name="Read now").click()  # sensor_read, through the gate
    await page.get_by_text("Done from here").wait_for()
    for name in ("memory", "audit", "hardware"):
        await page.goto(f"{site.url}/{name}")
        await page.wait_for_function(IMAGES_LOADED)  # the sensor chart, drawn on request
        await screenshot(page, name)
