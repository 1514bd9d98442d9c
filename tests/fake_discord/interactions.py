"""Interactions: building INTERACTION_CREATE payloads, and the bot's answers to them.

Answers come through ``POST /interactions/{id}/{token}/callback`` (type 4 reply,
5 deferred reply, 6 deferred update, 7 update the component's message, 8 autocomplete,
9 modal) and the webhook routes ``/webhooks/{app_id}/{token}`` (follow-ups) and
``.../messages/@original``. These authenticate by the token in the URL, not by the
Authorization header. A second callback answers 40060 "already acknowledged"; one
later than ``World.interaction_deadline`` (3 s, as on Discord) answers 10062.
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from tests.fake_discord import messages, payloads
from tests.fake_discord.payloads import JSON
from tests.fake_discord.state import InteractionRecord, World
from tests.fake_discord.wire import Ctx, Rejected, Req, no_content, reply

ATTACHMENT_LIMIT = 10 * 1024 * 1024


def _option_type(value: Any) -> int:
    if isinstance(value, bool):
        return 5
    if isinstance(value, int):
        return 4
    if isinstance(value, float):
        return 10
    return 3


def _base(world: World, kind: int, channel_id: str, who: JSON, guild_id: str | None) -> JSON:
    channel = world.channel(channel_id)
    if channel is None:
        raise ValueError(f"unknown channel {channel_id}")
    guild_id = guild_id or channel.get("guild_id")
    data: JSON = {
        "id": payloads.snowflake(),
        "application_id": world.app_id,
        "type": kind,
        "token": payloads.token(),
        "version": 1,
        "channel_id": channel_id,
        "channel": dict(channel),
        "app_permissions": payloads.ALL_PERMISSIONS,
        "locale": "en-US",
        "entitlements": [],
        "attachment_size_limit": ATTACHMENT_LIMIT,
    }
    if guild_id:
        member = world.ensure_member(guild_id, who)
        member["permissions"] = payloads.DEFAULT_MEMBER_PERMISSIONS
        data.update(
            guild_id=guild_id,
            guild_locale="en-US",
            guild={"id": guild_id, "locale": "en-US", "features": []},
            member=member,
            context=0,
            authorizing_integration_owners={"0": guild_id},
        )
    else:
        data.update(user=who, context=1, authorizing_integration_owners={"1": who["id"]})
    return data


def _keep(world: World, payload: JSON) -> InteractionRecord:
    record = InteractionRecord(payload)
    with world.lock:
        world.interactions[record.token] = record
    return record


def command(
    world: World,
    name: str,
    options: dict[str, Any],
    channel_id: str,
    who: JSON,
    guild_id: str | None,
) -> InteractionRecord:
    """A slash-command interaction (type 2) for a registered command."""
    guild_id = guild_id or world.guild_id_of(channel_id)
    found = world.command_id(name, guild_id)
    if found is None:
        raise ValueError(f"/{name} is not registered here: sync the command tree first")
    command_id, scope = found
    data: JSON = {"id": command_id, "name": name, "type": 1}
    if scope is not None:
        data["guild_id"] = scope
    if options:
        data["options"] = [
            {"name": k, "type": world.option_type(name, guild_id, k) or _option_type(v), "value": v}
            for k, v in options.items()
        ]
    payload = _base(world, payloads.INTERACTION_APPLICATION_COMMAND, channel_id, who, guild_id)
    payload["data"] = data
    return _keep(world, payload)


def component(
    world: World,
    custom_id: str,
    message: JSON,
    who: JSON,
    component_type: int,
    values: list[str] | None,
) -> InteractionRecord:
    """A component interaction (type 3): a button press or a select choice on ``message``."""
    current = world.messages.get(message["id"], message)
    payload = _base(world, payloads.INTERACTION_MESSAGE_COMPONENT, current["channel_id"], who, None)
    data: JSON = {"custom_id": custom_id, "component_type": component_type}
    if values is not None:
        data["values"] = values
    payload["data"] = data
    payload["message"] = current
    return _keep(world, payload)


def _record(world: World, req: Req) -> InteractionRecord:
    record = world.interaction(req.params["token"])
    if record is None or (
        "interaction_id" in req.params and record.payload["id"] != req.params["interaction_id"]
    ):
        raise Rejected(404, payloads.error(10062, "Unknown interaction"))
    if "app_id" in req.params and req.params["app_id"] != world.app_id:
        raise Rejected(404, payloads.error(10015, "Unknown Webhook"))
    return record


def _response_message(
    world: World, record: InteractionRecord, data: JSON, *, loading: bool
) -> JSON:
    payload = record.payload
    kind = payloads.MESSAGE_CHAT_INPUT_COMMAND if payload["type"] == 2 else payloads.MESSAGE_DEFAULT
    flags = int(data.get("flags") or 0) & payloads.FLAG_EPHEMERAL
    if loading:
        msg = payloads.message(
            payload["channel_id"],
            world.bot,
            "",
            guild_id=payload.get("guild_id"),
            flags=flags | payloads.FLAG_LOADING,
            message_type=kind,
        )
    else:
        msg = messages.build(world, payload["channel_id"], data, message_type=kind)
    who = payload.get("member", {}).get("user") or payload.get("user")
    msg["webhook_id"] = world.app_id
    msg["application_id"] = world.app_id
    msg["interaction_metadata"] = {
        "id": payload["id"],
        "type": payload["type"],
        "user": who,
        "authorizing_integration_owners": payload["authorizing_integration_owners"],
    }
    if "message" in payload:
        msg["interaction_metadata"]["interacted_message_id"] = payload["message"]["id"]
    return msg


async def callback(ctx: Ctx, req: Req) -> web.Response:
    """POST /interactions/{interaction_id}/{token}/callback."""
    world = ctx.world
    record = _record(world, req)
    body = req.json()
    kind = int(body.get("type") or 0)
    data = body.get("data") or {}
    if record.callbacks:
        raise Rejected(400, payloads.error(40060, "Interaction has already been acknowledged."))
    if time.monotonic() - record.created > world.interaction_deadline:
        # Discord forgets an interaction not acknowledged within 3 seconds.
        raise Rejected(404, payloads.error(10062, "Unknown interaction"))
    is_component = record.payload["type"] == payloads.INTERACTION_MESSAGE_COMPONENT
    msg: JSON | None = None
    if kind in (4, 5):
        msg = world.store_message(_response_message(world, record, data, loading=kind == 5))
        await messages.echo(ctx, "MESSAGE_CREATE", msg)
    elif kind in (6, 7) and is_component:
        target = messages.find_own(
            world, record.payload["channel_id"], record.payload["message"]["id"]
        )
        if kind == 7:
            target = messages.edit(world, target, data)
            await messages.echo(ctx, "MESSAGE_UPDATE", target)
        msg = target
    elif kind not in (8, 9):
        err = payloads.field_error(
            ["type"], "INTERACTION_RESPONSE_TYPE_INVALID", "Invalid response type"
        )
        raise Rejected(400, err)
    with world.changed:
        record.callbacks.append(body)
        if msg is not None:
            record.original_id = msg["id"]
        world.changed.notify_all()
    if req.query.get("with_response") not in ("1", "true", "True"):
        return no_content()
    answer: JSON = {"interaction": {"id": record.payload["id"], "type": record.payload["type"]}}
    if msg is not None and kind in (4, 5):
        answer["interaction"].update(
            response_message_id=msg["id"],
            response_message_loading=kind == 5,
            response_message_ephemeral=bool(msg["flags"] & payloads.FLAG_EPHEMERAL),
        )
    resource: JSON = {"type": kind}
    if msg is not None and kind in (4, 7):
        resource["message"] = msg
    answer["resource"] = resource
    return reply(answer)


def _target(world: World, record: InteractionRecord, req: Req) -> JSON:
    wanted = req.params["message_id"]
    if wanted == "@original":
        message_id = record.original_id
    else:
        known = wanted in record.followup_ids or wanted == record.original_id
        message_id = wanted if known else None
    if message_id is None:
        raise Rejected(404, payloads.error(10008, "Unknown Message"))
    return messages.find_own(world, record.payload["channel_id"], message_id)


async def webhook_message(ctx: Ctx, req: Req) -> web.Response:
    """GET/PATCH/DELETE /webhooks/{app_id}/{token}/messages/{message_id or @original}."""
    world = ctx.world
    record = _record(world, req)
    target = _target(world, record, req)
    if req.method == "GET":
        return reply(target)
    if req.method == "PATCH":
        edited = messages.edit(world, target, req.json())
        await messages.echo(ctx, "MESSAGE_UPDATE", edited)
        return reply(edited)
    await messages.delete(ctx, target)
    return no_content()


async def followup(ctx: Ctx, req: Req) -> web.Response:
    """POST /webhooks/{app_id}/{token}: a follow-up (the first one after a defer fills it in)."""
    world = ctx.world
    record = _record(world, req)
    if not record.callbacks:
        raise Rejected(404, payloads.error(10015, "Unknown Webhook"))
    body = req.json()
    original = world.messages.get(record.original_id or "")
    if original is not None and original["flags"] & payloads.FLAG_LOADING:
        msg = messages.edit(world, original, body)
        await messages.echo(ctx, "MESSAGE_UPDATE", msg)
    else:
        msg = world.store_message(_response_message(world, record, body, loading=False))
        with world.lock:
            record.followup_ids.append(msg["id"])
        await messages.echo(ctx, "MESSAGE_CREATE", msg)
    if req.query.get("wait") in ("1", "true", "True"):
        return reply(msg)
    return no_content()
