"""The web panel end to end: the real daemon, the fake Telegram and model, chromium and httpx.

The browser logs in with a token from the real ``pinclaw web token``, sees an
approval request the fake model's ``shell`` call raised on Telegram, and allows
it: the tool runs, its result reaches the model, and the Telegram message
becomes the same record a button tap makes. httpx checks what a browser
cannot show: requests without the session or the CSRF token are refused and
change nothing. The tests also take the screenshots the README shows.
"""

from __future__ import annotations

import asyncio
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import Browser, expect

from bot.approvals.store import ApprovalStore, StoredApproval
from tests.browser import Panel, csrf_of, log_in, open_page, screenshot
from tests.cli_helpers import run
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.fake_telegram import FakeTelegram, SentMessage
from tests.telegram_taps import request_in, said

OWNER = 7001
ADA = FakeTelegram.user(OWNER, "Ada", "ada")
MKDIR = CallTools([("shell", {"command": "mkdir build"})])
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'self'"
)


async def pending_request(panel: Panel, telegram: FakeTelegram, llm: FakeLLM) -> StoredApproval:
    """Ada asks for a build folder; the model's shell call waits for approval (returned)."""
    llm.queue(MKDIR, Say("Done."))
    telegram.user_sends(OWNER, ADA, "make a build folder")
    await request_in(telegram, OWNER)
    approvals = panel.daemon.approvals
    assert approvals is not None
    for _ in range(100):  # the message id is stored just after the request was posted
        pending = await approvals.store.pending()
        if pending and pending[0].message_ref:
            break
        await asyncio.sleep(0.05)
    assert [record.tool for record in pending] == ["shell"]
    return pending[0]


async def record_in_chat(telegram: FakeTelegram) -> SentMessage:
    """The request once it has been edited into a record."""

    def record() -> SentMessage | None:
        return next((m for m in telegram.sent(OWNER) if m.edits and not m.buttons), None)

    return await telegram.await_until(record)


def panel_entries(panel: Panel) -> list[dict[str, Any]]:
    """The audit log's panel entries."""
    loaded = panel.daemon.app.loaded
    path = loaded.data_dir / loaded.config.security.audit_log
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [entry for entry in entries if entry.get("kind") == "panel"]


