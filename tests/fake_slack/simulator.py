"""People using the workspace: their messages, button presses and slash commands become
envelopes; what the app posts back to ``response_url`` or in an ack takes effect here.

Which events a message yields follows the app's subscriptions, as in Slack: a DM gives
``message`` (``message.im``); a channel message gives ``message`` (``message.channels``)
and, when it names the bot, also ``app_mention``, each with its own ``event_id``.
"""

from __future__ import annotations

import copy
import itertools
import mimetypes
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.fake_slack import payloads
from tests.fake_slack.message_rules import decode_json_field, message_problem
from tests.fake_slack.records import JSON, ApiCall, Envelope
from tests.fake_slack.workspace import StoredFile, Workspace

Upload = tuple[str, bytes] | tuple[str, bytes, str]
DEFAULT_SUBSCRIPTIONS = frozenset(
    {"message.im", "message.channels", "message.groups", "message.mpim", "app_mention"}
)
_SUBSCRIPTION = {
    "im": "message.im",
    "mpim": "message.mpim",
    "group": "message.groups",
    "channel": "message.channels",
}
MAX_HOOK_USES = 5  # Slack accepts up to five posts per response_url


@dataclass
class Hook:
    """A ``response_url`` handed out with a command or an action."""

    kind: str  # "commands" | "actions"
    channel: str
    user: str
    message_ts: str = ""
    uses: int = 0


