"""Who may use the panel: the login token, server-side sessions, the login rate limit.

The login token is printed once by ``pinclaw web token``; only its SHA-256 is
kept (in the key-value table), so a copy of the database does not log anyone
in. A session is a random cookie value; the database keeps its hash, the person
it acts for, its CSRF token and its expiry, so ``pinclaw web token --rotate``
(run while the daemon is running) ends every session at once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from bot.panel.context import PanelDeps, PanelSession
from bot.security.tries import TryLimiter
from bot.store.db import Database
from bot.store.kv import KeyValueStore

COOKIE = "pinclaw_session"
KV_NAMESPACE = "web"
KV_TOKEN = "login_token_sha256"
LOGIN_TRIES, LOGIN_WINDOW_S = 5, 60.0  # wrong tokens per client address in any minute

MIGRATIONS = [
    """
    CREATE TABLE panel_sessions (
        key TEXT PRIMARY KEY,
        person_id INTEGER NOT NULL,
        csrf TEXT NOT NULL,
        client TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL
    );
    """,
]


def digest(secret: str) -> str:
    """The stored form of a token or session cookie."""
    return hashlib.sha256(secret.encode()).hexdigest()


class LoginTokens:
    """The one login token, stored hashed."""

    def __init__(self, kv: KeyValueStore) -> None:
        self._kv = kv

    async def issue(self) -> str:
        """A new token; the previous one stops working. Returns it (shown once)."""
        token = secrets.token_urlsafe(24)
        await self._kv.set(KV_NAMESPACE, KV_TOKEN, digest(token))
        return token

    async def exists(self) -> bool:
        """Whether a token was ever issued."""
        return await self._kv.get(KV_NAMESPACE, KV_TOKEN) is not None

    async def check(self, token: str) -> bool:
        """Whether ``token`` is the current one (compared in constant time)."""
        stored = await self._kv.get(KV_NAMESPACE, KV_TOKEN)
        if stored is None or not token:
            return False
        return hmac.compare_digest(stored, digest(token.strip()))


class SessionStore:
    """Sessions in SQLite, plus short notices shown on the next page (in memory)."""

    def __init__(
        self, db: Database, lifetime_s: float, clock: Callable[[], float] = time.time
    ) -> None:
        self._db = db
        self._lifetime_s = lifetime_s
        self._clock = clock
        self._notices: dict[str, list[str]] = {}

    async def setup(self) -> None:
        """Create or upgrade the table; forget expired sessions."""
        await self._db.migrate("panel_sessions", MIGRATIONS)
        async with self._db.write() as conn:
            await conn.execute("DELETE FROM panel_sessions WHERE expires_at < ?", (self._clock(),))

    async def create(self, person_id: int, client: str) -> str:
        """Start a session for ``person_id``; the cookie value (shown to the browser only)."""
        cookie = secrets.token_urlsafe(32)
        now = self._clock()
        async with self._db.write() as conn:
            await conn.execute(
                "INSERT INTO panel_sessions VALUES (?, ?, ?, ?, ?, ?)",
                (digest(cookie), person_id, secrets.token_urlsafe(24), client, now,
                 now + self._lifetime_s),
            )  # fmt: skip
        return cookie

    async def get(self, cookie: str) -> PanelSession | None:
        """The live session for a cookie value (None if unknown or expired)."""
        if not cookie:
            return None
        rows = await self._db.conn.execute_fetchall(
            "SELECT s.key, s.person_id, COALESCE(p.name, ''), s.csrf, s.expires_at "
            "FROM panel_sessions s LEFT JOIN people p ON p.id = s.person_id "
            "WHERE s.key = ? AND s.expires_at > ?",
            (digest(cookie), self._clock()),
        )
        for key, person_id, name, csrf, expires in rows:
            return PanelSession(str(key), int(person_id), str(name), str(csrf), float(expires))
        return None

    async def end(self, key: str) -> None:
        """End one session (logout)."""
        self._notices.pop(key, None)
        async with self._db.write() as conn:
            await conn.execute("DELETE FROM panel_sessions WHERE key = ?", (key,))

    async def end_all(self) -> int:
        """End every session; how many there were."""
        self._notices.clear()
        async with self._db.write() as conn:
            cursor = await conn.execute("DELETE FROM panel_sessions")
        return cursor.rowcount

    def notify(self, key: str, text: str) -> None:
        """Keep a notice for the session's next page."""
        kept = self._notices.setdefault(key, [])
        kept.append(text)
        del kept[:-5]

    def notices(self, key: str) -> list[str]:
        """The session's notices, once."""
        return self._notices.pop(key, [])


@dataclass(frozen=True, slots=True)
class NewToken:
    """What ``pinclaw web token`` made: the token, whether it replaced one, sessions ended."""

    token: str
    replaced: bool
    ended: int


async def new_login_token(db: Database, *, end_sessions: bool) -> NewToken:
    """A new login token, whether there was one before, and how many sessions were ended."""
    kv = KeyValueStore(db)
    await kv.setup()
    sessions = SessionStore(db, 1.0)
    await sessions.setup()
    tokens = LoginTokens(kv)
    replaced = await tokens.exists()
    token = await tokens.issue()
    return NewToken(token, replaced, await sessions.end_all() if end_sessions else 0)


class PanelAuth:
    """The panel's own parts: login token, sessions, login rate limit, cookie rules."""

    def __init__(self, deps: PanelDeps) -> None:
        web_config = deps.web
        db = deps.app.db
        self.kv = KeyValueStore(db)
        self.tokens = LoginTokens(self.kv)
        self.sessions = SessionStore(db, web_config.session_lifetime_s)
        self.limiter = TryLimiter(LOGIN_TRIES, LOGIN_WINDOW_S)
        self.secure = web_config.tls_cert is not None or web_config.behind_proxy
        self.behind_proxy = web_config.behind_proxy

    async def setup(self) -> None:
        """Create the tables the panel keeps."""
        await self.kv.setup()
        await self.sessions.setup()

    def client(self, request: web.Request) -> str:
        """The client's address (behind a proxy: the one the proxy saw)."""
        if self.behind_proxy:
            forwarded = request.headers.get("X-Forwarded-For", "")
            last = forwarded.rsplit(",", 1)[-1].strip()
            if last:
                return last
        return request.remote or "unknown"

    def set_cookie(self, response: web.StreamResponse, value: str, max_age: float) -> None:
        """The session cookie: HttpOnly, SameSite=Strict, Secure over TLS or a proxy."""
        response.set_cookie(
            COOKIE,
            value,
            max_age=int(max_age),
            path="/",
            httponly=True,
            samesite="Strict",
            secure=self.secure,
        )


AUTH: web.AppKey[PanelAuth] = web.AppKey("panel_auth", PanelAuth)