async def test_log_in_and_allow_a_pending_request_once(
    tmp_path: Path, panel: Panel, browser: Browser, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    page = await open_page(browser)
    await page.goto(f"{panel.url}/approvals")
    await page.wait_for_url(re.compile(r"/login\?next="))
    await screenshot(page, "login")
    await log_in(page, panel)
    await expect(page.get_by_role("cell", name="telegram", exact=True)).to_be_visible()
    await expect(page.locator("span.state-connected")).to_have_text("connected")

    record = await pending_request(panel, telegram, llm)
    await page.get_by_role("link", name="Approvals").click()
    card = page.locator(f"#approval-{record.id}")
    await expect(card.locator("pre.command")).to_have_text("command=mkdir build")
    await expect(card).to_contain_text("Asked by")
    await expect(card).to_contain_text(f"telegram chat {OWNER}")
    await screenshot(page, "approvals")
    await card.get_by_role("button", name="Allow once").click()
    await expect(page.get_by_role("status")).to_have_text("Allowed once.")
    await expect(page.locator(f"#approval-{record.id}")).to_have_count(0)

    await said(telegram, OWNER, "Done.")
    chat_record = await record_in_chat(telegram)
    owner = await panel.daemon.app.people.owner()
    assert f"✅ Allowed once by {owner.name} (web panel) at " in chat_record.text
    assert "mkdir build" in chat_record.text
    assert (tmp_path / "state" / "workspace" / "build").is_dir()
    results = llm.tool_results()  # what the model read after the call ran
    assert len(llm.requests) == 2 and len(results) == 1 and "not run" not in results[0]
    login, once = panel_entries(panel)
    assert (login["action"], once["action"]) == ("login", "approval.once")
    assert once["person"] == owner.name and once["person_id"] == owner.id
    assert once["outcome"] == "ok" and once["details"]["approval"] == record.id
    assert once["details"]["arguments"] == "command=mkdir build"

    await page.get_by_role("link", name="Overview").click()
    await expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    await screenshot(page, "overview")


async def test_without_a_session_pages_go_to_the_login_and_changes_are_refused(
    panel: Panel, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    record = await pending_request(panel, telegram, llm)
    async with panel.client() as http:
        for path in ("/", "/approvals", "/cron", "/memory", "/audit", "/hardware", "/chat"):
            answer = await http.get(path)
            assert answer.status_code == 303, path
            assert answer.headers["Location"].startswith("/login"), path
        refused = await http.post(f"/approvals/{record.id}/decide", data={"choice": "once"})
        assert refused.status_code == 403
        http.cookies.set("pinclaw_session", "guess")
        forged = await http.post(
            f"/approvals/{record.id}/decide", data={"choice": "once", "csrf": "guess"}
        )
        assert forged.status_code == 403
    store = ApprovalStore(panel.daemon.app.db)
    assert (await store.get(record.id)) == record  # still pending, nothing changed
    assert len(llm.requests) == 1


async def test_a_change_without_the_csrf_token_is_refused_and_changes_nothing(
    panel: Panel, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    record = await pending_request(panel, telegram, llm)
    store = ApprovalStore(panel.daemon.app.db)
    async with panel.client() as http:
        csrf = await panel.logged_in(http)
        decide = f"/approvals/{record.id}/decide"
        assert (await http.post(decide, data={"choice": "once"})).status_code == 403
        forged = csrf[:-1] + ("y" if csrf.endswith("x") else "x")  # one character off, always
        wrong = await http.post(decide, data={"choice": "once", "csrf": forged})
        assert wrong.status_code == 403
        other_site = await http.post(
            decide,
            data={"choice": "once", "csrf": csrf},
            headers={"Origin": "https://attacker.example"},
        )
        assert other_site.status_code == 403
        not_utf8 = await http.post(
            decide,
            content=b"choice=once&csrf=\xff",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert not_utf8.status_code == 400 and "not UTF-8" in not_utf8.text
        assert (await store.get(record.id)) == record
        assert len(llm.requests) == 1
        allowed = await http.post(decide, data={"choice": "deny", "csrf": csrf})
        assert allowed.status_code == 303
    await said(telegram, OWNER, "Done.")
    settled = await store.get(record.id)
    assert settled is not None and settled.status == "denied"
    assert "denied" in llm.tool_results()[-1]


async def test_every_page_sends_the_security_headers_and_no_inline_script(
    panel: Panel,
) -> None:
    async with panel.client() as http:
        login = await http.get("/login")
        assert login.headers["Content-Security-Policy"] == CSP
        assert_no_inline_code(login.text)
        await panel.logged_in(http)
        cookie = next(c for c in http.cookies.jar if c.name == "pinclaw_session")
        assert cookie.has_nonstandard_attr("HttpOnly")
        assert (cookie.get_nonstandard_attr("SameSite") or "").lower() == "strict"
        assert not cookie.secure  # plain HTTP on the loopback
        for path in ("/", "/approvals", "/cron", "/memory", "/audit", "/hardware", "/chat"):
            answer = await http.get(path)
            assert answer.status_code == 200, path
            assert answer.headers["Content-Security-Policy"] == CSP, path
            assert answer.headers["X-Frame-Options"] == "DENY", path
            assert answer.headers["Cache-Control"] == "no-store", path
            assert_no_inline_code(answer.text)
        elsewhere = await http.get("/", headers={"Host": "attacker.example"})
        assert elsewhere.status_code == 403  # DNS rebinding: a loopback panel wants a loopback name


async def test_after_the_login_only_a_page_of_the_panel_is_opened(panel: Panel) -> None:
    token = await panel.token()
    async with panel.client() as http:
        for target, where in (
            ("/approvals", "/approvals"),
            ("//attacker.example/", "/"),
            ("/\\attacker.example/", "/"),
            ("https://attacker.example/", "/"),
        ):
            http.cookies.clear()
            form = await http.get("/login", params={"next": target})
            answer = await http.post(
                "/login", data={"csrf": csrf_of(form.text), "token": token, "next": target}
            )
            assert (answer.status_code, answer.headers["Location"]) == (303, where), target


async def test_logins_are_rate_limited_per_address(panel: Panel) -> None:
    token = await panel.token()
    async with panel.client() as http:
        for _ in range(5):
            form = await http.get("/login")
            wrong = await http.post("/login", data={"csrf": csrf_of(form.text), "token": "nope"})
            assert wrong.status_code == 401
            assert "not the current login token" in wrong.text
        form = await http.get("/login")
        limited = await http.post("/login", data={"csrf": csrf_of(form.text), "token": token})
        assert limited.status_code == 429
        assert "Too many wrong tokens from your address" in limited.text
        assert "pinclaw_session" not in limited.cookies


async def test_a_new_token_replaces_the_old_and_rotate_logs_everyone_out(panel: Panel) -> None:
    first = await panel.token()
    async with panel.client() as http, panel.client() as other:
        await panel.logged_in(http, first)
        second = await panel.token()  # the first no longer logs in; sessions stay
        assert (await http.get("/")).status_code == 200
        form = await other.get("/login")
        stale = await other.post("/login", data={"csrf": csrf_of(form.text), "token": first})
        assert stale.status_code == 401
        await panel.logged_in(other, second)
        await panel.token(rotate=True)
        for client in (http, other):
            assert (await client.get("/")).status_code == 303


async def test_logging_out_ends_the_session_on_the_server(panel: Panel) -> None:
    async with panel.client() as http:
        csrf = await panel.logged_in(http)
        value = http.cookies["pinclaw_session"]
        assert (await http.post("/logout", data={"csrf": csrf})).status_code == 303
        http.cookies.set("pinclaw_session", value)
        again = await http.get("/")
        assert again.status_code == 303  # the old cookie is dead, not just forgotten
    actions = [entry["action"] for entry in panel_entries(panel)]
    assert actions == ["login", "logout"]
    shown = await asyncio.to_thread(run, panel.home, "audit", "show", "--config", str(panel.config))
    owner = (await panel.daemon.app.people.owner()).name
    assert f"{owner} (web panel, 127.0.0.1) logout {{}} -> ok" in shown.stdout
    verified = await asyncio.to_thread(
        run, panel.home, "audit", "verify", "--config", str(panel.config)
    )
    assert verified.returncode == 0 and "2 entries" in verified.stdout


async def test_an_always_rule_made_in_the_panel_is_listed_and_revocable(
    panel: Panel, browser: Browser, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    record = await pending_request(panel, telegram, llm)
    page = await open_page(browser, phone=True)
    await log_in(page, panel)
    await page.goto(f"{panel.url}/approvals")
    await (
        page.locator(f"#approval-{record.id}")
        .get_by_role("button", name="Always (everyone)")
        .click()
    )
    await expect(page.get_by_role("status")).to_contain_text("Always allowed (rule #1).")
    await said(telegram, OWNER, "Done.")
    rules = page.locator("table").first
    await expect(rules).to_contain_text("command=mkdir build")
    page.once("dialog", lambda dialog: dialog.accept())
    await rules.get_by_role("button", name="Revoke").click()
    await expect(page.get_by_role("status")).to_have_text(
        "Removed rule #1; that call will ask again."
    )
    approvals = panel.daemon.approvals
    assert approvals is not None and await approvals.store.rules() == []
    actions = [entry["action"] for entry in panel_entries(panel)]
    assert actions == ["login", "approval.always", "rule.revoke"]


def assert_no_inline_code(html: str) -> None:
    """No inline script, style attribute or event handler: the CSP would block them."""
    found: list[str] = []

    class Scan(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            names = {name for name, _ in attrs}
            if tag == "script" and "src" not in names:
                found.append("inline <script>")
            if tag == "style":
                found.append("<style>")
            found.extend(f"{tag} {name}=" for name in names if name == "style")
            found.extend(f"{tag} {name}=" for name in names if name.startswith("on"))

    Scan().feed(html)
    assert found == []


async def test_the_api_paths_keep_their_own_rules(panel: Panel) -> None:
    async with panel.client() as http:
        status = await http.get("/status")
        assert status.status_code == 200 and status.json()["channels"]["telegram"]
        assert "Set-Cookie" not in status.headers
        assert (await http.get("/status", headers={"Host": "attacker.example"})).status_code == 403
    async with httpx.AsyncClient(base_url=panel.url) as http:
        assert (await http.get("/static/panel.css")).status_code == 200  # the login page's style
