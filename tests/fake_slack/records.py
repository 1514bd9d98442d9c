"""What the fake Slack records and hands back: API calls, envelopes, acks, injections, faults."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]


@dataclass(frozen=True)
class ApiCall:
    """One Web API request, or a post to a ``response_url`` (method ``response_url``)."""

    method: str
    args: JSON
    token: str | None
    http_method: str
    status: int
    response: JSON
    at: float = field(default_factory=time.monotonic)  # when it was answered

    @property
    def ok(self) -> bool:
        """True when the fake answered ``"ok": true``."""
        return self.response.get("ok") is True


@dataclass(frozen=True)
class Envelope:
    """One Socket Mode envelope (also the unit of an HTTP delivery)."""

    envelope_id: str
    type: str  # "events_api" | "interactive" | "slash_commands"
    payload: JSON
    accepts_response_payload: bool = False
    retry_attempt: int = 0
    retry_reason: str = ""

    def frame(self) -> JSON:
        """The JSON frame sent over the websocket."""
        frame: JSON = {
            "envelope_id": self.envelope_id,
            "type": self.type,
            "payload": self.payload,
            "accepts_response_payload": self.accepts_response_payload,
        }
        if self.type == "events_api":
            frame["retry_attempt"] = self.retry_attempt
            frame["retry_reason"] = self.retry_reason
        return frame


@dataclass(frozen=True)
class Ack:
    """The app's acknowledgement of an envelope: a socket ack frame or an HTTP 200 answer."""

    envelope_id: str
    payload: JSON | None
    via: str  # "socket" | "http"


@dataclass(frozen=True)
class Delivery:
    """One attempt to hand an envelope to the app."""

    envelope_id: str
    via: str  # "socket" | "http" | "queued"
    status: int | None = None  # the HTTP status for HTTP deliveries
    error: str = ""


@dataclass(frozen=True)
class Injection:
    """What a simulated user action produced: the envelopes delivered for it."""

    envelopes: tuple[Envelope, ...]
    event: JSON = field(default_factory=dict)

    @property
    def envelope(self) -> Envelope:
        """The first (usually only) envelope."""
        return self.envelopes[0]

    @property
    def ts(self) -> str:
        """The ``ts`` of the user's message (message events only)."""
        return str(self.event.get("ts", ""))


@dataclass(frozen=True)
class Fault:
    """An injected Web API failure, used up after ``times`` calls."""

    error: str
    status: int = 200
    retry_after: int | None = None
    page: str | None = None  # an HTML page as the body instead (a proxy's error page)
