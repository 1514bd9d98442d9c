"""The OpenAI chat-completions wire for the fake server, written from the API reference.

Requests are checked the way api.openai.com checks them (a broken request gets the
400 error body the real API sends), then ``Say`` / ``CallTools`` replies are answered
as a ``chat.completion`` object or as ``chat.completion.chunk`` server-sent events:
text split over several deltas (``pieces`` of them, ``pause_s`` apart when the
reply asks for a slow model), each tool call's arguments split over several
fragments keyed by ``index``, a usage chunk when ``stream_options.include_usage``
asks for one, and ``data: [DONE]``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from aiohttp import web

from tests.fake_llm.script import CallTools, Reply, RequestView, Say, arguments_json

Call = tuple[str, str, str]  # (id, name, arguments as JSON text)

_ROLES = {"system", "developer", "user", "assistant", "tool"}
_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


def split_text(text: str, parts: int = 3) -> list[str]:
    """Split ``text`` into up to ``parts`` non-empty pieces (as a model streams tokens)."""
    if not text:
        return []
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def text_of(content: Any) -> str:
    """The text of a message ``content``: a string or a list of ``{"type": "text"}`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def request_problems(body: dict[str, Any]) -> list[str]:
    """What api.openai.com would reject in ``body`` (empty when the request is valid)."""
    problems: list[str] = []
    if not isinstance(body.get("model"), str):
        problems.append("you must provide a model parameter")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "'messages' must be a non-empty array"]
    open_ids: set[str] = set()
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        role = message.get("role") if isinstance(message, dict) else None
        if role not in _ROLES:
            problems.append(f"{where}.role must be one of {sorted(_ROLES)}")
            continue
        content, calls = message.get("content"), message.get("tool_calls")
        if role == "assistant" and calls is not None:
            problems += _call_problems(where, calls, open_ids)
            if content is not None and not isinstance(content, str | list):
                problems.append(f"{where}.content must be a string or null")
        elif not isinstance(content, str | list):
            problems.append(f"{where}.content must be a string or an array of parts")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in open_ids:
                problems.append(
                    f"{where}: messages with role 'tool' must be a response to a preceding "
                    "message with 'tool_calls' (unknown tool_call_id)"
                )
    for i, tool in enumerate(body.get("tools") or []):
        function = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type") != "function" or not isinstance(function, dict):
            problems.append(f"tools[{i}] must be {{'type': 'function', 'function': {{...}}}}")
        elif not isinstance(function.get("name"), str) or not isinstance(
            function.get("parameters", {}), dict
        ):
            problems.append(f"tools[{i}].function needs a name and an object of parameters")
    if "stream_options" in body and not body.get("stream"):
        problems.append("the 'stream_options' parameter is only allowed when 'stream' is enabled")
    return problems


def _call_problems(where: str, calls: Any, open_ids: set[str]) -> list[str]:
    if not isinstance(calls, list) or not calls:
        return [f"{where}.tool_calls must be a non-empty array"]
    problems = []
    for j, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if (
            not isinstance(function, dict)
            or call.get("type") != "function"
            or not isinstance(call.get("id"), str)
            or not isinstance(function.get("name"), str)
        ):
            problems.append(f"{where}.tool_calls[{j}] needs id, type 'function' and a name")
        elif not isinstance(function.get("arguments"), str):
            problems.append(f"{where}.tool_calls[{j}].function.arguments must be a string")
        else:
            open_ids.add(call["id"])
    return problems


class OpenAIWire:
    """``POST /v1/chat/completions`` (or any path ending in ``/chat/completions``)."""

    name = "openai"

    def __init__(self) -> None:
        self._counter = itertools.count(1)

    def accepts(self, path: str) -> bool:
        """True for the chat-completions endpoint under any prefix."""
        return path.rstrip("/").endswith("/chat/completions")

    def view(self, path: str, query: dict[str, str], body: dict[str, Any]) -> RequestView:
        """Read the request leniently; ``render`` rejects what the real API would."""
        raw = body.get("messages")
        messages = [m for m in raw if isinstance(m, dict)] if isinstance(raw, list) else []
        system = "\n".join(
            text_of(m.get("content")) for m in messages if m.get("role") in ("system", "developer")
        )
        chat = [m for m in messages if m.get("role") not in ("system", "developer")]
        last = next((m for m in reversed(chat) if m.get("role") in ("user", "tool")), {})
        raw_tools = body.get("tools")
        tools = raw_tools if isinstance(raw_tools, list) else []
        return RequestView(
            model=str(body.get("model", "")),
            system=system,
            last_role=str(last.get("role", "user")),
            last_text=text_of(last.get("content")),
            tool_names=tuple(
                str(t.get("function", {}).get("name", "")) for t in tools if isinstance(t, dict)
            ),
            message_count=len(chat),
            stream=bool(body.get("stream", False)),
        )

    async def render(
        self, request: web.Request, view: RequestView, reply: Reply
    ) -> web.StreamResponse:
        """Answer ``reply`` as a completion object or as a stream of chunks."""
        body = await request.json()
        problems = request_problems(body)
        if problems:
            return web.json_response(self.error_body(400, "; ".join(problems)), status=400)
        if not isinstance(reply, Say | CallTools):
            raise TypeError(f"the wire cannot render {reply!r}")
        number = next(self._counter)
        calls = [
            (f"call_{number}x{i}", name, arguments_json(args))
            for i, (name, args) in enumerate(reply.calls if isinstance(reply, CallTools) else [])
        ]
        produced = reply.text + "".join(name + args for _, name, args in calls)
        prompt_tokens = len(json.dumps(body)) // 4
        completion_tokens = max(1, len(produced) // 4)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        head = {
            "id": f"chatcmpl-fake{number}",
            "created": 1_700_000_000 + number,
            "model": view.model,
            "system_fingerprint": "fp_fake",
        }
        if not view.stream:
            return web.json_response(_completion(head, reply.text, calls, usage))
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        events = _chunks(head, reply.text, calls, usage if include_usage else None, reply.pieces)
        for event in events:
            if reply.pause_s and _carries_text(event):
                await asyncio.sleep(reply.pause_s)  # a slow model
            await response.write(f"data: {json.dumps(event)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The API's error shape: ``{"error": {message, type, param, code}}``."""
        fallback = ("server_error" if status >= 500 else "invalid_request_error", None)
        kind, code = _ERROR_TYPES.get(status, fallback)
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _completion(
    head: dict[str, Any], text: str, calls: list[Call], usage: dict[str, int]
) -> dict[str, Any]:
    """A non-streaming ``chat.completion`` object."""
    message: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in calls
        ]
    message["refusal"] = None
    finish = "tool_calls" if calls else "stop"
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
    return {**head, "object": "chat.completion", "choices": [choice], "usage": usage}


def _carries_text(event: dict[str, Any]) -> bool:
    choices = event.get("choices") or [{}]
    return bool(choices[0].get("delta", {}).get("content"))


def _chunks(
    head: dict[str, Any],
    text: str,
    calls: list[Call],
    usage: dict[str, int] | None,
    pieces: int = 3,
) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` events of a streamed answer, without ``[DONE]``."""
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": piece} for piece in split_text(text, pieces)]
    for i, (cid, name, args) in enumerate(calls):
        opening = {"index": i, "id": cid, "type": "function"}
        deltas.append({"tool_calls": [{**opening, "function": {"name": name, "arguments": ""}}]})
        deltas += [
            {"tool_calls": [{"index": i, "function": {"arguments": piece}}]}
            for piece in split_text(args, 4)
        ]
    finishes: list[str | None] = [None] * len(deltas)
    deltas.append({})
    finishes.append("tool_calls" if calls else "stop")
    extra = {"usage": None} if usage is not None else {}
    events = [
        {
            **head,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            **extra,
        }
        for delta, finish in zip(deltas, finishes, strict=True)
    ]
    if usage is not None:
        events.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": usage})
    return events
