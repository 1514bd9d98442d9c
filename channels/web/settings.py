"""``[channels.web]`` settings: the web chat in the panel (no aiohttp import here).

The only person in the web chat is the panel's owner, who proved it by logging
in, so the access keys of other channels (allowed users, groups, pairing,
approvers) have no meaning here and are refused rather than silently ignored.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from bot.config.channel import ChannelSettings

OWNER_ID = "owner"  # the web chat's one user id: whoever is logged in to the panel
_NOT_HERE = (
    "allowed_users",
    "allowed_groups",
    "group_mode",
    "keywords",
    "pairing",
    "owner",
    "approvers",
    "approvals_in_dm",
)


class WebChatSettings(ChannelSettings):
    """The Chat page of the web panel as a chat channel, with the same inbox, approval buttons
    and streamed replies as the others; its only user is the owner, logged in to the panel.

    It needs the panel (``[web] listen`` not "off"). The access keys of the other
    channels are refused here.
    """

    refused_keys = _NOT_HERE

    history_limit: int = Field(
        default=50,
        ge=1,
        le=1000,
        description=(
            "How many messages the chat page shows when it opens; older ones stay in the history."
        ),
    )
    allowed_users: list[str] = Field(
        default_factory=lambda: [OWNER_ID],
        description="Not set here: the web chat's only user is the owner, logged in to the panel.",
    )
    owner: str | None = Field(
        default=OWNER_ID,
        description="Not set here: the owner is whoever is logged in to the panel.",
    )
    pairing: bool = Field(
        default=False,
        description="Not set here: nobody pairs with the web chat; the panel's login decides.",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_access_keys(cls, data: object) -> object:
        if isinstance(data, dict):
            given = sorted(key for key in _NOT_HERE if key in data)
            if given:
                raise ValueError(
                    f"{', '.join(given)}: not used by the web chat; its only user is the "
                    "owner, who logged in to the panel"
                )
        return data
