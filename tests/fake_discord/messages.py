"""Messages: the bot's (Discord's validation, the stored object, gateway echoes) and users'.

The checks are the ones an adapter is likely to trip: content over 2000 characters,
an empty message, more than 10 embeds, embed field lengths, component rows and
button limits (5 rows of 5, ``custom_id`` up to 100 characters and unique, labels
up to 80), and replies to messages that do not exist.
"""

from __future__ import annotations

import re
from typing import Any

from tests.fake_discord import payloads
from tests.fake_discord.payloads import JSON
from tests.fake_discord.state import World
from tests.fake_discord.wire import Ctx, Rejected

MAX_CONTENT = 2000
FLAG_COMPONENTS_V2 = 1 << 15
_USER_MENTION = re.compile(r"<@!?(\d+)>")


def _too_long(path: list[str], limit: int) -> Rejected:
    message = f"Must be {limit} or fewer in length."
    return Rejected(400, payloads.field_error(path, "BASE_TYPE_MAX_LENGTH", message))


def validate(body: JSON, *, creating: bool) -> None:
    """Raise ``Rejected`` where Discord would answer 400."""
    content = body.get("content")
    if content is not None and not isinstance(content, str):
        err = payloads.field_error(["content"], "BASE_TYPE_STRING", "Must be a string.")
        raise Rejected(400, err)
    if content and len(content) > MAX_CONTENT:
        raise _too_long(["content"], MAX_CONTENT)
    embeds = body.get("embeds") or []
    if len(embeds) > 10:
        raise _too_long(["embeds"], 10)
    for index, embed in enumerate(embeds):
        for key, limit in (("title", 256), ("description", 4096)):
            if len(embed.get(key) or "") > limit:
                raise _too_long(["embeds", str(index), key], limit)
    if not int(body.get("flags") or 0) & FLAG_COMPONENTS_V2:
        _check_components(body.get("components") or [])
    has_files = bool(body.get("attachments") or body.get("sticker_ids"))
    if creating and not (content or embeds or body.get("components") or has_files):
        raise Rejected(400, payloads.error(50006, "Cannot send an empty message"))


def _check_components(rows: list[JSON]) -> None:
    if len(rows) > 5:
        raise _too_long(["components"], 5)
    seen: set[str] = set()
    for r, row in enumerate(rows):
        where = ["components", str(r)]
        if row.get("type") != 1:
            err = payloads.field_error(
                [*where, "type"], "UNION_TYPE_CHOICES", "Expected an action row."
            )
            raise Rejected(400, err)
        children = row.get("components") or []
        if len(children) > 5:
            raise _too_long([*where, "components"], 5)
        for c, item in enumerate(children):
            _check_item(item, [*where, "components", str(c)], seen)


def _check_item(item: JSON, where: list[str], seen: set[str]) -> None:
    link = item.get("type") == 2 and item.get("style") == 5
    custom_id = item.get("custom_id")
    if link:
        if not item.get("url"):
            raise Rejected(
                400,
                payloads.field_error(
                    [*where, "url"], "BASE_TYPE_REQUIRED", "This field is required"
                ),
            )
        return
    if not custom_id:
        err = payloads.field_error(
            [*where, "custom_id"], "BASE_TYPE_REQUIRED", "This field is required"
        )
        raise Rejected(400, err)
    if len(custom_id) > 100:
        raise _too_long([*where, "custom_id"], 100)
    if custom_id in seen:
        err = payloads.field_error(
            [*where, "custom_id"],
            "COMPONENT_CUSTOM_ID_DUPLICATED",
            "Component custom id cannot be duplicated",
        )
        raise Rejected(400, err)
    seen.add(custom_id)
    if len(item.get("label") or "") > 80:
        raise _too_long([*where, "label"], 80)
    if len(item.get("options") or []) > 25:
        raise _too_long([*where, "options"], 25)


def mentioned_users(world: World, content: str) -> list[JSON]:
    """Known users mentioned as <@id> in ``content``."""
    with world.lock:
        ids = dict.fromkeys(_USER_MENTION.findall(content))
        return [world.users[i] for i in ids if i in world.users]


def build(
    world: World,
    channel_id: str,
    body: JSON,
    *,
    message_type: int = payloads.MESSAGE_DEFAULT,
    extra_flags: int = 0,
) -> JSON:
    """The bot's new message from a create body (validated), not yet stored."""
    validate(body, creating=True)
    content = body.get("content") or ""
    data = payloads.message(
        channel_id,
        world.bot,
        content,
        guild_id=world.guild_id_of(channel_id),
        mentions=mentioned_users(world, content),
        embeds=list(body.get("embeds") or []),
        components=list(body.get("components") or []),
        flags=int(body.get("flags") or 0) | extra_flags,
        message_type=message_type,
    )
    data["tts"] = bool(body.get("tts"))
    if body.get("nonce") is not None:
        data["nonce"] = body["nonce"]
    reference = body.get("message_reference")
    if reference:
        _attach_reference(world, data, reference)
    return data


def _attach_reference(world: World, data: JSON, reference: JSON) -> None:
    target = world.messages.get(str(reference.get("message_id")))
    if target is None or target["id"] in world.deleted:
        if reference.get("fail_if_not_exists", True):
            err = payloads.field_error(
                ["message_reference"], "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message"
            )
            raise Rejected(400, err)
        return
    make_reply(data, target)


