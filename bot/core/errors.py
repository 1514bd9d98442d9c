"""PinClaw's error hierarchy: the three kinds of error and where each one goes.

1. ``ToolError``: an ordinary failure the model should read and adapt to
   (file not found, device busy). Tools raise it; the registry turns it into a
   failed ``ToolResult``.
2. ``UserError``: something a person must fix or know, stated as one plain
   sentence (a broken config, a provider that rejects the key). Shown as is.
3. Anything else is a bug: ``log_bug`` logs it with a short id and the person
   sees only "something went wrong (id ...)". Never a traceback in a chat.
"""

from __future__ import annotations

import logging
import secrets


class PinclawError(Exception):
    """Base of every error PinClaw raises on purpose."""


class ToolError(PinclawError):
    """An ordinary tool failure, reported to the model as the tool's result."""


class Refused(ToolError):
    """The security policy refused a call; the message says plainly what and why,
    without hinting at how to widen the agent's own permissions."""


class UserError(PinclawError):
    """A problem stated for a person: ``str(exc)`` is one plain sentence."""


class ConfigError(UserError):
    """The configuration is missing or invalid; the message names the key."""


class UsageError(UserError):
    """The command line asks for something impossible (exit code 2, like a config error)."""


class ProviderError(UserError):
    """A model provider failed; ``retryable`` says whether trying again may help."""

    retryable: bool = False

    def __init__(self, message: str, *, provider: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status


class ProviderUnreachable(ProviderError):
    """The provider could not be reached (connection refused, DNS, timeout)."""

    retryable = True


class ProviderAuthError(ProviderError):
    """The provider rejected the credentials (HTTP 401/403)."""


class ProviderRateLimited(ProviderError):
    """The provider kept answering 429 after the allowed retries."""

    retryable = True


class ProviderUnavailable(ProviderError):
    """The provider kept failing with 5xx after the allowed retries."""

    retryable = True


class ProviderRequestError(ProviderError):
    """The provider refused the request itself (HTTP 4xx other than auth and 429)."""


class ProviderResponseError(ProviderError):
    """The provider answered with something PinClaw cannot read."""


def new_error_id() -> str:
    """Return a short random id that ties a user-visible message to a log line."""
    return secrets.token_hex(4)


def log_bug(logger: logging.Logger, message: str, exc: BaseException | None = None) -> str:
    """Log an unexpected failure with its traceback and return the id to show people."""
    error_id = new_error_id()
    logger.error("%s (error id %s)", message, error_id, exc_info=exc if exc else True)
    return error_id


def bug_message(error_id: str) -> str:
    """The sentence a person sees for a bug."""
    return f"Something went wrong on my side (error id {error_id}); the details are in the log."
