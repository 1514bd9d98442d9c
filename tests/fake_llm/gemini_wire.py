"""The Gemini wire (``/v1beta/models/{model}:generateContent`` and ``:streamGenerateContent``).

Written from Google's Gemini API reference, not from PinClaw's provider, so the
provider's tests catch mismatches. Requests are checked against rules the real
API enforces with a 400 ``INVALID_ARGUMENT``: unknown top-level fields, roles
other than ``user`` / ``model``, empty ``parts``, non-object ``args`` or
``response``, function responses that do not match the preceding function-call
turn one for one, and OBJECT parameters without properties.

``generateContent`` answers one GenerateContentResponse; ``streamGenerateContent``
answers several chunks, as SSE ``data:`` lines with ``alt=sse`` or as one JSON
array without it (as the real API does). Function calls arrive whole in one chunk.
``GeminiWire(gemini3=True)`` also sends call ``id``s and a ``thoughtSignature``
on the first call, as Gemini 3 models do.

Limitation: Gemini carries ``functionCall.args`` as an object, so a ``CallTools``
argument given as a raw ``str`` (deliberately broken JSON) is sent as the bare
string, which the real API never does.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from aiohttp import web

from tests.fake_llm.script import CallTools, Reply, RequestView, Say

_PATH = re.compile(
    r"/v1beta/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$"
)
_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_FIELDS = {
    "contents", "tools", "toolConfig", "tool_config", "safetySettings", "safety_settings",
    "systemInstruction", "system_instruction", "generationConfig", "generation_config",
    "cachedContent", "cached_content",
}  # fmt: skip


class GeminiWire:
    """Serves the generateContent methods the way generativelanguage.googleapis.com does."""

    name = "gemini"

    def __init__(self, *, gemini3: bool = False) -> None:
        self._gemini3 = gemini3
        self._ids = itertools.count(1)

    def accepts(self, path: str) -> bool:
        """True for ``generateContent`` and ``streamGenerateContent`` of any model."""
        return _PATH.search(path) is not None

    def view(self, path: str, query: dict[str, str], body: dict[str, Any]) -> RequestView:
        """Read the request into a wire-neutral view."""
        match = _PATH.search(path)
        assert match is not None
        contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
        last_role, last_text = "user", ""
        for content in reversed(contents):
            if content.get("role", "user") != "user":
                continue
            # The last part decides: responses followed by text read as user text.
            parts = _parts_of(content)
            if parts and isinstance(parts[-1].get("functionResponse"), dict):
                response = parts[-1]["functionResponse"].get("response")
                last_role, last_text = "tool", _response_text(response)
            else:
                last_text = "".join(str(p.get("text", "")) for p in parts)
            break
        system = body.get("systemInstruction") or body.get("system_instruction")
        tools = body.get("tools") or []
        return RequestView(
            model=match["model"],
            system="".join(str(p.get("text", "")) for p in _parts_of(system)),
            last_role=last_role,
            last_text=last_text,
            tool_names=tuple(
                str(d.get("name"))
                for t in tools
                for d in t.get("functionDeclarations") or t.get("function_declarations") or []
            ),
            message_count=len(contents),
            stream=match["method"] == "streamGenerateContent",
        )

    async def render(
        self, request: web.Request, view: RequestView, reply: Reply
    ) -> web.StreamResponse:
        """Answer ``reply`` as one response, SSE chunks, or a JSON array of chunks."""
        raw = await request.read()
        problem = request_problem(json.loads(raw))
        if problem:
            return web.json_response(self.error_body(400, problem), status=400)
        if not isinstance(reply, Say | CallTools):
            raise TypeError(f"the gemini wire cannot render {reply!r}")
        pieces = _pieces(reply.text) if view.stream else [reply.text] if reply.text else []
        groups: list[list[dict[str, Any]]] = [[{"text": p}] for p in pieces]
        if isinstance(reply, CallTools) and reply.calls:
            groups.append([self._call(i, name, args) for i, (name, args) in enumerate(reply.calls)])
        if not view.stream:
            groups = [[part for group in groups for part in group]]
        groups = groups or [[{"text": ""}]]
        prompt, produced = len(raw) // 4, 0
        chunks: list[dict[str, Any]] = []
        response_id = f"fake{next(self._ids):08d}"
        for index, parts in enumerate(groups):
            produced += max(1, len(json.dumps(parts)) // 4)
            candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
            if index == len(groups) - 1:
                candidate["finishReason"] = "STOP"
            usage = {
                "promptTokenCount": prompt,
                "candidatesTokenCount": produced,
                "totalTokenCount": prompt + produced,
            }
            chunks.append(
                {
                    "candidates": [candidate],
                    "usageMetadata": usage,
                    "modelVersion": view.model,
                    "responseId": response_id,
                }
            )
        if not view.stream:
            return web.json_response(chunks[0])
        if request.query.get("alt") != "sse":
            return web.json_response(chunks)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for chunk in chunks:
            await response.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
        await response.write_eof()
        return response

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The API's error object for an HTTP status."""
        default = "INTERNAL" if status >= 500 else "INVALID_ARGUMENT"
        return {
            "error": {"code": status, "message": message, "status": _STATUS.get(status, default)}
        }

    def _call(self, index: int, name: str, args: dict[str, Any] | str) -> dict[str, Any]:
        call: dict[str, Any] = {"name": name, "args": args}
        part: dict[str, Any] = {"functionCall": call}
        if self._gemini3:
            call["id"] = f"fc{next(self._ids):06d}"
            if index == 0:
                part["thoughtSignature"] = "ZmFrZS1zaWduYXR1cmU="
        return part


