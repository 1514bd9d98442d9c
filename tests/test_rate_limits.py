"""Rate limits hold under concurrency: a burst of parallel tries gets no more real checks.

Every limiter counts a try before its check awaits anything, so sixty requests
sent at once are held to the documented number of checks: the panel login
(five wrong tokens a minute per address), ``/link`` codes (five wrong codes an
hour per account) and pairing (one code per stranger, at most three waiting
per channel). The bursts go over real sockets: aiohttp against the daemon's own
HTTP server, and the fake Telegram for chat messages. What counts as a real
check is seen from outside the code under test: by the answers, and by the
statements SQLite ran (its trace callback), since every such check reads its
secret from the database. The machine secrets (the ``[web]`` bearer token, the
Telegram webhook secret) have no limiter: a burst of wrong ones is refused
whole and locks nobody out.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from bot.daemon.main import Daemon
from bot.security.tries import TryLimiter
from bot.store.pairing import MAX_PENDING_PER_CHANNEL
from channels.telegram.webhook import SECRET_HEADER
from tests.browser import Panel, csrf_of, free_port
from tests.channel_tables import telegram_table
from tests.daemon_harness import running_daemon
from tests.fake_llm import FakeLLM
from tests.fake_telegram import FakeTelegram

BURST = 60
LOGIN_TRIES = 5  # README: five wrong tokens from one address within a minute
LINK_TRIES = 5  # README: five wrong codes in an hour per account
OWNER, STRANGER = 7001, 7009
ADA = FakeTelegram.user(OWNER, "Ada", "ada")
EVE = FakeTelegram.user(STRANGER, "Eve", "eve")
TOKEN_READ = "FROM kv WHERE namespace = 'web' AND key = 'login_token_sha256'"
CODE_READ = "SELECT person_id FROM link_codes WHERE code = "


class Login:
    """One browser's login form, posted many times at once without a cookie jar."""

    def __init__(self, http: aiohttp.ClientSession, csrf: str) -> None:
        self._http = http
        self._csrf = csrf

    @classmethod
    async def open(cls, http: aiohttp.ClientSession) -> Login:
        """GET the form: its hidden field and its cookie carry the same value."""
        async with http.get("/login") as form:
            csrf = csrf_of(await form.text())
            assert form.cookies["pinclaw_login"].value == csrf
        return cls(http, csrf)

    async def post(self, token: str) -> tuple[int, str, bool]:
        """(status, page text, whether a session cookie came back) for one try."""
        async with self._http.post(
            "/login",
            data={"csrf": self._csrf, "token": token},
            headers={"Cookie": f"pinclaw_login={self._csrf}"},
            allow_redirects=False,
        ) as answer:
            return answer.status, await answer.text(), "pinclaw_session" in answer.cookies


@asynccontextmanager
async def panel_http(panel: Panel) -> AsyncIterator[aiohttp.ClientSession]:
    """aiohttp against the panel; cookies are sent by hand, so a burst shares one form."""
    async with aiohttp.ClientSession(
        base_url=panel.url, cookie_jar=aiohttp.DummyCookieJar()
    ) as http:
        yield http


@asynccontextmanager
async def traced(daemon: Daemon) -> AsyncIterator[list[str]]:
    """Every SQL statement the daemon's connection runs meanwhile, parameters filled in."""
    statements: list[str] = []
    conn = daemon.app.db.conn
    await conn.set_trace_callback(statements.append)
    try:
        yield statements
    finally:
        await conn.set_trace_callback(None)  # type: ignore[arg-type]  # None removes it


async def test_a_burst_of_wrong_logins_gets_five_checks_then_429(panel: Panel) -> None:
    token = await panel.token()
    async with panel_http(panel) as http:
        login = await Login.open(http)
        async with traced(panel.daemon) as statements:
            answers = await asyncio.gather(*(login.post(f"wrong-{n}") for n in range(BURST)))
        statuses = sorted(status for status, _, _ in answers)
        assert statuses == [401] * LOGIN_TRIES + [429] * (BURST - LOGIN_TRIES)
        assert all("not the current login token" in t for s, t, _ in answers if s == 401)
        assert all(
            "Too many wrong tokens from your address" in t for s, t, _ in answers if s == 429
        )
        # Each answer's form looks up whether a token exists (one read each); a real
        # check reads the stored hash once more. So at most five reads beyond the answers.
        reads = sum(TOKEN_READ in statement for statement in statements)
        assert reads <= BURST + LOGIN_TRIES, reads
        status, text, session = await login.post(token)
        assert (status, session) == (429, False)  # the right token waits out the minute too
        assert "Too many wrong tokens" in text


