"""Ollama's native chat wire (``POST /api/chat``) for the fake server, from the API docs.

Requests are checked the way Ollama's Go server decodes them (tool-call arguments
must be an object, roles are system/user/assistant/tool); a broken request gets
Ollama's ``{"error": "..."}`` with status 400. ``stream`` defaults to true, as in
Ollama: the answer is NDJSON, one object per line, text spread over several lines,
tool calls whole in one line (Ollama sends no call ids), and a last line with
``done: true``, ``done_reason`` and the token counts. With ``stream: false`` the
answer is that last object carrying the whole message.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from aiohttp import web

from tests.fake_llm.openai_wire import split_text
from tests.fake_llm.script import CallTools, Reply, RequestView, Say, arguments_object

_ROLES = {"system", "user", "assistant", "tool"}


def request_problems(body: dict[str, Any]) -> list[str]:
    """What Ollama would reject in ``body`` (empty when the request is valid)."""
    problems: list[str] = []
    if not isinstance(body.get("model"), str) or not body["model"]:
        problems.append("model is required")
    messages = body.get("messages")
    if not isinstance(messages, list):
        return [*problems, "messages must be an array"]
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in _ROLES:
            problems.append(f"messages[{i}]: invalid role {role!r}")
            continue
        if not isinstance(message.get("content", ""), str):
            problems.append(f"json: cannot unmarshal messages[{i}].content into Go string")
        for j, call in enumerate(message.get("tool_calls") or []):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                problems.append(f"messages[{i}].tool_calls[{j}] needs function.name")
            elif not isinstance(function.get("arguments", {}), dict):
                problems.append(
                    f"json: cannot unmarshal messages[{i}].tool_calls[{j}].function.arguments "
                    "into Go value of type api.ToolCallFunctionArguments"
                )
    for i, tool in enumerate(body.get("tools") or []):
        function = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type") != "function" or not isinstance(function, dict):
            problems.append(f"tools[{i}] must be {{'type': 'function', 'function': {{...}}}}")
    if not isinstance(body.get("options", {}), dict):
        problems.append("options must be an object")
    return problems


class OllamaWire:
    """``POST /api/chat``."""

    name = "ollama"

    def __init__(self) -> None:
        self._counter = itertools.count(1)

    def accepts(self, path: str) -> bool:
        """True for the chat endpoint."""
        return path.rstrip("/") == "/api/chat"

    def view(self, path: str, query: dict[str, str], body: dict[str, Any]) -> RequestView:
        """Read the request leniently; ``render`` rejects what Ollama would."""
        raw = body.get("messages")
        messages = [m for m in raw if isinstance(m, dict)] if isinstance(raw, list) else []
        system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
        chat = [m for m in messages if m.get("role") != "system"]
        last = next((m for m in reversed(chat) if m.get("role") in ("user", "tool")), {})
        raw_tools = body.get("tools")
        tools = raw_tools if isinstance(raw_tools, list) else []
        return RequestView(
            model=str(body.get("model", "")),
            system=system,
            last_role=str(last.get("role", "user")),
            last_text=str(last.get("content", "")),
            tool_names=tuple(
                str(t.get("function", {}).get("name", "")) for t in tools if isinstance(t, dict)
            ),
            message_count=len(chat),
            stream=bool(body.get("stream", True)),
        )

    async def render(
        self, request: web.Request, view: RequestView, reply: Reply
    ) -> web.StreamResponse:
        """Answer ``reply`` as one object or as NDJSON lines."""
        body = await request.json()
        problems = request_problems(body)
        if problems:
            return web.json_response(self.error_body(400, "; ".join(problems)), status=400)
        if not isinstance(reply, Say | CallTools):
            raise TypeError(f"the wire cannot render {reply!r}")
        number = next(self._counter)
        calls = [
            {"function": {"name": name, "arguments": arguments_object(args)}}
            for name, args in (reply.calls if isinstance(reply, CallTools) else [])
        ]
        produced = reply.text + "".join(json.dumps(c) for c in calls)
        head = {"model": view.model, "created_at": f"2024-07-22T20:33:28.{number:06d}Z"}
        final = {
            **head,
            "done_reason": "stop",
            "done": True,
            "total_duration": 885_095_291,
            "load_duration": 3_753_500,
            "prompt_eval_count": len(json.dumps(body)) // 4,
            "prompt_eval_duration": 328_493_000,
            "eval_count": max(1, len(produced) // 4),
            "eval_duration": 552_222_000,
        }
        if not view.stream:
            message: dict[str, Any] = {"role": "assistant", "content": reply.text}
            if calls:
                message["tool_calls"] = calls
            return web.json_response({**head, "message": message, **final})
        lines: list[dict[str, Any]] = [
            {**head, "message": {"role": "assistant", "content": piece}, "done": False}
            for piece in split_text(reply.text)
        ]
        if calls:
            message = {"role": "assistant", "content": "", "tool_calls": calls}
            lines.append({**head, "message": message, "done": False})
        lines.append({**head, "message": {"role": "assistant", "content": ""}, **final})
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        for line in lines:
            await response.write(json.dumps(line).encode() + b"\n")
        await response.write_eof()
        return response

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """Ollama's error shape: ``{"error": "..."}``."""
        return {"error": message}
