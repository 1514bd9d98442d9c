"""The fake REST API (``/api/v10/...``): routing, auth, injected faults, recording.

Every request is recorded (after it is answered, so its status is known). Routes
other than interaction callbacks, webhooks and ``GET /gateway`` need
``Authorization: Bot <token>``; a wrong one gets Discord's 401. A path with no route
gets a 404 that names it, so a gap in the fake shows up at once.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import BodyPartReader, web

from tests.fake_discord import interactions, messages, payloads
from tests.fake_discord.payloads import JSON
from tests.fake_discord.state import Call, Fault
from tests.fake_discord.wire import (
    Ctx,
    Rejected,
    Req,
    no_content,
    rate_limit_headers,
    rate_limited,
    reply,
)

Handler = Callable[[Ctx, Req], Awaitable[web.Response]]
_NAME = re.compile(r"[-_\w]{1,32}")


def _channel(ctx: Ctx, req: Req) -> JSON:
    channel = ctx.world.channel(req.params["channel_id"])
    if channel is None:
        raise Rejected(404, payloads.error(10003, "Unknown Channel"))
    return channel


async def get_me(ctx: Ctx, req: Req) -> web.Response:
    """GET /users/@me: the bot user."""
    return reply({**ctx.world.bot, "verified": True, "mfa_enabled": False, "email": None})


async def get_user(ctx: Ctx, req: Req) -> web.Response:
    """GET /users/{id}."""
    found = ctx.world.users.get(req.params["user_id"])
    if found is None:
        raise Rejected(404, payloads.error(10013, "Unknown User"))
    return reply(found)


async def open_dm(ctx: Ctx, req: Req) -> web.Response:
    """POST /users/@me/channels {recipient_id}: open (or reuse) a DM channel."""
    found = ctx.world.users.get(str(req.json().get("recipient_id")))
    if found is None:
        raise Rejected(404, payloads.error(10013, "Unknown User"))
    return reply(ctx.world.dm_channel_for(found))


async def get_application(ctx: Ctx, req: Req) -> web.Response:
    """GET /oauth2/applications/@me."""
    return reply(ctx.world.application)


async def get_gateway(ctx: Ctx, req: Req) -> web.Response:
    """GET /gateway and /gateway/bot."""
    url = f"{ctx.gateway.ws_root()}/gateway"
    if req.path == "/gateway":
        return reply({"url": url})
    limit = {"total": 1000, "remaining": 999, "reset_after": 86_400_000, "max_concurrency": 1}
    return reply({"url": url, "shards": 1, "session_start_limit": limit})


async def get_channel(ctx: Ctx, req: Req) -> web.Response:
    """GET /channels/{id}."""
    return reply(_channel(ctx, req))


async def typing(ctx: Ctx, req: Req) -> web.Response:
    """POST /channels/{id}/typing."""
    _channel(ctx, req)
    return no_content()


async def list_messages(ctx: Ctx, req: Req) -> web.Response:
    """GET /channels/{id}/messages?limit=N: newest first."""
    channel = _channel(ctx, req)
    limit = int(req.query.get("limit", "50"))
    with ctx.world.lock:
        found = [
            m
            for m in ctx.world.messages.values()
            if m["channel_id"] == channel["id"] and m["id"] not in ctx.world.deleted
        ]
    return reply(list(reversed(found))[:limit])


async def create_message(ctx: Ctx, req: Req) -> web.Response:
    """POST /channels/{id}/messages."""
    channel = _channel(ctx, req)
    msg = messages.build(ctx.world, channel["id"], req.json())
    if req.files:
        attachments = []
        for f in req.files:
            described = {k: v for k, v in f.items() if k != "data" and v != ""}
            attachment = {"id": payloads.snowflake(), **described}
            url = f"{ctx.gateway.ws_root()}/attachments/{attachment['id']}"
            attachment.update(url=url, proxy_url=url)
            with ctx.world.lock:
                ctx.world.uploads[attachment["id"]] = f.get("data", b"")
            attachments.append(attachment)
        msg["attachments"] = attachments
    ctx.world.store_message(msg)
    await messages.echo(ctx, "MESSAGE_CREATE", msg)
    return reply(msg)


async def channel_message(ctx: Ctx, req: Req) -> web.Response:
    """GET/PATCH/DELETE /channels/{id}/messages/{message_id}."""
    world = ctx.world
    target = messages.find_own(world, _channel(ctx, req)["id"], req.params["message_id"])
    if req.method == "GET":
        return reply(target)
    if req.method == "PATCH":
        if target["author"]["id"] != world.bot["id"]:
            err = payloads.error(50005, "Cannot edit a message authored by another user")
            raise Rejected(403, err)
        edited = messages.edit(world, target, req.json())
        await messages.echo(ctx, "MESSAGE_UPDATE", edited)
        return reply(edited)
    await messages.delete(ctx, target)
    return no_content()


def _check_command(index: int, command: JSON) -> None:
    kind = int(command.get("type") or 1)
    name = str(command.get("name") or "")
    where = [str(index)]
    if not _NAME.fullmatch(name) or (kind == 1 and name != name.lower()):
        err = payloads.field_error(
            [*where, "name"], "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid"
        )
        raise Rejected(400, err)
    description = str(command.get("description") or "")
    if kind == 1 and not 1 <= len(description) <= 100:
        err = payloads.field_error(
            [*where, "description"], "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length."
        )
        raise Rejected(400, err)
    if len(command.get("options") or []) > 25:
        err = payloads.field_error(
            [*where, "options"], "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length."
        )
        raise Rejected(400, err)


async def commands(ctx: Ctx, req: Req) -> web.Response:
    """GET/PUT /applications/{app_id}[/guilds/{guild_id}]/commands (PUT = bulk overwrite)."""
    world = ctx.world
    scope = req.params.get("guild_id")
    if req.params["app_id"] != world.app_id or (scope is not None and scope not in world.guilds):
        raise Rejected(403, payloads.error(50001, "Missing Access"))
    if req.method == "GET":
        with world.lock:
            return reply(list(world.commands.get(scope, [])))
    body = req.body if isinstance(req.body, list) else []
    for index, command in enumerate(body):
        _check_command(index, command)
    names = [c["name"] for c in body]
    if len(set(names)) != len(names):
        err = payloads.field_error(
            ["_"], "APPLICATION_COMMANDS_DUPLICATE_NAME", "Command names must be unique"
        )
        raise Rejected(400, err)
    with world.changed:
        before = {c["name"]: c for c in world.commands.get(scope, [])}
        stored = [_stored_command(world.app_id, scope, c, before.get(c["name"])) for c in body]
        world.commands[scope] = stored
        world.command_puts[scope] = world.command_puts.get(scope, 0) + 1
        world.changed.notify_all()
    return reply(stored)


def _stored_command(app_id: str, scope: str | None, sent: JSON, before: JSON | None) -> JSON:
    entry: JSON = {"type": 1, "default_member_permissions": None, "nsfw": False, **sent}
    entry["application_id"] = app_id
    entry["id"] = before["id"] if before else payloads.snowflake()
    same = before is not None and {k: v for k, v in before.items() if k in sent} == sent
    entry["version"] = before["version"] if same and before else payloads.snowflake()
    if scope is not None:
        entry["guild_id"] = scope
    return entry


_ID = r"(?P<{}>\d+)"
ROUTES: list[tuple[str, re.Pattern[str], Handler, bool]] = [
    (method, re.compile(path.format(channel_id=_ID.format("channel_id"))), handler, auth)
    for method, path, handler, auth in [
        ("GET", "/users/@me", get_me, True),
        ("GET", r"/users/(?P<user_id>\d+)", get_user, True),
        ("POST", "/users/@me/channels", open_dm, True),
        ("GET", "/oauth2/applications/@me", get_application, True),
        ("GET", "/applications/@me", get_application, True),
        ("GET", "/gateway", get_gateway, False),
        ("GET", "/gateway/bot", get_gateway, True),
        ("GET", "/channels/{channel_id}", get_channel, True),
        ("POST", "/channels/{channel_id}/typing", typing, True),
        ("GET", "/channels/{channel_id}/messages", list_messages, True),
        ("POST", "/channels/{channel_id}/messages", create_message, True),
        (
            "GET|PATCH|DELETE",
            r"/channels/{channel_id}/messages/(?P<message_id>\d+)",
            channel_message,
            True,
        ),
        (
            "POST",
            r"/interactions/(?P<interaction_id>\d+)/(?P<token>[^/]+)/callback",
            interactions.callback,
            False,
        ),
        (
            "GET|PATCH|DELETE",
            r"/webhooks/(?P<app_id>\d+)/(?P<token>[^/]+)/messages/(?P<message_id>@original|\d+)",
            interactions.webhook_message,
            False,
        ),
        ("POST", r"/webhooks/(?P<app_id>\d+)/(?P<token>[^/]+)", interactions.followup, False),
        ("GET|PUT", r"/applications/(?P<app_id>\d+)/commands", commands, True),
        (
            "GET|PUT",
            r"/applications/(?P<app_id>\d+)/guilds/(?P<guild_id>\d+)/commands",
            commands,
            True,
        ),
    ]
]


async def _read_body(request: web.Request) -> tuple[Any, list[JSON]]:
    """The JSON body, or ``payload_json`` plus file descriptions for multipart uploads."""
    if request.content_type.startswith("multipart/"):
        body: Any = None
        files: list[JSON] = []
        reader = await request.multipart()
        async for part in reader:
            if not isinstance(part, BodyPartReader):
                continue
            data = await part.read()
            if part.name == "payload_json":
                body = json.loads(data)
            else:
                files.append(
                    {
                        "filename": part.filename or "",
                        "size": len(data),
                        "content_type": part.headers.get("Content-Type", ""),
                        "data": bytes(data),
                    }
                )
        return body, files
    raw = await request.read()
    try:
        return (json.loads(raw) if raw else None), []
    except ValueError:
        return _INVALID_JSON, []


_INVALID_JSON = object()


class Rest:
    """Answers ``/api/v{n}/{tail}``."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Answer one REST request and record it."""
        path = "/" + request.match_info["tail"]
        body, files = await _read_body(request)
        headers = {k.lower(): v for k, v in request.headers.items()}
        call = Call(request.method, path, body, time.monotonic(), dict(request.query), headers)
        response = await self._answer(request, call, files)
        call.status = response.status
        self.ctx.world.record(call)
        return response

    async def _answer(self, request: web.Request, call: Call, files: list[JSON]) -> web.Response:
        if call.json is _INVALID_JSON:
            call.json = None
            body = payloads.error(50109, "The request body contains invalid JSON.")
            return reply(body, status=400)
        fault = self.ctx.world.take_fault(call.method, call.path)
        for index, (methods, pattern, handler, auth) in enumerate(ROUTES):
            match = pattern.fullmatch(call.path)
            if match is None or call.method not in methods.split("|"):
                continue
            bucket = f"fake-bucket-{index:02d}"
            if fault is not None:
                return _fault_response(fault, bucket)
            if auth and request.headers.get("Authorization") != f"Bot {self.ctx.world.token}":
                return reply({"message": "401: Unauthorized", "code": 0}, status=401)
            req = Req(call.method, call.path, match.groupdict(), call.query, call.json, files)
            try:
                response = await handler(self.ctx, req)
            except Rejected as rejected:
                return reply(rejected.body, status=rejected.status)
            response.headers.update(rate_limit_headers(bucket, remaining=4, reset_after=1.0))
            return response
        message = f"404: Not Found (fake Discord has no route {call.method} {call.path})"
        return reply({"message": message, "code": 0}, status=404)


def _fault_response(fault: Fault, bucket: str) -> web.Response:
    if fault.page is not None:
        return web.Response(text=fault.page, status=fault.status, content_type="text/html")
    if fault.status == 429:
        retry_after = fault.retry_after if fault.retry_after is not None else 1.0
        return rate_limited(bucket, retry_after, global_=fault.global_)
    body = fault.body or {"message": f"{fault.status}: injected failure", "code": 0}
    return reply(body, status=fault.status)
