"""The Bot API wire for the fake Telegram server: request decoding and answer shapes.

Telegram takes parameters as a query string, a form (``application/x-www-form-urlencoded``
or ``multipart/form-data`` with uploads) or a JSON body. Form and query values are
strings; clients such as python-telegram-bot JSON-encode every non-string value
(``chat_id``, ``reply_markup``...) on its own, so each field is decoded here, except
the ones that are text by nature (``text`` stays ``"123"``, not ``123``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web

Json = dict[str, Any]

# Parameters whose value is a string even when it looks like JSON ("123", "true"...).
STRING_PARAMS = frozenset(
    {
        "action", "business_connection_id", "callback_query_id", "caption", "certificate",
        "description", "document", "emoji", "file_id", "inline_message_id", "ip_address",
        "language_code", "message_effect_id", "name", "parse_mode", "photo", "secret_token",
        "short_description", "text", "title", "url",
    }
)  # fmt: skip

_DEFAULT_DESCRIPTIONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    409: "Conflict",
    500: "Internal Server Error",
    502: "Bad Gateway",
}


class ApiError(Exception):
    """A Bot API error answer: ``{"ok": false, "error_code", "description", "parameters"?}``,
    or with ``page`` an HTML page instead, as a proxy in front of Telegram answers an outage."""

    def __init__(
        self, code: int, description: str, parameters: Json | None = None, page: str | None = None
    ) -> None:
        super().__init__(description)
        self.code = code
        self.description = description
        self.parameters = parameters
        self.page = page

    def body(self) -> Json:
        """The JSON Telegram answers for this error."""
        body: Json = {"ok": False, "error_code": self.code, "description": self.description}
        if self.parameters:
            body["parameters"] = self.parameters
        return body


def bad_request(detail: str) -> ApiError:
    """A 400 ``Bad Request: <detail>`` error."""
    return ApiError(400, f"Bad Request: {detail}")


def error_for(code: int, description: str | None, retry_after: int | None) -> ApiError:
    """An injected error, with Telegram's usual description when none is given."""
    if code == 429:
        seconds = 1 if retry_after is None else retry_after
        text = description or f"Too Many Requests: retry after {seconds}"
        return ApiError(429, text, {"retry_after": seconds})
    text = description or _DEFAULT_DESCRIPTIONS.get(code, "Error")
    return ApiError(code, text, None if retry_after is None else {"retry_after": retry_after})


@dataclass(frozen=True, slots=True)
class Upload:
    """A file sent as a multipart part."""

    field: str
    filename: str
    content_type: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Described:
    """A result that Telegram answers together with a ``description`` (setWebhook...)."""

    result: Any
    description: str


def ok_body(result: Any) -> Json:
    """The JSON of a successful call."""
    if isinstance(result, Described):
        return {"ok": True, "result": result.result, "description": result.description}
    return {"ok": True, "result": result}


def decode_value(name: str, value: str) -> Any:
    """One form or query value: JSON unless the parameter is text by nature."""
    if name in STRING_PARAMS:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value  # "@channelname", a bare word...


async def read_params(request: web.Request) -> tuple[Json, dict[str, Upload]]:
    """All parameters of a request (query, then body) and its uploaded files."""
    params: Json = {k: decode_value(k, v) for k, v in request.query.items()}
    uploads: dict[str, Upload] = {}
    if request.content_type == "application/json":
        raw = await request.read()
        if raw.strip():
            try:
                body = json.loads(raw)
            except ValueError as exc:
                raise bad_request("can't parse JSON object") from exc
            if not isinstance(body, dict):
                raise bad_request("JSON object expected")
            params.update(body)
        return params, uploads
    form = await request.post()
    for name, value in form.items():
        if isinstance(value, str):
            params[name] = decode_value(name, value)
        elif isinstance(value, bytes | bytearray):
            params[name] = decode_value(name, bytes(value).decode(errors="replace"))
        else:
            data = value.file.read()
            uploads[name] = Upload(name, value.filename, value.content_type, data)
    return params, uploads


def int_param(params: Json, name: str, default: int | None = None) -> int | None:
    """An integer parameter, or 400 like Telegram when it is not one."""
    value = params.get(name)
    if value is None or value == "":
        return default
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise bad_request(f"wrong parameter {name} in request")
    try:
        return int(value)
    except ValueError as exc:
        raise bad_request(f"wrong parameter {name} in request") from exc


def chat_key(params: Json) -> int | str:
    """The ``chat_id`` parameter: an integer id or an ``@username``."""
    value = params.get("chat_id")
    if value is None or value == "":
        raise bad_request("chat_id is empty")
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise bad_request("chat not found")
    if isinstance(value, str) and not value.startswith("@"):
        try:
            return int(value)
        except ValueError as exc:
            raise bad_request("chat not found") from exc
    return value
