"""The Slack Web API as the channel uses it: one kept-alive session, downloads, the reaction.

``SlackWeb`` gives slack_sdk's ``AsyncWebClient`` (retry handlers switched off:
``send_with_retries`` decides about retries) the shared TLS context and, while
the channel runs, one pooled aiohttp session, so a reply does not pay for a new
TLS handshake per call. The session belongs to one ``run`` and is closed when it
ends, however it ends; a reply sent between runs (while the supervisor waits to
start the channel again) goes through a short-lived session instead, so nothing
is ever left open.

``ProgressReaction`` is the honest stand-in for a typing indicator: a reaction
on the message being answered, removed when the reply is out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from ssl import SSLContext
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient

from bot.core.channel import DeliveryError
from bot.core.messages import Attachment
from channels.slack.send import SlackRefused, call

log = logging.getLogger(__name__)

MAX_DOWNLOAD_BYTES = 25 * 1024 * 1024
DOWNLOAD_TIMEOUT_S = 120.0
REACTION_TIMEOUT_S = 5.0
SCOPE_ERRORS = frozenset({"missing_scope", "not_allowed_token_type", "invalid_auth"})


class SlackWeb:
    """The channel's Web API client; pooled while a run is active."""

    def __init__(self, token: str, base_url: str, tls: SSLContext) -> None:
        self._token = token
        self._base_url = base_url
        self._tls = tls
        self._session: aiohttp.ClientSession | None = None
        self._pooled: AsyncWebClient | None = None
        self._oneshot = self._make_client(None)  # slack_sdk opens and closes a session per call

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Pool connections for the duration of the block (one channel run)."""
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self._tls))
        self._pooled = self._make_client(self._session)
        try:
            yield
        finally:
            session, self._session, self._pooled = self._session, None, None
            await session.close()

    def client(self) -> AsyncWebClient:
        """slack_sdk's client with the bot token."""
        return self._pooled or self._oneshot

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[aiohttp.ClientSession]:
        """The run's session, or a short-lived one between runs."""
        if self._session is not None and not self._session.closed:
            yield self._session
            return
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self._tls)) as own:
            yield own

    def _make_client(self, session: aiohttp.ClientSession | None) -> AsyncWebClient:
        return AsyncWebClient(
            token=self._token,
            base_url=self._base_url,
            ssl=self._tls,  # the Socket Mode client uses it for the websocket too
            session=session,
            retry_handlers=[],  # send_with_retries decides; never retry twice
            logger=logging.getLogger("channels.slack.client"),
        )

    def hosts_file(self, url: str) -> bool:
        """True for Slack's own hosts (and the configured API host): the bot token may go there."""
        host = urlsplit(url).hostname or ""
        api_host = urlsplit(self._base_url).hostname or ""
        return host in {api_host, "slack.com"} or host.endswith(".slack.com")

    async def download(self, attachment: Attachment) -> bytes:
        """A file shared in Slack, fetched with the bot token; ``DeliveryError`` if it cannot be."""
        name = attachment.name
        if attachment.size > MAX_DOWNLOAD_BYTES:
            raise DeliveryError(f"{name} is larger than {MAX_DOWNLOAD_BYTES >> 20} MiB")
        if not self.hosts_file(attachment.ref):
            raise DeliveryError(f"{name} is not stored in Slack")
        headers = {"Authorization": f"Bearer {self._token}"}
        try:
            async with (
                asyncio.timeout(DOWNLOAD_TIMEOUT_S),
                self.session() as session,
                session.get(attachment.ref, headers=headers) as response,
            ):
                if response.status != 200:
                    raise DeliveryError(f"Slack answered HTTP {response.status} for {name}")
                if response.url.path.startswith("/login") or (
                    response.content_type == "text/html" and attachment.mime_type != "text/html"
                ):
                    raise DeliveryError(
                        f"Slack sent a sign-in page instead of {name}; "
                        "the app needs the files:read scope"
                    )
                data = bytearray()
                async for chunk in response.content.iter_chunked(64 * 1024):
                    data += chunk
                    if len(data) > MAX_DOWNLOAD_BYTES:
                        raise DeliveryError(f"{name} is larger than the download limit")
                return bytes(data)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise DeliveryError(f"could not download {name}: {exc or type(exc).__name__}") from exc


class ProgressReaction:
    """Adds and removes one reaction; stops trying (after one warning) without the scope."""

    def __init__(self, web: SlackWeb, name: str) -> None:
        self._web = web
        self.name = name

    async def add(self, channel: str, ts: str) -> bool:
        """Put the reaction on a message; True when it is there."""
        return await self._react("reactions.add", channel, ts)

    async def remove(self, channel: str, ts: str) -> None:
        """Take the reaction off again."""
        await self._react("reactions.remove", channel, ts)

    async def _react(self, method: str, channel: str, ts: str) -> bool:
        if not self.name:
            return False
        client = self._web.client()
        action = client.reactions_add if method == "reactions.add" else client.reactions_remove
        try:
            async with asyncio.timeout(REACTION_TIMEOUT_S):
                await call(method, action(channel=channel, timestamp=ts, name=self.name))
        except SlackRefused as exc:
            if exc.error in {"already_reacted", "no_reaction"}:
                return True
            if exc.error in SCOPE_ERRORS:
                log.warning(
                    "Slack refused the :%s: progress reaction (%s); add the reactions:write "
                    "scope to show progress; not trying again",
                    self.name,
                    exc.error,
                )
                self.name = ""
            else:
                log.debug("progress reaction failed: %s", exc)
            return False
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.debug("progress reaction failed: %s", exc or type(exc).__name__)
            return False
        return True
