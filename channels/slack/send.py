"""Slack errors in one place: what each one means for a person, and whether to retry.

Every Web API call goes through ``call``, which turns ``SlackApiError`` into
``SlackRefused`` with a readable reason. ``classify`` tells ``send_with_retries``
what is worth another try: a rate limit after its ``Retry-After``, Slack's own
hiccups and network errors with backoff; everything else (``channel_not_found``,
``not_in_channel``, ``msg_too_long``...) is permanent. slack_sdk's own retry
handlers are switched off, so nothing is retried twice.

Slash commands are answered through their ``response_url`` (seen only by the
person who ran the command); ``ResponseHooks`` keeps those URLs while Slack
accepts them (30 minutes, 5 posts). A button press's ``response_url`` is the
fallback for answering the presser.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from ssl import SSLContext
from typing import TypeVar

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.core.delivery import Retry
from bot.core.errors import PinclawError

T = TypeVar("T")

TRANSIENT = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
EXPLANATIONS = {
    "channel_not_found": "the conversation does not exist or the app cannot see it",
    "not_in_channel": "the app is not a member of this channel (invite it with /invite)",
    "is_archived": "the channel is archived",
    "msg_too_long": "the message is too long for Slack",
    "no_text": "the message was empty",
    "invalid_blocks": "Slack rejected the message layout",
    "missing_scope": "the Slack app lacks a permission (see docs/slack-setup.md)",
    "not_authed": "no token was sent",
    "invalid_auth": "the token is not valid",
    "token_revoked": "the token was revoked",
    "account_inactive": "the token belongs to a deactivated app or user",
    "restricted_action": "the workspace does not let the app post here",
    "user_not_in_channel": "that person is not in this conversation",
    "ratelimited": "Slack asked to slow down",
    "expired_url": "the command's reply link expired",
    "used_url": "the command's reply link was used up",
}
RESPONSE_URL_TTL_S = 30 * 60.0
RESPONSE_URL_USES = 5


class SlackRefused(PinclawError):
    """Slack answered a call with an error; ``error`` is Slack's code."""

    def __init__(
        self, method: str, error: str, status: int = 200, retry_after: float | None = None
    ) -> None:
        self.method, self.error, self.status, self.retry_after = method, error, status, retry_after
        meaning = EXPLANATIONS.get(error)
        super().__init__(f"{method}: {meaning} ({error})" if meaning else f"{method}: {error}")

    @classmethod
    def from_api_error(cls, method: str, exc: SlackApiError) -> SlackRefused:
        """The refusal carried by slack_sdk's exception."""
        response = exc.response
        error = str(response.get("error") or f"HTTP {response.status_code}")
        return cls(method, error, response.status_code, _retry_after(dict(response.headers)))


async def call(method: str, pending: Awaitable[T]) -> T:
    """Await a slack_sdk call, raising ``SlackRefused`` instead of ``SlackApiError``."""
    try:
        return await pending
    except SlackApiError as exc:
        raise SlackRefused.from_api_error(method, exc) from exc


def classify(exc: BaseException) -> Retry | None:
    """How to retry a failed call, or None when trying again cannot help."""
    if isinstance(exc, SlackRefused):
        if exc.status == 429 or exc.error == "ratelimited":
            return Retry(after_s=exc.retry_after if exc.retry_after is not None else 1.0)
        if exc.status >= 500 or exc.error in TRANSIENT:
            return Retry()
        return None
    if isinstance(exc, aiohttp.ClientError | OSError | TimeoutError):
        return Retry()
    if isinstance(exc, RuntimeError) and "closed" in str(exc):
        return Retry()  # the run's session closed under a send; the retry goes without it
    return None


def _retry_after(headers: dict[str, object]) -> float | None:
    for name, value in headers.items():
        if name.lower() == "retry-after":
            try:
                return max(0.0, float(str(value)))
            except ValueError:
                return None
    return None


@dataclass(slots=True)
class Hook:
    """A slash command's ``response_url`` and how much use Slack still allows."""

    url: str
    expires_at: float
    uses_left: int = RESPONSE_URL_USES

    def usable(self) -> bool:
        """True while Slack still accepts posts to this URL."""
        return self.uses_left > 0 and time.monotonic() < self.expires_at


class ResponseHooks:
    """``response_url``s of recent slash commands, by the command's message id."""

    def __init__(self) -> None:
        self._hooks: dict[str, Hook] = {}

    def add(self, message_id: str, url: str) -> None:
        """Keep ``url`` for replies to ``message_id`` (and forget expired ones)."""
        now = time.monotonic()
        self._hooks = {k: h for k, h in self._hooks.items() if h.expires_at > now}
        self._hooks[message_id] = Hook(url, now + RESPONSE_URL_TTL_S)

    def get(self, message_id: str | None) -> Hook | None:
        """The usable hook for replies to ``message_id``, if any."""
        hook = self._hooks.get(message_id or "")
        return hook if hook is not None and hook.usable() else None


async def post_ephemeral_response(
    hook: Hook,
    text: str,
    session: aiohttp.ClientSession,
    tls: SSLContext,
    *,
    replace_original: bool | None = None,
) -> None:
    """Post ``text`` to a command's or a press's ``response_url``, seen only by its user
    (a press's answer must say ``replace_original=False`` to leave the message alone)."""
    hook.uses_left -= 1
    client = AsyncWebhookClient(hook.url, session=session, ssl=tls, retry_handlers=[])
    response = await client.send(
        text=text, response_type="ephemeral", replace_original=replace_original
    )
    if response.status_code == 200:
        return
    error = f"HTTP {response.status_code}"
    try:
        body = json.loads(response.body or "{}")
        error = str(body.get("error") or error) if isinstance(body, dict) else error
    except ValueError:
        error = (response.body or error).strip()[:60]
    if response.status_code == 404:
        hook.uses_left = 0
    headers = {k: v for k, v in response.headers.items()} if response.headers else {}
    raise SlackRefused("response_url", error, response.status_code, _retry_after(headers))
