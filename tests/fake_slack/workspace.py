"""The fake workspace's state: users, conversations, files, messages, ephemerals, reactions.

Plain data, no locking: ``FakeSlack`` holds its lock around every use.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from tests.fake_slack.records import JSON


@dataclass
class User:
    """A workspace member."""

    id: str
    name: str
    real_name: str = ""
    display_name: str = ""
    is_bot: bool = False

    def info(self, team_id: str) -> JSON:
        """The ``user`` object of ``users.info``."""
        real = self.real_name or self.name
        return {
            "id": self.id,
            "team_id": team_id,
            "name": self.name,
            "deleted": False,
            "real_name": real,
            "tz": "Europe/London",
            "tz_offset": 0,
            "is_admin": False,
            "is_bot": self.is_bot,
            "is_app_user": False,
            "profile": {
                "real_name": real,
                "display_name": self.display_name,
                "real_name_normalized": real,
                "display_name_normalized": self.display_name,
                "team": team_id,
            },
        }


@dataclass
class Conversation:
    """A channel, private channel, group DM or DM (``is_im``, with ``user``)."""

    id: str
    name: str = ""
    is_im: bool = False
    is_private: bool = False
    is_mpim: bool = False
    user: str = ""

    @property
    def channel_type(self) -> str:
        """The ``channel_type`` of message events here: im, mpim, group or channel."""
        if self.is_im:
            return "im"
        if self.is_mpim:
            return "mpim"
        return "group" if self.is_private else "channel"

    def info(self) -> JSON:
        """The ``channel`` object of ``conversations.info``."""
        info: JSON = {
            "id": self.id,
            "created": 1700000000,
            "is_archived": False,
            "is_im": self.is_im,
            "is_mpim": self.is_mpim,
            "is_private": self.is_private or self.is_im or self.is_mpim,
            "is_channel": not (self.is_im or self.is_mpim or self.is_private),
            "is_group": self.is_private and not (self.is_im or self.is_mpim),
            "is_member": True,
        }
        if self.is_im:
            info["user"] = self.user
            info["is_user_deleted"] = False
        else:
            info["name"] = self.name
            info["name_normalized"] = self.name
        return info


@dataclass
class StoredFile:
    """An uploaded file, served at ``url_private`` to holders of the bot token."""

    id: str
    name: str
    content: bytes
    mimetype: str
    user: str

    def info(self, root: str, team_id: str) -> JSON:
        """The file object in events and ``files.info``."""
        kind = self.name.rsplit(".", 1)[-1].lower() if "." in self.name else "binary"
        base = f"{root}/files-pri/{team_id}-{self.id}"
        return {
            "id": self.id,
            "created": 1700000000,
            "timestamp": 1700000000,
            "name": self.name,
            "title": self.name,
            "mimetype": self.mimetype,
            "filetype": kind,
            "pretty_type": kind.upper(),
            "user": self.user,
            "mode": "hosted",
            "editable": False,
            "is_external": False,
            "external_type": "",
            "is_public": False,
            "size": len(self.content),
            "url_private": f"{base}/{self.name}",
            "url_private_download": f"{base}/download/{self.name}",
            "permalink": f"{root}/files/{self.user}/{self.id}/{self.name}",
        }


@dataclass
class Workspace:
    """Everything the fake Web API reads and writes."""

    team_id: str
    team_name: str
    bot_user: User
    bot_id: str
    app_id: str
    users: dict[str, User] = field(default_factory=dict)
    conversations: dict[str, Conversation] = field(default_factory=dict)
    files: dict[str, StoredFile] = field(default_factory=dict)
    messages: dict[str, list[JSON]] = field(default_factory=dict)
    ephemerals: list[JSON] = field(default_factory=list)
    reactions: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)
    _ticks: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _last_micros: int = 0

    def next_ts(self) -> str:
        """A unique, increasing message timestamp like Slack's: the epoch time now.

        Now, not the fake's start plus a counter: PinClaw does not answer messages
        older than ``max_message_age_s`` (an hour), which a long run would reach.
        """
        micros = max(int(time.time() * 1_000_000), self._last_micros + 100)
        self._last_micros = micros
        return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"

    def next_id(self, prefix: str) -> str:
        """A unique Slack-style id: ``F0000003``, ``Ev0000004``..."""
        return f"{prefix}{next(self._ticks):07d}"

    def conversation(self, channel: str) -> Conversation | None:
        """A known conversation; a user id stands for the DM with that user, as in Slack."""
        if channel in self.conversations:
            return self.conversations[channel]
        if channel in self.users:
            return self.ensure_conversation(f"D{channel[1:]}", is_im=True, user=channel)
        return None

    def ensure_conversation(self, channel: str, **details: Any) -> Conversation:
        """The conversation ``channel``, created with ``details`` if it is new."""
        if channel not in self.conversations:
            self.conversations[channel] = Conversation(channel, **details)
        return self.conversations[channel]

    def find_message(self, channel: str, ts: str) -> JSON | None:
        """A stored message by channel and ts."""
        return next((m for m in self.messages.get(channel, []) if m["ts"] == ts), None)

    def store(self, channel: str, message: JSON) -> JSON:
        """Append ``message`` to the channel's history."""
        self.messages.setdefault(channel, []).append(message)
        return message

    def bot_message(self, text: str, blocks: list[Any] | None, thread_ts: str | None) -> JSON:
        """A message as the bot posted it, with a fresh ts."""
        message: JSON = {
            "type": "message",
            "text": text,
            "user": self.bot_user.id,
            "bot_id": self.bot_id,
            "app_id": self.app_id,
            "team": self.team_id,
            "ts": self.next_ts(),
            "bot_profile": {"id": self.bot_id, "app_id": self.app_id, "name": self.bot_user.name},
        }
        if blocks:
            message["blocks"] = blocks
        if thread_ts:
            message["thread_ts"] = thread_ts
        return message