def request_problem(body: dict[str, Any]) -> str | None:
    """The message a real API 400 would carry for ``body``, or None if it is acceptable."""
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        return f'Invalid JSON payload received. Unknown name "{unknown[0]}": Cannot find field.'
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return "* GenerateContentRequest.contents: contents is not specified"
    for t, tool in enumerate(body.get("tools") or []):
        for d, declaration in enumerate(tool.get("functionDeclarations") or []):
            params = declaration.get("parameters")
            is_object = isinstance(params, dict) and str(params.get("type")).upper() == "OBJECT"
            if is_object and not params.get("properties"):
                where = f"tools[{t}].function_declarations[{d}].parameters.properties"
                return f"* GenerateContentRequest.{where}: should be non-empty for OBJECT type"
    calls_before = 0
    for index, content in enumerate(contents):
        where = f"* GenerateContentRequest.contents[{index}]"
        role = content.get("role", "user") if isinstance(content, dict) else None
        if role not in ("user", "model"):
            return f"{where}.role: Please use a valid role: user, model."
        parts = _parts_of(content)
        if not parts:
            return f"{where}.parts: contents.parts must not be empty."
        calls = [p["functionCall"] for p in parts if "functionCall" in p]
        responses = [p["functionResponse"] for p in parts if "functionResponse" in p]
        if any(not isinstance(c.get("args", {}), dict) for c in calls):
            return f"{where}: functionCall.args must be an object"
        if any(not isinstance(r.get("response"), dict) or not r.get("name") for r in responses):
            return f"{where}: functionResponse needs a name and an object response"
        if (responses or calls_before) and len(responses) != calls_before:
            return (
                "Please ensure that the number of function response parts is equal to "
                "the number of function call parts of the function call turn."
            )
        calls_before = len(calls)
    return None


def _parts_of(content: Any) -> list[dict[str, Any]]:
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p for p in parts or [] if isinstance(p, dict)]


def _response_text(response: Any) -> str:
    """A functionResponse's payload as text: its lone string field, else its JSON."""
    if isinstance(response, dict) and len(response) == 1:
        (value,) = response.values()
        if isinstance(value, str):
            return value
    return json.dumps(response)


def _pieces(text: str) -> list[str]:
    """Split ``text`` into about four pieces, as a real stream would."""
    size = max(1, -(-len(text) // 4))
    return [text[i : i + size] for i in range(0, len(text), size)]
