"""What the fake Discord knows: users, guilds, channels, messages, commands, interactions.

Also the record of every REST call and gateway frame, and the queued faults. All of it
is guarded by one lock (with a condition for waiters), because tests read and inject
from their own threads while the server loop answers.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.fake_discord import payloads
from tests.fake_discord.payloads import JSON


@dataclass
class Call:
    """One recorded REST request or gateway frame.

    REST: ``method`` is the HTTP verb and ``path`` is relative to the API root
    (``/channels/1/messages``). Gateway frames: ``method`` is ``"GATEWAY"`` and
    ``path`` the opcode name (``IDENTIFY``, ``RESUME``, ``HEARTBEAT``, ``CLOSE``...).
    """

    method: str
    path: str
    json: Any
    time: float
    query: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    status: int | None = None


@dataclass
class Fault:
    """A queued failure for requests matching ``method`` and ``pattern``."""

    method: str
    pattern: re.Pattern[str]
    status: int
    retry_after: float | None = None
    global_: bool = False
    times: int | None = 1
    body: JSON | None = None
    page: str | None = None  # an HTML page as the body instead (a proxy's error page)

    def matches(self, method: str, path: str) -> bool:
        """Whether this fault applies to ``method path``."""
        return self.method in ("*", method) and self.pattern.search(path) is not None


@dataclass
class InteractionRecord:
    """An interaction the fake created and what the bot answered to it."""

    payload: JSON
    created: float = field(default_factory=time.monotonic)
    callbacks: list[JSON] = field(default_factory=list)
    original_id: str | None = None
    followup_ids: list[str] = field(default_factory=list)

    @property
    def token(self) -> str:
        """The interaction token."""
        return str(self.payload["token"])


CallPredicate = Callable[[Call], bool]


class World:
    """The fake's data and records; every method takes the lock itself."""

    def __init__(self, token: str, bot_name: str) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.token = token
        self.bot = payloads.user(bot_name, bot=True)
        self.owner = payloads.user("owner")
        # Modern applications share their id with their bot user.
        self.application = payloads.application(self.bot["id"], bot_name, self.owner)
        self.users: dict[str, JSON] = {u["id"]: u for u in (self.bot, self.owner)}
        self.guilds: dict[str, JSON] = {}
        self.channels: dict[str, JSON] = {}
        self.dm_channels: dict[str, str] = {}
        self.messages: dict[str, JSON] = {}
        self.uploads: dict[str, bytes] = {}  # the bytes of each attachment the bot sent
        self.deleted: set[str] = set()
        self.commands: dict[str | None, list[JSON]] = {}
        self.command_puts: dict[str | None, int] = {}
        self.interactions: dict[str, InteractionRecord] = {}
        self.calls: list[Call] = []
        self.faults: list[Fault] = []
        self.interaction_deadline = 3.0

    @property
    def app_id(self) -> str:
        """The application id (also the bot's user id)."""
        return str(self.application["id"])

    # -- records ------------------------------------------------------------

    def record(self, call: Call) -> None:
        """Append ``call`` and wake waiters."""
        with self.changed:
            self.calls.append(call)
            self.changed.notify_all()

    def notify(self) -> None:
        """Wake waiters after a change that is not a new call."""
        with self.changed:
            self.changed.notify_all()

    def matching(
        self, method: str, path_regex: str, predicate: CallPredicate | None = None
    ) -> list[Call]:
        """Recorded calls with this method whose path matches (``re.search``)."""
        pattern = re.compile(path_regex)
        with self.lock:
            return [
                c
                for c in self.calls
                if c.method == method
                and pattern.search(c.path)
                and (predicate is None or predicate(c))
            ]

    def wait_for(
        self,
        method: str,
        path_regex: str,
        predicate: CallPredicate | None = None,
        timeout: float = 10.0,
        *,
        count: int = 1,
    ) -> Call:
        """Block until ``count`` matching calls were recorded; return the last of them."""
        found: list[Call] = []

        def ready() -> bool:
            found[:] = self.matching(method, path_regex, predicate)
            return len(found) >= count

        with self.changed:
            if not self.changed.wait_for(ready, timeout):
                seen = [f"{c.method} {c.path}" for c in self.calls[-15:]]
                raise TimeoutError(
                    f"no {count} x {method} {path_regex} within {timeout}s; last calls: {seen}"
                )
            return found[count - 1]

    def wait_until(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """Block until ``condition()`` (checked under the lock) holds."""
        with self.changed:
            if not self.changed.wait_for(condition, timeout):
                raise TimeoutError(f"timed out after {timeout}s waiting for {what}")

    def take_fault(self, method: str, path: str) -> Fault | None:
        """The first queued fault for this request, used up by one."""
        with self.lock:
            for fault in self.faults:
                if fault.matches(method, path):
                    if fault.times is not None:
                        fault.times -= 1
                        if fault.times <= 0:
                            self.faults.remove(fault)
                    return fault
        return None

    # -- lookups ------------------------------------------------------------

    def channel(self, channel_id: str) -> JSON | None:
        """A guild or DM channel by id."""
        with self.lock:
            return self.channels.get(str(channel_id))

    def guild_id_of(self, channel_id: str) -> str | None:
        """The guild a channel belongs to (None for DMs and unknown channels)."""
        channel = self.channel(channel_id)
        return None if channel is None else channel.get("guild_id")

    def member_of(self, guild_id: str, user_id: str) -> JSON | None:
        """A guild's member record for ``user_id``."""
        with self.lock:
            for entry in self.guilds[guild_id]["members"]:
                if entry["user"]["id"] == user_id:
                    return dict(entry)
        return None

    def ensure_member(self, guild_id: str, who: JSON) -> JSON:
        """The member record for ``who``, adding them to the guild if needed."""
        with self.lock:
            found = self.member_of(guild_id, who["id"])
            if found is not None:
                return found
            entry = payloads.member(who)
            self.guilds[guild_id]["members"].append(entry)
            self.guilds[guild_id]["member_count"] += 1
            self.users.setdefault(who["id"], who)
            return dict(entry)

    def dm_channel_for(self, who: JSON) -> JSON:
        """The DM channel between the bot and ``who``, created on first use."""
        with self.lock:
            self.users.setdefault(who["id"], who)
            channel_id = self.dm_channels.get(who["id"])
            if channel_id is None:
                channel = payloads.dm_channel(who)
                channel_id = self.dm_channels[who["id"]] = channel["id"]
                self.channels[channel_id] = channel
            return self.channels[channel_id]

    def store_message(self, data: JSON) -> JSON:
        """Keep ``data`` (by id) and note it as the channel's last message."""
        with self.changed:
            self.messages[data["id"]] = data
            channel = self.channels.get(data["channel_id"])
            if channel is not None:
                channel["last_message_id"] = data["id"]
            self.changed.notify_all()
            return data

    def command_id(self, name: str, guild_id: str | None) -> tuple[str, str | None] | None:
        """The registered id of command ``name`` (guild scope first) and its scope."""
        with self.lock:
            for scope in (guild_id, None) if guild_id else (None,):
                for command in self.commands.get(scope, []):
                    if command["name"] == name:
                        return str(command["id"]), scope
        return None

    def option_type(self, command: str, guild_id: str | None, option: str) -> int | None:
        """The registered type of ``option`` on ``command``, if it is known."""
        with self.lock:
            for scope in (guild_id, None):
                for entry in self.commands.get(scope, []):
                    if entry["name"] == command:
                        for opt in entry.get("options", []):
                            if opt["name"] == option:
                                return int(opt["type"])
        return None

    def interaction(self, token: str) -> InteractionRecord | None:
        """An interaction by token."""
        with self.lock:
            return self.interactions.get(token)