def make_reply(data: JSON, target: JSON) -> None:
    """Turn ``data`` into a reply to ``target``."""
    data["type"] = payloads.MESSAGE_REPLY
    data["message_reference"] = {
        "type": 0,
        "message_id": target["id"],
        "channel_id": target["channel_id"],
        **({"guild_id": target["guild_id"]} if target.get("guild_id") else {}),
    }
    data["referenced_message"] = target


EDITABLE = ("content", "embeds", "components", "flags", "attachments", "allowed_mentions")


def edit(world: World, message: JSON, body: JSON) -> JSON:
    """Apply an edit body to a stored message (validated) and return it."""
    validate(body, creating=False)
    with world.lock:
        updated = dict(message)
        for key in EDITABLE:
            if key in body and key != "allowed_mentions":
                updated[key] = body[key] if body[key] is not None else _empty(key)
        if "flags" in body:
            # Only SUPPRESS_EMBEDS can change; ephemeral/loading stay as they were.
            keep = int(message["flags"]) & (payloads.FLAG_EPHEMERAL | FLAG_COMPONENTS_V2)
            updated["flags"] = int(body["flags"] or 0) & ~payloads.FLAG_LOADING | keep
        else:
            updated["flags"] = int(message["flags"]) & ~payloads.FLAG_LOADING
        if "content" in body:
            updated["mentions"] = mentioned_users(world, updated["content"])
        if not (
            updated["content"]
            or updated["embeds"]
            or updated["components"]
            or updated["attachments"]
        ):
            raise Rejected(400, payloads.error(50006, "Cannot send an empty message"))
        updated["edited_timestamp"] = payloads.now_iso()
        return world.store_message(updated)


def _empty(key: str) -> Any:
    return "" if key == "content" else (0 if key == "flags" else [])


def find_own(world: World, channel_id: str, message_id: str) -> JSON:
    """A live message in ``channel_id``, or a 404 ``Rejected``."""
    with world.lock:
        found = world.messages.get(message_id)
        if found is None or found["id"] in world.deleted or found["channel_id"] != channel_id:
            raise Rejected(404, payloads.error(10008, "Unknown Message"))
        return found


def from_user(
    world: World,
    channel_id: str,
    author: JSON,
    content: str,
    *,
    guild_id: str | None,
    mentions_bot: bool,
    reply_to: JSON | None,
    message_id: str | None,
    embeds: list[JSON] | None,
) -> JSON:
    """A message from ``author`` as the gateway would carry it (see ``user_sends``)."""
    channel = world.channel(channel_id)
    if channel is None:
        raise ValueError(f"unknown channel {channel_id}")
    guild_id = guild_id or channel.get("guild_id")
    with world.lock:
        world.users.setdefault(author["id"], author)
    tag = f"<@{world.bot['id']}>"
    if mentions_bot and tag not in content:
        content = f"{tag} {content}"
    mentions = mentioned_users(world, content)
    msg = payloads.message(
        channel["id"], author, content, message_id=message_id, guild_id=guild_id, embeds=embeds
    )
    if reply_to is not None:
        target = world.messages.get(reply_to["id"], reply_to)
        make_reply(msg, target)
        if all(m["id"] != target["author"]["id"] for m in mentions):
            mentions.append(target["author"])  # replies ping their target by default
    if guild_id:
        mentions = [{**m, "member": partial_member(world, guild_id, m)} for m in mentions]
    msg["mentions"] = mentions
    return msg


def edited_by_author(world: World, message: JSON, content: str) -> JSON:
    """``message`` as its author edited it: the new content and an ``edited_timestamp``."""
    current = world.messages.get(message["id"], message)
    return {**current, "content": content, "edited_timestamp": payloads.now_iso()}


def partial_member(world: World, guild_id: str, who: JSON) -> JSON:
    """``who``'s member record without the nested user, as messages carry it."""
    entry = world.ensure_member(guild_id, who)
    entry.pop("user", None)
    return entry


def with_member(world: World, data: JSON) -> JSON:
    """``data`` plus the author's ``member`` field for guild messages (as the gateway sends)."""
    guild_id = data.get("guild_id")
    if not guild_id or guild_id not in world.guilds:
        return data
    return {**data, "member": partial_member(world, guild_id, data["author"])}


async def delete(ctx: Ctx, target: JSON) -> None:
    """Mark ``target`` deleted and send MESSAGE_DELETE."""
    with ctx.world.changed:
        ctx.world.deleted.add(target["id"])
        ctx.world.changed.notify_all()
    gone = {"id": target["id"], "channel_id": target["channel_id"]}
    if target.get("guild_id"):
        gone["guild_id"] = target["guild_id"]
    await ctx.gateway.publish("MESSAGE_DELETE", gone)


async def echo(ctx: Ctx, event: str, data: JSON) -> None:
    """Send MESSAGE_CREATE/UPDATE for a bot message, unless it is ephemeral."""
    if int(data.get("flags") or 0) & payloads.FLAG_EPHEMERAL:
        return
    await ctx.gateway.publish(event, with_member(ctx.world, data))
