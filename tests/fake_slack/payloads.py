"""Builders for what Slack sends an app: event callbacks, interactive payloads, slash commands.

The same dicts travel as Socket Mode envelope payloads and as HTTP request bodies
(JSON for events, ``payload=<json>`` forms for interactivity, plain forms for commands).
Field sets follow Slack's Events API, ``block_actions`` and slash-command references.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from tests.fake_slack.records import JSON

VERIFICATION_TOKEN = "fake-verification-token"
_MENTION = re.compile(r"<@([UW][A-Z0-9]+)>")


def rich_text(text: str) -> list[JSON]:
    """The ``rich_text`` block Slack's clients attach to a typed message."""
    elements: list[JSON] = []
    position = 0
    for match in _MENTION.finditer(text):
        if match.start() > position:
            elements.append({"type": "text", "text": text[position : match.start()]})
        elements.append({"type": "user", "user_id": match.group(1)})
        position = match.end()
    if position < len(text):
        elements.append({"type": "text", "text": text[position:]})
    section = {"type": "rich_text_section", "elements": elements}
    return [{"type": "rich_text", "block_id": uuid.uuid4().hex[:5], "elements": [section]}]


def message_event(
    *,
    channel: str,
    channel_type: str,
    user: str,
    text: str,
    ts: str,
    team_id: str,
    thread_ts: str | None = None,
    files: list[JSON] | None = None,
) -> JSON:
    """A ``message`` event as a person's client produces it (``file_share`` with files)."""
    event: JSON = {
        "client_msg_id": str(uuid.uuid4()),
        "type": "message",
        "text": text,
        "user": user,
        "ts": ts,
        "blocks": rich_text(text) if text else [],
        "team": team_id,
        "channel": channel,
        "event_ts": ts,
        "channel_type": channel_type,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
        event["parent_user_id"] = user
    if files:
        event["subtype"] = "file_share"
        event["files"] = files
        event["upload"] = False
        event["display_as_bot"] = False
    return event


def message_changed_event(*, previous: JSON, text: str, edited_ts: str) -> JSON:
    """The ``message_changed`` event of a person's edit of ``previous`` (a stored post)."""
    kept = {k: v for k, v in previous.items() if k not in ("channel", "event_ts")}
    new = {**kept, "text": text, "blocks": rich_text(text) if text else []}
    new["edited"] = {"user": previous["user"], "ts": edited_ts}
    return {
        "type": "message",
        "subtype": "message_changed",
        "message": new,
        "previous_message": kept,
        "channel": previous["channel"],
        "hidden": True,
        "ts": edited_ts,
        "event_ts": edited_ts,
    }


def app_mention_event(message: JSON) -> JSON:
    """The ``app_mention`` event Slack sends alongside a channel message naming the bot."""
    keys = ("client_msg_id", "text", "user", "ts", "blocks", "team", "channel", "event_ts")
    event: JSON = {"type": "app_mention", **{k: message[k] for k in keys}}
    for optional in ("thread_ts", "files"):
        if optional in message:
            event[optional] = message[optional]
    return event


def event_callback(
    event: JSON, *, team_id: str, app_id: str, bot_user_id: str, event_id: str, event_time: int
) -> JSON:
    """The Events API outer body around ``event``."""
    return {
        "token": VERIFICATION_TOKEN,
        "team_id": team_id,
        "context_team_id": team_id,
        "context_enterprise_id": None,
        "api_app_id": app_id,
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": event_time,
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": team_id,
                "user_id": bot_user_id,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
        "event_context": f"4-{event_id}",
    }


def block_actions(
    *,
    user: JSON,
    team: JSON,
    app_id: str,
    channel: JSON,
    message: JSON,
    action: JSON,
    response_url: str,
    trigger_id: str,
) -> JSON:
    """A ``block_actions`` payload for a button pressed on a message the bot posted."""
    return {
        "type": "block_actions",
        "user": user,
        "api_app_id": app_id,
        "token": VERIFICATION_TOKEN,
        "container": {
            "type": "message",
            "message_ts": message["ts"],
            "channel_id": channel["id"],
            "is_ephemeral": False,
        },
        "trigger_id": trigger_id,
        "team": team,
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": channel,
        "message": message,
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [action],
    }


def button_action(element: JSON, block_id: str, action_ts: str) -> JSON:
    """The ``actions[0]`` entry for a pressed button element."""
    action: JSON = {
        "action_id": element.get("action_id", ""),
        "block_id": block_id,
        "text": element.get("text", {"type": "plain_text", "text": ""}),
        "type": "button",
        "action_ts": action_ts,
    }
    for optional in ("value", "style"):
        if optional in element:
            action[optional] = element[optional]
    return action


def slash_command(
    *,
    command: str,
    text: str,
    user_id: str,
    user_name: str,
    channel_id: str,
    channel_name: str,
    team_id: str,
    team_domain: str,
    app_id: str,
    response_url: str,
    trigger_id: str,
) -> dict[str, str]:
    """A slash-command invocation: the form fields Slack posts (all strings)."""
    return {
        "token": VERIFICATION_TOKEN,
        "team_id": team_id,
        "team_domain": team_domain,
        "channel_id": channel_id,
        "channel_name": channel_name,
        "user_id": user_id,
        "user_name": user_name,
        "command": command,
        "text": text,
        "api_app_id": app_id,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id,
    }


def url_verification(challenge: str) -> JSON:
    """The body Slack posts once to check a new Request URL."""
    return {"token": VERIFICATION_TOKEN, "challenge": challenge, "type": "url_verification"}


def find_button(message: JSON, action_id: str, value: str | None = None) -> tuple[JSON, str] | None:
    """The button element with ``action_id`` (and ``value``) in a message, and its block_id."""
    for block in message.get("blocks") or []:
        elements: list[Any] = block.get("elements") or []
        accessory = block.get("accessory")
        if accessory:
            elements = [*elements, accessory]
        for element in elements:
            if not isinstance(element, dict) or element.get("type") != "button":
                continue
            if element.get("action_id") == action_id and value in (None, element.get("value")):
                return element, str(block.get("block_id", ""))
    return None