class Simulator:
    """Builds what people do into envelopes; applies responses (callers hold the lock)."""

    def __init__(
        self,
        workspace: Workspace,
        lock: threading.Condition,
        *,
        root: Callable[[], str],
        calls: list[ApiCall],
        subscriptions: frozenset[str] = DEFAULT_SUBSCRIPTIONS,
    ) -> None:
        self.ws = workspace
        self.lock = lock
        self.root = root
        self.calls = calls
        self.subscriptions = subscriptions
        self.hooks: dict[str, Hook] = {}
        self._hook_ids = itertools.count(1000)

    def message(
        self,
        channel: str,
        user: str,
        text: str,
        *,
        channel_type: str | None,
        thread_ts: str | None,
        mention_bot: bool,
        files: Sequence[Upload],
    ) -> tuple[JSON, list[Envelope]]:
        """A person's message: stored in history; returns the event and its envelopes."""
        kind = channel_type or ("im" if channel.startswith("D") else "channel")
        details: dict[str, Any] = {"is_im": kind == "im", "user": user if kind == "im" else ""}
        if kind != "im":
            details = {
                "name": channel.lower(),
                "is_private": kind == "group",
                "is_mpim": kind == "mpim",
            }
        conversation = self.ws.ensure_conversation(channel, **details)
        if mention_bot:
            text = f"<@{self.ws.bot_user.id}> {text}"
        stored = [self._store_file(upload, user) for upload in files]
        event = payloads.message_event(
            channel=channel,
            channel_type=conversation.channel_type,
            user=user,
            text=text,
            ts=self.ws.next_ts(),
            team_id=self.ws.team_id,
            thread_ts=thread_ts,
            files=[f.info(self.root(), self.ws.team_id) for f in stored],
        )
        self.ws.store(channel, {k: v for k, v in event.items() if k != "channel_type"})
        events = []
        if _SUBSCRIPTION[conversation.channel_type] in self.subscriptions:
            events.append(event)
        bot_named = f"<@{self.ws.bot_user.id}>" in text
        if bot_named and not conversation.is_im and "app_mention" in self.subscriptions:
            events.append(payloads.app_mention_event(event))
        return event, [self._event_envelope(e) for e in events]

    def edit(self, channel: str, ts: str, text: str) -> tuple[JSON, list[Envelope]]:
        """A person edits their post ``ts``: history changes; returns the event and envelopes."""
        stored = self.ws.find_message(channel, ts)
        conversation = self.ws.conversation(channel)
        if stored is None or conversation is None:
            raise ValueError(f"fake Slack: no message {ts} in {channel}")
        previous = {**stored, "channel": channel}
        event = payloads.message_changed_event(
            previous=previous, text=text, edited_ts=self.ws.next_ts()
        )
        event["channel_type"] = conversation.channel_type
        stored.update(text=event["message"]["text"], edited=event["message"]["edited"])
        wanted = _SUBSCRIPTION[conversation.channel_type] in self.subscriptions
        return event, [self._event_envelope(event)] if wanted else []

    def echo(self, channel: str, message: JSON) -> Envelope | None:
        """The ``message`` event Slack sends apps for the bot's own post, if subscribed."""
        conversation = self.ws.conversation(channel)
        if (
            conversation is None
            or _SUBSCRIPTION[conversation.channel_type] not in self.subscriptions
        ):
            return None
        event = {**message, "channel": channel, "event_ts": message["ts"]}
        event["channel_type"] = conversation.channel_type
        return self._event_envelope(event)

    def press(
        self,
        user: str,
        action_id: str,
        channel: str | None,
        message_ts: str | None,
        value: str | None,
    ) -> Envelope:
        """A button press on the newest bot message (in ``channel``) that has that button."""
        found = self._find_button(action_id, channel, message_ts, value)
        if found is None:
            raise LookupError(f"no bot message with a button {action_id!r} (value {value!r})")
        where, message, element, block_id = found
        url = self._hook("actions", where, user, message["ts"])
        payload = payloads.block_actions(
            user=self._user_object(user),
            team={"id": self.ws.team_id, "domain": self.ws.team_name.lower()},
            app_id=self.ws.app_id,
            channel={"id": where, "name": self._channel_name(where)},
            message=copy.deepcopy(message),
            action=payloads.button_action(element, block_id, self.ws.next_ts()),
            response_url=url,
            trigger_id=self._trigger_id(),
        )
        return Envelope(str(uuid.uuid4()), "interactive", payload, False)

    def command(self, channel: str, user: str, command: str, text: str) -> Envelope:
        """A slash command typed in ``channel``."""
        payload = payloads.slash_command(
            command=command,
            text=text,
            user_id=user,
            user_name=self._user_object(user)["username"],
            channel_id=channel,
            channel_name=self._channel_name(channel),
            team_id=self.ws.team_id,
            team_domain=self.ws.team_name.lower(),
            app_id=self.ws.app_id,
            response_url=self._hook("commands", channel, user),
            trigger_id=self._trigger_id(),
        )
        return Envelope(str(uuid.uuid4()), "slash_commands", payload, True)

    def _find_button(
        self, action_id: str, channel: str | None, message_ts: str | None, value: str | None
    ) -> tuple[str, JSON, JSON, str] | None:
        channels = [channel] if channel else list(self.ws.messages)
        candidates = [(c, m) for c in channels for m in self.ws.messages.get(c, [])]
        candidates.sort(key=lambda pair: float(pair[1]["ts"]), reverse=True)
        for where, message in candidates:
            if message.get("user") != self.ws.bot_user.id:
                continue
            if message_ts and message["ts"] != message_ts:
                continue
            found = payloads.find_button(message, action_id, value)
            if found:
                return where, message, *found
        return None

    def apply_ack(self, envelope: Envelope, payload: JSON | None) -> None:
        """A slash command's ack payload is shown to the user, as Slack does."""
        if envelope.type != "slash_commands" or not payload or message_problem(payload):
            return
        body = envelope.payload
        self._show(payload, str(body["channel_id"]), str(body["user_id"]), via="ack")

    async def handle_hook(self, request: web.Request) -> web.Response:
        """The ``response_url`` route: record the post and apply it."""
        body: Any = await request.json() if request.can_read_body else {}
        body = body if isinstance(body, dict) else {}
        with self.lock:
            hook = self.hooks.get(request.match_info["hook_id"])
            status, answer = 200, JSON({"ok": True})
            if hook is None:
                status, answer = 404, {"ok": False, "error": "expired_url"}
            elif hook.uses >= MAX_HOOK_USES:
                status, answer = 404, {"ok": False, "error": "used_url"}
            else:
                hook.uses += 1
                problem = None if body.get("delete_original") else message_problem(body)
                if problem:
                    status, answer = 400, problem
                else:
                    self._respond(hook, body)
            args = {**body, "url": str(request.url)}
            self.calls.append(ApiCall("response_url", args, None, "POST", status, answer))
            self.lock.notify_all()
        return web.json_response(answer, status=status)

    def _respond(self, hook: Hook, body: JSON) -> None:
        original = self.ws.find_message(hook.channel, hook.message_ts) if hook.message_ts else None
        if original is not None and body.get("delete_original"):
            self.ws.messages[hook.channel].remove(original)
        elif original is not None and body.get("replace_original"):
            original["text"] = body.get("text", "")
            original.pop("blocks", None)
            if body.get("blocks"):
                original["blocks"] = decode_json_field(body["blocks"])
        else:
            self._show(body, hook.channel, hook.user, via="response_url")

    def _show(self, body: JSON, channel: str, user: str, *, via: str) -> None:
        blocks = decode_json_field(body.get("blocks"))
        thread_ts = body.get("thread_ts")
        if body.get("response_type") == "in_channel":
            message = self.ws.bot_message(str(body.get("text") or ""), blocks, thread_ts)
            self.ws.store(channel, message)
            return
        ephemeral = {
            "channel": channel,
            "user": user,
            "text": body.get("text") or "",
            "blocks": blocks,
            "thread_ts": thread_ts,
            "ts": self.ws.next_ts(),
            "via": via,
        }
        self.ws.ephemerals.append(ephemeral)

    def _event_envelope(self, event: JSON) -> Envelope:
        body = payloads.event_callback(
            event,
            team_id=self.ws.team_id,
            app_id=self.ws.app_id,
            bot_user_id=self.ws.bot_user.id,
            event_id=self.ws.next_id("Ev"),
            event_time=int(time.time()),
        )
        return Envelope(str(uuid.uuid4()), "events_api", body, False)

    def _store_file(self, upload: Upload, user: str) -> StoredFile:
        name, content = upload[0], upload[1]
        mimetype = upload[2] if len(upload) == 3 else None
        guessed = mimetypes.guess_type(name)[0] or "application/octet-stream"
        stored = StoredFile(self.ws.next_id("F"), name, content, mimetype or guessed, user)
        self.ws.files[stored.id] = stored
        return stored

    def _hook(self, kind: str, channel: str, user: str, message_ts: str = "") -> str:
        hook_id = str(next(self._hook_ids))
        self.hooks[hook_id] = Hook(kind, channel, user, message_ts)
        secret = uuid.uuid4().hex[:24]
        return f"{self.root()}/hooks/{kind}/{self.ws.team_id}/{hook_id}/{secret}"

    def _user_object(self, user: str) -> JSON:
        known = self.ws.users.get(user)
        name = known.name if known else user.lower()
        return {"id": user, "username": name, "name": name, "team_id": self.ws.team_id}

    def _channel_name(self, channel: str) -> str:
        conversation = self.ws.conversations.get(channel)
        if conversation is None or conversation.is_im:
            return "directmessage"
        return conversation.name

    def _trigger_id(self) -> str:
        return f"{self.ws.next_id('')}.{uuid.uuid4().int % 10**12}.{uuid.uuid4().hex[:32]}"
