"""The bot's own settings in the fake Telegram server: identity and command lists.

Commands are stored per (scope, language_code), as Telegram does; getMyCommands
answers for exactly that pair. ``set_count`` counts setMyCommands calls so a test
can check that a client only sets its commands when they changed.
Not thread-safe: used under the server lock.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from tests.fake_telegram.wire import Json, Upload, bad_request

_COMMAND = re.compile(r"[a-z0-9_]{1,32}")
DEFAULT_SCOPE: Json = {"type": "default"}


def scope_key(scope: Any, language_code: Any) -> tuple[str, str]:
    """The storage key of a command list."""
    if scope is None:
        scope = DEFAULT_SCOPE
    if not isinstance(scope, dict) or "type" not in scope:
        raise bad_request("can't parse BotCommandScope JSON object")
    return json.dumps(scope, sort_keys=True), str(language_code or "")


class BotSettings:
    """getMe and the command lists."""

    def __init__(self, bot_id: int, username: str, first_name: str) -> None:
        self.me: Json = {
            "id": bot_id,
            "is_bot": True,
            "first_name": first_name,
            "username": username,
        }
        self.commands: dict[tuple[str, str], list[Json]] = {}
        self.set_count = 0

    def get_me(self, params: Json, uploads: dict[str, Upload]) -> Json:
        """``getMe``: the bot as a User with the bot-only fields."""
        return {
            **self.me,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }

    def set_commands(self, params: Json, uploads: dict[str, Upload]) -> bool:
        """``setMyCommands`` (a missing list sets an empty one, as Telegram does)."""
        commands = params.get("commands", [])
        if not isinstance(commands, list):
            raise bad_request("can't parse commands JSON object")
        for command in commands:
            if not isinstance(command, dict) or "command" not in command:
                raise bad_request("can't parse BotCommand: Can't find field \"command\"")
            if "description" not in command:
                raise bad_request("can't parse BotCommand: Can't find field \"description\"")
            if not _COMMAND.fullmatch(str(command["command"])):
                raise bad_request("BOT_COMMAND_INVALID")
            if not str(command["description"]).strip():
                raise bad_request("command description must be non-empty")
        key = scope_key(params.get("scope"), params.get("language_code"))
        self.commands[key] = [
            {"command": c["command"], "description": c["description"]} for c in commands
        ]
        self.set_count += 1
        return True

    def get_commands(self, params: Json, uploads: dict[str, Upload]) -> list[Json]:
        """``getMyCommands`` for one scope and language."""
        key = scope_key(params.get("scope"), params.get("language_code"))
        return copy.deepcopy(self.commands.get(key, []))

    def delete_commands(self, params: Json, uploads: dict[str, Upload]) -> bool:
        """``deleteMyCommands`` for one scope and language."""
        self.commands.pop(scope_key(params.get("scope"), params.get("language_code")), None)
        return True
