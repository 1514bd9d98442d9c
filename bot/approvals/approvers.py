"""Who may decide on approval requests, per channel.

``approvers`` from the channel's config if set, else its ``owner``; and always
the owner's own accounts on that channel (linked with ``pinclaw people link``).
If that names nobody: the first entry of ``allowed_users``, else the first
person admitted by pairing on that channel. In the terminal the person at the
keyboard decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.config.channel import ChannelSettings
from bot.core.channel import ApprovalSurface, ChatTarget
from bot.store.pairing import PairingStore
from bot.store.people import PeopleStore


class Approvers:
    """Answers "who decides here?" for each channel."""

    def __init__(
        self,
        settings: Mapping[str, ChannelSettings],
        pairing: PairingStore | None = None,
        local: Mapping[str, Sequence[str]] | None = None,
        people: PeopleStore | None = None,
    ) -> None:
        self._people = people
        self._settings = settings
        self._pairing = pairing
        self._local = {name: list(users) for name, users in (local or {}).items()}

    async def of(self, channel: str) -> list[str]:
        """The user ids who decide on requests from ``channel`` (may be empty)."""
        if channel in self._local:
            return self._local[channel]
        settings = self._settings.get(channel)
        if settings is None:
            return []
        chosen = list(settings.approvers) or ([settings.owner] if settings.owner else [])
        chosen += [user for user in await self._owner_accounts(channel) if user not in chosen]
        if chosen:
            return chosen
        if settings.allowed_users:
            return [settings.allowed_users[0]]
        if self._pairing is not None:
            first = next((u for u in await self._pairing.paired() if u.channel == channel), None)
            if first is not None:
                return [first.user_id]
        return []

    async def _owner_accounts(self, channel: str) -> list[str]:
        if self._people is None:
            return []
        owner = await self._people.owner()
        return [i.user_id for i in owner.identities if i.channel == channel and i.user_id]

    async def may_decide(self, channel: str, user_id: str) -> bool:
        """Whether ``user_id`` decides on requests from ``channel``."""
        return user_id in await self.of(channel)

    async def describe(self, channel: str) -> str:
        """Who decides, for a refusal message (without listing anyone's id)."""
        count = len(await self.of(channel))
        return "the owner" if count <= 1 else "the approvers the owner chose"

    def in_private(self, channel: str) -> bool:
        """Whether requests from group chats go to the approver's private chat."""
        settings = self._settings.get(channel)
        return bool(settings and settings.approvals_in_dm)


async def owner_chats(
    channels: Mapping[str, object], approvers: Approvers
) -> list[tuple[ApprovalSurface, ChatTarget]]:
    """The private chats with each channel's approvers, channel by channel, first first.

    This is "the owner" for output and requests that have no chat of their own
    (a job that delivers to the owner, the heartbeat).
    """
    found: list[tuple[ApprovalSurface, ChatTarget]] = []
    for name, channel in channels.items():
        if not isinstance(channel, ApprovalSurface):
            continue
        for approver in await approvers.of(name):
            private = channel.direct_target(approver)
            if private is not None:
                found.append((channel, private))
    return found