async def test_a_right_token_gives_its_try_back_and_wrong_ones_still_count(panel: Panel) -> None:
    token = await panel.token()
    async with panel_http(panel) as http:
        login = await Login.open(http)
        for n in range(LOGIN_TRIES - 1):
            assert (await login.post(f"wrong-{n}"))[0] == 401
        status, _, session = await login.post(token)
        assert (status, session) == (303, True)
        assert (await login.post("wrong-again"))[0] == 401  # the fifth wrong token
        assert (await login.post(token))[0] == 429


async def test_a_right_token_in_a_burst_frees_no_more_than_its_own_try(panel: Panel) -> None:
    token = await panel.token()
    async with panel_http(panel) as http:
        login = await Login.open(http)
        answers = await asyncio.gather(
            login.post(token), *(login.post(f"wrong-{n}") for n in range(BURST - 1))
        )
        statuses = [status for status, _, _ in answers]
        assert set(statuses) <= {303, 401, 429}
        assert statuses.count(401) <= LOGIN_TRIES  # a refund on the way in reopens nothing
        assert statuses.count(303) <= 1
        assert statuses.count(429) >= BURST - LOGIN_TRIES - 1


def test_tries_are_a_sliding_window_and_a_refund_gives_one_back() -> None:
    now = [1000.0]
    limiter = TryLimiter(5, 60.0, clock=lambda: now[0])
    taken = [limiter.reserve("a") for _ in range(5)]
    assert None not in taken
    assert limiter.reserve("a") is None  # five taken in this minute
    assert limiter.wait_s("a") == 60.0
    assert limiter.reserve("b") is not None  # another address has its own five
    now[0] += 30
    stamp = limiter.reserve("a")
    assert stamp is None and limiter.wait_s("a") == 30.0
    now[0] += 30  # the first five are a minute old
    assert limiter.wait_s("a") == 0.0
    stamp = limiter.reserve("a")
    assert stamp is not None
    limiter.refund("a", stamp)  # the right token: its try is given back
    assert [limiter.reserve("a") is not None for _ in range(6)] == [True] * 5 + [False]


def test_a_flood_of_clients_forgets_the_expired_first_then_the_oldest() -> None:
    now = [0.0]
    limiter = TryLimiter(1, 60.0, clock=lambda: now[0], max_clients=2)
    limiter.reserve("old")
    now[0] = 100.0
    limiter.reserve("a")
    limiter.reserve("b")  # "old" expired: forgotten to make room
    assert (limiter.wait_s("a"), limiter.wait_s("b")) == (60.0, 60.0)
    limiter.reserve("c")  # none expired: the oldest, "a", goes
    assert (limiter.wait_s("a"), limiter.wait_s("b"), limiter.wait_s("c")) == (0.0, 60.0, 60.0)


@asynccontextmanager
async def telegram_daemon(
    tmp_path: Path,
    llm: FakeLLM,
    telegram: FakeTelegram,
    tables: dict[str, Any] | None = None,
    **extra: Any,
) -> AsyncIterator[Daemon]:
    """The daemon on the fake Telegram (Ada allowed, pairing on, ``extra`` settings), replies
    not paced; ``tables`` are further top-level config tables such as ``web``."""
    channels = {"telegram": telegram_table(telegram, pacing=False, **extra)}
    async with running_daemon(tmp_path, llm, channels, tables=tables) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


async def all_handled(daemon: Daemon, telegram: FakeTelegram, last: dict[str, object]) -> None:
    """Wait until the daemon took every update up to ``last`` and finished what they started."""
    await telegram.await_confirmed(last, timeout=30)
    await daemon.router.drain()


