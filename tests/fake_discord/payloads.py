"""Discord API v10 objects as JSON dicts: snowflakes, users, guilds, channels, messages.

Only the fields discord.py reads (and a few a test may assert on) are filled in.
Ids are strings on the wire, as Discord sends them.
"""

from __future__ import annotations

import itertools
import secrets
import threading
import time
from datetime import UTC, datetime
from typing import Any

JSON = dict[str, Any]

DISCORD_EPOCH_MS = 1_420_070_400_000
API_VERSION = 10

# Gateway intents (bit positions from the Discord docs).
INTENT_GUILDS = 1 << 0
INTENT_GUILD_MEMBERS = 1 << 1
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_DIRECT_MESSAGES = 1 << 12
INTENT_MESSAGE_CONTENT = 1 << 15

# Channel types.
GUILD_TEXT = 0
DM = 1

# Message types and flags.
MESSAGE_DEFAULT = 0
MESSAGE_REPLY = 19
MESSAGE_CHAT_INPUT_COMMAND = 20
FLAG_EPHEMERAL = 1 << 6
FLAG_LOADING = 1 << 7

# Interaction types.
INTERACTION_APPLICATION_COMMAND = 2
INTERACTION_MESSAGE_COMPONENT = 3

ALL_PERMISSIONS = str((1 << 50) - 1)
DEFAULT_MEMBER_PERMISSIONS = str(0x0000_0006_4F7F_FEC1)

_counter = itertools.count()
_counter_lock = threading.Lock()


def snowflake() -> str:
    """A fresh, increasing Discord snowflake (timestamp << 22 | counter)."""
    with _counter_lock:
        increment = next(_counter)
    millis = int(time.time() * 1000) - DISCORD_EPOCH_MS
    return str((millis << 22) | (1 << 17) | (increment & 0x1FFFF))


def token() -> str:
    """A random token shaped like an interaction token."""
    return "aW50ZXJhY3Rpb24" + secrets.token_urlsafe(48)


def now_iso() -> str:
    """The current time as Discord writes timestamps."""
    return datetime.now(UTC).isoformat()


def user(name: str, *, user_id: str | None = None, bot: bool = False) -> JSON:
    """A user object."""
    data: JSON = {
        "id": user_id or snowflake(),
        "username": name,
        "global_name": name,
        "discriminator": "0",
        "avatar": None,
        "public_flags": 0,
        "flags": 0,
    }
    if bot:
        data["bot"] = True
    return data


def role(role_id: str, name: str, *, position: int = 0, permissions: str = "0") -> JSON:
    """A guild role; the @everyone role has the guild's id."""
    return {
        "id": role_id,
        "name": name,
        "permissions": permissions,
        "position": position,
        "color": 0,
        "colors": {"primary_color": 0, "secondary_color": None, "tertiary_color": None},
        "hoist": False,
        "managed": False,
        "mentionable": False,
        "icon": None,
        "unicode_emoji": None,
        "flags": 0,
    }


def member(of: JSON, *, roles: list[str] | None = None) -> JSON:
    """A guild member wrapping user ``of``."""
    return {
        "user": of,
        "nick": None,
        "avatar": None,
        "roles": roles or [],
        "joined_at": now_iso(),
        "premium_since": None,
        "deaf": False,
        "mute": False,
        "pending": False,
        "flags": 0,
        "communication_disabled_until": None,
    }


def text_channel(guild_id: str, name: str, *, position: int = 0) -> JSON:
    """A guild text channel."""
    return {
        "id": snowflake(),
        "type": GUILD_TEXT,
        "guild_id": guild_id,
        "name": name,
        "position": position,
        "permission_overwrites": [],
        "nsfw": False,
        "parent_id": None,
        "topic": None,
        "last_message_id": None,
        "rate_limit_per_user": 0,
    }


def public_thread(guild_id: str, parent_id: str, owner_id: str, name: str) -> JSON:
    """A public thread under a text channel."""
    return {
        "id": snowflake(),
        "type": 11,
        "guild_id": guild_id,
        "parent_id": parent_id,
        "owner_id": owner_id,
        "name": name,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": 1440,
            "archive_timestamp": now_iso(),
            "locked": False,
        },
        "member_count": 1,
        "message_count": 0,
        "rate_limit_per_user": 0,
        "flags": 0,
    }


def dm_channel(recipient: JSON) -> JSON:
    """A DM channel with ``recipient``."""
    return {
        "id": snowflake(),
        "type": DM,
        "recipients": [recipient],
        "last_message_id": None,
        "flags": 0,
    }


def guild(name: str, *, guild_id: str | None = None, owner_id: str) -> JSON:
    """A guild with an @everyone role and no channels or members yet."""
    gid = guild_id or snowflake()
    return {
        "id": gid,
        "name": name,
        "icon": None,
        "owner_id": owner_id,
        "unavailable": False,
        "large": False,
        "member_count": 0,
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "features": [],
        "mfa_level": 0,
        "nsfw_level": 0,
        "premium_tier": 0,
        "preferred_locale": "en-US",
        "system_channel_id": None,
        "joined_at": now_iso(),
        "roles": [role(gid, "@everyone", permissions=DEFAULT_MEMBER_PERMISSIONS)],
        "emojis": [],
        "stickers": [],
        "channels": [],
        "threads": [],
        "members": [],
        "presences": [],
        "voice_states": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "soundboard_sounds": [],
    }


def message(
    channel_id: str,
    author: JSON,
    content: str,
    *,
    message_id: str | None = None,
    guild_id: str | None = None,
    mentions: list[JSON] | None = None,
    embeds: list[JSON] | None = None,
    components: list[JSON] | None = None,
    flags: int = 0,
    message_type: int = MESSAGE_DEFAULT,
) -> JSON:
    """A message object (add ``member``, ``message_reference`` etc. as needed)."""
    data: JSON = {
        "id": message_id or snowflake(),
        "channel_id": channel_id,
        "author": author,
        "content": content,
        "timestamp": now_iso(),
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": mentions or [],
        "mention_roles": [],
        "attachments": [],
        "embeds": embeds or [],
        "components": components or [],
        "pinned": False,
        "type": message_type,
        "flags": flags,
    }
    if guild_id is not None:
        data["guild_id"] = guild_id
    return data


def application(app_id: str, name: str, owner: JSON) -> JSON:
    """The bot's application, as ``GET /oauth2/applications/@me`` returns it."""
    return {
        "id": app_id,
        "name": name,
        "description": "",
        "icon": None,
        "bot_public": True,
        "bot_require_code_grant": False,
        "owner": owner,
        "team": None,
        "verify_key": secrets.token_hex(32),
        "flags": (1 << 19) | (1 << 23),  # message content intent, limited; app commands badge
        "summary": "",
        "rpc_origins": [],
        "tags": [],
        "redirect_uris": [],
        "interactions_endpoint_url": None,
        "approximate_guild_count": 1,
    }


def error(code: int, message: str, errors: JSON | None = None) -> JSON:
    """A Discord JSON error body."""
    data: JSON = {"code": code, "message": message}
    if errors is not None:
        data["errors"] = errors
    return data


def field_error(path: list[str], code: str, message: str) -> JSON:
    """A 50035 "Invalid Form Body" body with one error at ``path`` (e.g. ["content"])."""
    tree: JSON = {"_errors": [{"code": code, "message": message}]}
    for key in reversed(path):
        tree = {key: tree}
    return error(50035, "Invalid Form Body", tree)
