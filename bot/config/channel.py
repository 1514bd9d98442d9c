"""Settings every chat channel shares: who may talk to the bot, and when it answers in groups.

Each adapter extends ``ChannelSettings`` with its own keys (tokens, endpoints) in
a small module that does not import the platform's library, so validating a
config never loads Telegram, Discord or Slack code.
"""

from __future__ import annotations

from typing import ClassVar, Literal

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

    refused_keys: ClassVar[tuple[str, ...]] = ()
    """Keys this channel's model has but refuses in a config file (the reference
    leaves them out)."""

    enabled: bool = Field(
        default=True,
        description=(
            "Start this channel with `pinclaw run`; `false` keeps the table but does not start it."
        ),
    )
    allowed_users: list[str] = Field(
        default_factory=list,
        description=(
            'User ids who may talk to the bot here, like `["123456789"]` on Telegram or '
            '`["U0123456789"]` on Slack. Empty means nobody is let in by this list: someone '
            "who writes directly gets a pairing code for the owner to approve "
            "(`pinclaw pairing approve CODE`)."
        ),
    )
    allowed_groups: list[str] = Field(
        default_factory=list,
        description=(
            "Group or channel ids where anyone may talk to the bot (when they address it, "
            "see `group_mode`). Empty: in groups, only people in `allowed_users` or paired "
            "are answered."
        ),
    )
    group_mode: Literal["addressed", "all"] = Field(
        default="addressed",
        description=(
            "`addressed`: in groups, answer only when @mentioned, replied to, or a keyword "
            "is used; `all`: answer every message in the `allowed_groups`."
        ),
    )
    keywords: list[str] = Field(
        default_factory=list,
        description=(
            'Words that address the bot in a group, like `["claw"]` (whole words, in any case).'
        ),
    )
    pairing: bool = Field(
        default=True,
        description=(
            "Offer a pairing code to unknown people who write directly; `false` drops their "
            "messages without a reply (each one is logged)."
        ),
    )
    owner: str | None = Field(
        default=None,
        description=(
            "The user id of the bot's owner here, who decides on approval requests unless "
            "`approvers` is set. It does not let them talk to the bot: list them in "
            "`allowed_users` too, or pair."
        ),
    )
    approvers: list[str] = Field(
        default_factory=list,
        description=(
            "User ids who decide on approval requests here; anyone else's tap is refused. "
            "Empty: the `owner`, else the first of `allowed_users`, else the first person "
            "admitted by pairing. The owner's linked accounts may always decide."
        ),
    )
    approvals_in_dm: bool = Field(
        default=False,
        description=(
            "Send approval requests from group chats to the approver's private chat, so the "
            "group never sees the call's arguments. If that chat cannot be reached, the group "
            "is told so, without the details, and the call is not run."
        ),
    )
    stream: bool | None = Field(
        default=None,
        description=(
            "Show replies here as they are written (a message edited as the model writes). "
            "Not set: as `[agent] stream` says."
        ),
    )

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
