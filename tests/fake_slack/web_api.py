"""The fake Web API: ``{root}/api/<method>`` plus ``url_private`` file downloads, and the
upload URLs of Slack's file upload flow (``files.getUploadURLExternal``, a POST of the
bytes to the URL it returns, ``files.completeUploadExternal`` sharing the file).

Arguments are read from the query string, a form body or a JSON body (merged in that
order); ``blocks`` / ``attachments`` sent as JSON strings in forms are decoded. The token
comes from ``Authorization: Bearer`` or a ``token`` argument. Like Slack, errors are
HTTP 200 with ``{"ok": false, "error": ...}``; only injected faults choose a status.
"""

from __future__ import annotations

import collections
import mimetypes
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from aiohttp import web

from tests.fake_slack.message_rules import decode_json_field, message_problem
from tests.fake_slack.records import JSON, ApiCall, Fault
from tests.fake_slack.workspace import StoredFile, Workspace

Handler = Callable[[JSON], JSON]
_APP_ONLY = {"apps.connections.open"}


class WebApi:
    """Answers Web API methods against a ``Workspace``; records every call."""

    def __init__(
        self,
        workspace: Workspace,
        lock: threading.Condition,
        *,
        bot_token: str,
        app_token: str,
        root: Callable[[], str],
        socket_url: Callable[[], str],
        on_posted: Callable[[str, JSON], None],
    ) -> None:
        self.ws = workspace
        self.lock = lock
        self.bot_token = bot_token
        self.app_token = app_token
        self.root = root
        self.socket_url = socket_url
        self.on_posted = on_posted
        self.calls: list[ApiCall] = []
        self.faults: dict[str, collections.deque[Fault]] = collections.defaultdict(
            collections.deque
        )
        self.methods: dict[str, Handler] = {
            "auth.test": self.auth_test,
            "apps.connections.open": lambda _: {"ok": True, "url": self.socket_url()},
            "chat.postMessage": self.post_message,
            "chat.update": self.update,
            "chat.postEphemeral": self.post_ephemeral,
            "chat.delete": self.delete,
            "reactions.add": self.reactions_add,
            "reactions.remove": self.reactions_remove,
            "users.info": self.users_info,
            "conversations.info": self.conversations_info,
            "files.info": self.files_info,
            "files.getUploadURLExternal": self.upload_url,
            "files.completeUploadExternal": self.complete_upload,
        }
        self.pending: dict[str, JSON] = {}  # uploads announced, not yet completed

    async def handle(self, request: web.Request) -> web.Response:
        """Answer one ``/api/<method>`` request."""
        method = request.match_info["method"]
        args = await read_args(request)
        token = _bearer(request) or args.pop("token", None)
        headers: dict[str, str] = {}
        with self.lock:
            queue = self.faults.get(method)
            fault = queue.popleft() if queue else None
            if fault is not None:
                status, body = fault.status, {"ok": False, "error": fault.error}
                if fault.retry_after is not None:
                    headers["Retry-After"] = str(fault.retry_after)
            else:
                status, body = 200, self.answer(method, args, token)
            self.calls.append(ApiCall(method, args, token, request.method, status, body))
            self.lock.notify_all()
        if fault is not None and fault.page is not None:
            return web.Response(text=fault.page, status=status, content_type="text/html")
        return web.json_response(body, status=status, headers=headers)

    def answer(self, method: str, args: JSON, token: str | None) -> JSON:
        """The body Slack would send (the caller holds the lock)."""
        handler = self.methods.get(method)
        if handler is None:
            return {"ok": False, "error": "unknown_method", "req_method": method}
        if not token:
            return {"ok": False, "error": "not_authed"}
        if token not in {self.bot_token, self.app_token}:
            return {"ok": False, "error": "invalid_auth"}
        if (token == self.app_token) != (method in _APP_ONLY):
            return {"ok": False, "error": "not_allowed_token_type"}
        return handler(args)

    async def download(self, request: web.Request) -> web.Response:
        """Serve ``url_private``; without the bot token Slack redirects to a login page."""
        if _bearer(request) != self.bot_token:
            raise web.HTTPFound(f"/login?redir={quote(request.path)}")
        file_id = request.match_info["team_file"].split("-", 1)[-1]
        with self.lock:
            stored = self.ws.files.get(file_id)
        if stored is None:
            raise web.HTTPNotFound()
        return web.Response(body=stored.content, content_type=stored.mimetype)

    async def upload(self, request: web.Request) -> web.Response:
        """The upload URL ``files.getUploadURLExternal`` hands out: it takes the raw bytes."""
        file_id = request.match_info["file_id"]
        data = await request.read()
        with self.lock:
            pending = self.pending.get(file_id)
            if pending is not None:
                pending["data"] = data
            status = 200 if pending is not None else 404
            args = {"file_id": file_id, "size": len(data)}
            self.calls.append(ApiCall("upload", args, None, request.method, status, {}))
            self.lock.notify_all()
        if pending is None:
            raise web.HTTPNotFound()
        return web.Response(text=f"OK - {len(data)}")

    async def login_page(self, request: web.Request) -> web.Response:
        """What a browser (or a client without the token) gets from ``url_private``."""
        return web.Response(
            text="<html><body>Sign in to Slack</body></html>", content_type="text/html"
        )

    # The methods. Each runs with the lock held.

    def auth_test(self, args: JSON) -> JSON:
        """``auth.test``: who the bot token belongs to."""
        ws = self.ws
        return {
            "ok": True,
            "url": f"https://{ws.team_name.lower()}.slack.com/",
            "team": ws.team_name,
            "user": ws.bot_user.name,
            "team_id": ws.team_id,
            "user_id": ws.bot_user.id,
            "bot_id": ws.bot_id,
            "is_enterprise_install": False,
        }

    def post_message(self, args: JSON) -> JSON:
        """``chat.postMessage``."""
        conversation = self.ws.conversation(str(args.get("channel", "")))
        if conversation is None:
            return {"ok": False, "error": "channel_not_found"}
        problem = message_problem(args)
        if problem:
            return problem
        blocks = decode_json_field(args.get("blocks"))
        thread_ts = args.get("thread_ts") or None
        message = self.ws.bot_message(str(args.get("text") or ""), blocks, thread_ts)
        self.ws.store(conversation.id, message)
        self.on_posted(conversation.id, message)
        return {"ok": True, "channel": conversation.id, "ts": message["ts"], "message": message}

    def update(self, args: JSON) -> JSON:
        """``chat.update``: the bot may edit its own messages."""
        channel = str(args.get("channel", ""))
        message = self.ws.find_message(channel, str(args.get("ts", "")))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if message.get("user") != self.ws.bot_user.id:
            return {"ok": False, "error": "cant_update_message"}
        problem = message_problem({**args, "text": args.get("text") or message.get("text")})
        if problem:
            return problem
        if "text" in args:
            message["text"] = args["text"]
        if "blocks" in args:
            message["blocks"] = decode_json_field(args["blocks"])
        message["edited"] = {"user": self.ws.bot_user.id, "ts": self.ws.next_ts()}
        return {
            "ok": True,
            "channel": channel,
            "ts": message["ts"],
            "text": message["text"],
            "message": message,
        }

    def post_ephemeral(self, args: JSON) -> JSON:
        """``chat.postEphemeral``: only ``user`` sees it; Slack does not store it."""
        conversation = self.ws.conversation(str(args.get("channel", "")))
        if conversation is None:
            return {"ok": False, "error": "channel_not_found"}
        user = str(args.get("user", ""))
        if user not in self.ws.users or (conversation.is_im and user != conversation.user):
            return {"ok": False, "error": "user_not_in_channel"}
        problem = message_problem(args)
        if problem:
            return problem
        ts = self.ws.next_ts()
        self.ws.ephemerals.append(
            {
                "channel": conversation.id,
                "user": user,
                "text": args.get("text") or "",
                "blocks": decode_json_field(args.get("blocks")),
                "thread_ts": args.get("thread_ts"),
                "ts": ts,
                "via": "chat.postEphemeral",
            }
        )
        return {"ok": True, "message_ts": ts}

    def delete(self, args: JSON) -> JSON:
        """``chat.delete``."""
        channel, ts = str(args.get("channel", "")), str(args.get("ts", ""))
        message = self.ws.find_message(channel, ts)
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if message.get("user") != self.ws.bot_user.id:
            return {"ok": False, "error": "cant_delete_message"}
        self.ws.messages[channel].remove(message)
        return {"ok": True, "channel": channel, "ts": ts}

    def reactions_add(self, args: JSON) -> JSON:
        """``reactions.add`` (``name`` without colons)."""
        key, name = self._reaction_key(args)
        if key is None:
            return {"ok": False, "error": "message_not_found"}
        if not name or ":" in name:
            return {"ok": False, "error": "invalid_name"}
        reactions = self.ws.reactions.setdefault(key, [])
        if (name, self.ws.bot_user.id) in reactions:
            return {"ok": False, "error": "already_reacted"}
        reactions.append((name, self.ws.bot_user.id))
        return {"ok": True}

    def reactions_remove(self, args: JSON) -> JSON:
        """``reactions.remove``."""
        key, name = self._reaction_key(args)
        if key is None:
            return {"ok": False, "error": "message_not_found"}
        reactions = self.ws.reactions.get(key, [])
        if (name, self.ws.bot_user.id) not in reactions:
            return {"ok": False, "error": "no_reaction"}
        reactions.remove((name, self.ws.bot_user.id))
        return {"ok": True}

    def users_info(self, args: JSON) -> JSON:
        """``users.info``."""
        user = self.ws.users.get(str(args.get("user", "")))
        if user is None:
            return {"ok": False, "error": "user_not_found"}
        return {"ok": True, "user": user.info(self.ws.team_id)}

    def conversations_info(self, args: JSON) -> JSON:
        """``conversations.info``."""
        conversation = self.ws.conversations.get(str(args.get("channel", "")))
        if conversation is None:
            return {"ok": False, "error": "channel_not_found"}
        return {"ok": True, "channel": conversation.info()}

    def files_info(self, args: JSON) -> JSON:
        """``files.info``."""
        stored = self.ws.files.get(str(args.get("file", "")))
        if stored is None:
            return {"ok": False, "error": "file_not_found"}
        return {
            "ok": True,
            "file": stored.info(self.root(), self.ws.team_id),
            "comments": [],
            "response_metadata": {"next_cursor": ""},
        }

    def upload_url(self, args: JSON) -> JSON:
        """``files.getUploadURLExternal``: where to post a file of ``length`` bytes."""
        filename, length = str(args.get("filename") or ""), str(args.get("length") or "")
        if not filename or not length.isdigit() or int(length) < 1:
            return {"ok": False, "error": "invalid_arguments"}
        file_id = self.ws.next_id("F")
        self.pending[file_id] = {"filename": filename, "length": int(length), "data": None}
        return {"ok": True, "upload_url": f"{self.root()}/upload/v1/{file_id}", "file_id": file_id}

    def complete_upload(self, args: JSON) -> JSON:
        """``files.completeUploadExternal``: store the uploaded files and share them in
        ``channel_id`` (in ``thread_ts``), with ``initial_comment`` as the message text."""
        files = decode_json_field(args.get("files"))
        if not isinstance(files, list) or not files:
            return {"ok": False, "error": "invalid_arguments"}
        pending = [self.pending.get(str(f.get("id"))) for f in files]
        if any(p is None or p["data"] is None for p in pending):
            return {"ok": False, "error": "file_not_found"}
        if any(len(p["data"]) != p["length"] for p in pending if p is not None):
            return {"ok": False, "error": "file_upload_size_mismatch"}
        channel = str(args.get("channel_id") or "")
        conversation = self.ws.conversation(channel) if channel else None
        if channel and conversation is None:
            return {"ok": False, "error": "channel_not_found"}
        stored = []
        for item, upload in zip(files, pending, strict=True):
            assert upload is not None
            file_id = str(item["id"])
            name = upload["filename"]
            kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
            self.pending.pop(file_id)
            self.ws.files[file_id] = StoredFile(
                file_id, name, upload["data"], kind, self.ws.bot_user.id
            )
            info = self.ws.files[file_id].info(self.root(), self.ws.team_id)
            stored.append({**info, "title": str(item.get("title") or name)})
        if conversation is not None:
            message = self.ws.bot_message(
                str(args.get("initial_comment") or ""), None, args.get("thread_ts") or None
            )
            message["files"] = stored
            self.ws.store(conversation.id, message)
            self.on_posted(conversation.id, message)
        return {"ok": True, "files": [{"id": f["id"], "title": f["title"]} for f in stored]}

    def _reaction_key(self, args: JSON) -> tuple[tuple[str, str] | None, str]:
        channel, ts = str(args.get("channel", "")), str(args.get("timestamp", ""))
        known = self.ws.find_message(channel, ts) is not None
        return ((channel, ts) if known else None), str(args.get("name", ""))


async def read_args(request: web.Request) -> JSON:
    """Query, form and JSON arguments merged, JSON-in-form fields decoded."""
    args: JSON = dict(request.query)
    if request.method == "POST" and request.can_read_body:
        if request.content_type == "application/json":
            body: Any = await request.json()
            if isinstance(body, dict):
                args.update(body)
        else:
            form = await request.post()
            args.update({k: v for k, v in form.items() if isinstance(v, str)})
    for name in ("blocks", "attachments"):
        if name in args:
            args[name] = decode_json_field(args[name])
    return args


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    return header[7:] if header.startswith("Bearer ") else None
