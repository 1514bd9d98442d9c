"""Settings every chat channel shares: who may talk to the bot, and when it answers in groups.

Each adapter extends ``ChannelSettings`` with its own keys (tokens, endpoints) in
a small module that does not import the platform's library, so validating a
config never loads Telegram, Discord or Slack code.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from bot.config.base import Section


class ChannelSettings(Section):
    """Access control, group behaviour and who approves, the same on every platform.

    Approvers decide on approval requests: ``approvers`` if set, else ``owner``,
    else the first of ``allowed_users``, else the first person admitted by
    pairing. ``approvals_in_dm`` sends requests from group chats to the
    approver's private chat, so the group never sees the arguments. ``stream``
    shows replies as they are written, overriding ``[agent] stream``.
    """

    enabled: bool = True
    allowed_users: list[str] = Field(default_factory=list)
    allowed_groups: list[str] = Field(default_factory=list)
    group_mode: Literal["addressed", "all"] = "addressed"
    keywords: list[str] = Field(default_factory=list)
    pairing: bool = True
    owner: str | None = None
    approvers: list[str] = Field(default_factory=list)
    approvals_in_dm: bool = False
    # Show replies as they are written (a message edited as the model writes); None
    # follows [agent] stream.
    stream: bool | None = None

    def streams(self, default: bool) -> bool:
        """Whether replies stream here: ``stream`` if set, else ``default`` ([agent] stream)."""
        return default if self.stream is None else self.stream

    @field_validator("owner", mode="before")
    @classmethod
    def _owner_as_text(cls, value: object) -> object:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("allowed_users", "allowed_groups", "approvers", mode="before")
    @classmethod
    def _ids_as_text(cls, value: object) -> object:
        # Telegram ids are numbers; people write them either way.
        if isinstance(value, list):
            return [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
        return value


def check_url(value: str) -> str:
    """A base URL without its trailing slash; http(s) or ws(s) only."""
    if not value.startswith(("http://", "https://", "ws://", "wss://")):
        raise ValueError(f"expected an http(s):// or ws(s):// URL, got {value!r}")
    return value.rstrip("/")