async def test_a_burst_of_wrong_link_codes_gets_five_checks_then_silence(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with telegram_daemon(tmp_path, llm, telegram) as daemon:
        async with traced(daemon) as statements:
            for n in range(BURST):
                last = telegram.user_sends(STRANGER, EVE, f"/link WRONG{n:03d}")
            await all_handled(daemon, telegram, last)
        replies = [m.text for m in telegram.sent(STRANGER)]
        assert len(replies) == LINK_TRIES, replies
        assert all(text.startswith("That link code is not valid") for text in replies)
        checks = [statement for statement in statements if CODE_READ in statement]
        assert len(checks) == LINK_TRIES, checks
        people = daemon.app.people
        code, _ = await people.new_link((await people.owner()).id)
        last = telegram.user_sends(STRANGER, EVE, f"/link {code}")
        await all_handled(daemon, telegram, last)
        assert len(telegram.sent(STRANGER)) == LINK_TRIES  # no answer: the hour is used up
        assert await people.of_identity(f"telegram:{STRANGER}") is None
        assert not await daemon.pairing.is_paired("telegram", str(STRANGER))
        last = telegram.user_sends(OWNER, ADA, f"/link {code}")  # the refusal left it unused
        await all_handled(daemon, telegram, last)
        assert telegram.sent(OWNER)[-1].text.startswith("Linked: this Telegram account")


async def test_a_burst_from_one_stranger_gets_one_pairing_code(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with telegram_daemon(tmp_path, llm, telegram) as daemon:
        for n in range(BURST):
            last = telegram.user_sends(STRANGER, EVE, f"hello {n}")
        await all_handled(daemon, telegram, last)
        replies = telegram.sent(STRANGER)
        assert len(replies) == 1 and "Your pairing code is" in replies[0].text
        pending = await daemon.pairing.pending()
        assert [(p.user_id, p.code in replies[0].text) for p in pending] == [(str(STRANGER), True)]


async def test_a_burst_from_many_strangers_leaves_at_most_three_codes_waiting(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    strangers = range(8001, 8011)
    async with telegram_daemon(tmp_path, llm, telegram) as daemon:
        for n in range(BURST // len(strangers)):
            for user in strangers:
                last = telegram.user_sends(user, FakeTelegram.user(user, f"S{user}"), f"hi {n}")
        await all_handled(daemon, telegram, last)
        answered = [user for user in strangers if telegram.sent(user)]
        assert len(answered) == MAX_PENDING_PER_CHANNEL
        assert all(len(telegram.sent(user)) == 1 for user in answered)
        pending = await daemon.pairing.pending()
        assert sorted(int(p.user_id) for p in pending) == answered


# The machine secrets have no limiter, on purpose: their senders (Telegram behind a
# reverse proxy, Prometheus) would be the ones locked out, and the secrets are long
# and random. Each is compared before anything awaits, and a flood locks nobody out.


async def test_a_burst_of_wrong_bearer_tokens_is_refused_and_locks_nobody_out(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    port = free_port()
    web = {"listen": f"127.0.0.1:{port}", "token": "s3cret-t0ken", "panel": False}
    async with (
        telegram_daemon(tmp_path, llm, telegram, tables={"web": web}),
        aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http,
    ):

        async def status(token: str) -> int:
            headers = {"Authorization": f"Bearer {token}"}
            async with http.get("/status", headers=headers) as answer:
                return answer.status

        statuses = await asyncio.gather(*(status(f"guess-{n}") for n in range(BURST)))
        assert statuses == [401] * BURST
        assert await status("s3cret-t0ken") == 200


async def test_a_burst_of_forged_webhook_updates_is_refused_and_the_real_ones_pass(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/telegram/hook"
    hook: dict[str, Any] = {"mode": "webhook", "webhook_url": url, "webhook_port": port}
    async with telegram_daemon(tmp_path, llm, telegram, **hook) as daemon:
        assert telegram.webhook_secret is not None
        async with aiohttp.ClientSession() as http:

            async def forge(n: int) -> int:
                chat = {"id": OWNER, "type": "private", "first_name": "Ada"}
                message = {"message_id": 900 + n, "from": ADA, "chat": chat, "date": 0}
                update = {"update_id": 900 + n, "message": {**message, "text": f"forged {n}"}}
                headers = {SECRET_HEADER: f"guess-{n}"}
                async with http.post(url, json=update, headers=headers) as answer:
                    return answer.status

            statuses = await asyncio.gather(*(forge(n) for n in range(BURST)))
        assert statuses == [403] * BURST
        telegram.user_sends(OWNER, ADA, "the real one")  # pushed with the right secret
        await telegram.await_until(lambda: telegram.sent(OWNER) or None)
        await daemon.router.drain()
        assert [m.text for m in telegram.sent(OWNER)] == ["You said: the real one"]
        assert [d.status for d in telegram.webhook_deliveries()] == [200]
        assert len(llm.requests) == 1
