"""Tool calls written as XML in the text, for models without native tool calling.

The model is taught one syntax in the system prompt (``xml_instructions``)::

    <tool_call>{"name": "search", "arguments": {"query": "pinclaw"}}</tool_call>

``parse_tool_calls`` reads calls back from a reply and ``to_xml_messages``
renders a neutral conversation in the same syntax, tool results included.

Reading rules, kept simple so they can be predicted:
  * Every ``<tool_call>`` block is a call, even one the model meant as an
    example: a model in XML mode has no other use for the tag.
  * A block ends at ``</tool_call>``, or, when that is missing, at the next
    ``<tool_call>`` or the end of the text. A closing tag inside a JSON string
    does not end the block.
  * Code fences around or inside a block are ignored; a fence left empty once
    its blocks are removed goes too.
  * The JSON may be double-encoded, use ``parameters`` or ``args`` for
    ``arguments`` (missing means ``{}``), have trailing commas, or be a Python
    dict (single quotes, True/None: read with ``ast.literal_eval``, which only
    evaluates literals). Several objects in one block are several calls.
  * Anything else becomes a ``ToolCall`` with ``error`` set, saying plainly what
    was wrong and showing the syntax, for the agent to report back to the model.
"""

from __future__ import annotations

import ast
import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.core.conversation import ChatMessage, ToolCall, ToolSpec
from bot.providers.schema import clean_schema
from bot.providers.tool_args import decode_arguments

EXAMPLE_CALL = '<tool_call>{"name": "tool_name", "arguments": {"param": "value"}}</tool_call>'

_HOW_TO = f"""\
To use a tool, write a block like this, with the arguments as a JSON object:
{EXAMPLE_CALL}
Write one block per call; several blocks are fine. Then stop: the results come \
back in <tool_result> blocks and you continue from there. If no tool is needed, \
answer normally without any <tool_call> block."""

_OPEN = re.compile(r"<tool_call\s*>", re.IGNORECASE)
_CLOSE = re.compile(r"</tool_call\s*>", re.IGNORECASE)
_TAG = re.compile(r"<(/?)tool_call\s*>", re.IGNORECASE)
_JSON_SPECIAL = re.compile(r'["\\<]')
_FENCE_LINE = re.compile(r"^[ \t]*```", re.MULTILINE)
_FENCE_AT_END = re.compile(r"(?:^|\n)[ \t]*```[\w+-]*[ \t]*\s*\Z")
_FENCE_AT_START = re.compile(r"\A\s*```[ \t]*(?:\n|\Z)")
_FENCE_OPEN = re.compile(r"\A```[\w+-]*[ \t]*\n?")
_FENCE_CLOSE = re.compile(r"\n?[ \t]*```\Z")
_NEXT_CHAR = re.compile(r"\s*(\S)")
_NAME = re.compile(r"""["']name["']\s*:\s*["']([^"'\\\n]+)["']""")
_RESULT_CLOSE = re.compile(r"</(?=tool_result)", re.IGNORECASE)
_ARGUMENT_KEYS = ("arguments", "parameters", "args")
_FAILED = object()


@dataclass(frozen=True, slots=True)
class ParsedReply:
    """A model's reply split into the text for the user and the tool calls it holds."""

    text: str
    calls: tuple[ToolCall, ...] = ()


def xml_instructions(tools: Sequence[ToolSpec]) -> str:
    """The system-prompt section listing ``tools`` and teaching the call syntax."""
    if not tools:
        return ""
    lines = ["# Tools", "You can use these tools (name: description, then JSON schema):"]
    for tool in tools:
        schema = clean_schema(tool.parameters, "conservative")
        compact = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
        lines.append(f"- {tool.name}: {' '.join(tool.description.split())}")
        lines.append(f"  parameters: {compact}")
    lines.append(_HOW_TO)
    return "\n".join(lines)


def parse_tool_calls(text: str, id_prefix: str = "xml") -> ParsedReply:
    """Split ``text`` into prose and tool calls; never raises (see the module docstring)."""
    pieces: list[str] = []
    calls: list[ToolCall] = []
    pos, carry = 0, ""
    while (opening := _OPEN.search(text, pos)) is not None:
        pieces.append(carry + text[pos : opening.start()])
        values, rest, error, pos, closed = _read_block(text, opening.end())
        # Without a closing tag, text after the JSON is the model talking again.
        carry = rest if error is None and not closed else ""
        if error is not None:
            name = _NAME.search(rest)
            call_id = f"{id_prefix}-{len(calls) + 1}"
            calls.append(_failed(call_id, error, name[1] if name else None))
        for value in values:
            calls.append(_to_call(value, f"{id_prefix}-{len(calls) + 1}"))
    pieces.append(carry + text[pos:])
    return ParsedReply(_join_prose(pieces), tuple(calls))


def to_xml_messages(messages: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
    """Render ``messages`` for a model in XML mode: calls and results become text blocks."""
    out: list[ChatMessage] = []
    results: list[str] = []
    for message in messages:
        if message.role == "tool":
            results.append(_result_block(message))
            continue
        if results:
            out.append(ChatMessage(role="user", content="\n".join(results)))
            results = []
        if message.role == "assistant" and message.tool_calls:
            parts = [message.content] if message.content.strip() else []
            parts += [_call_block(call) for call in message.tool_calls]
            out.append(ChatMessage(role="assistant", content="\n".join(parts)))
        else:
            out.append(message)
    if results:
        out.append(ChatMessage(role="user", content="\n".join(results)))
    return tuple(out)


def _read_block(text: str, start: int) -> tuple[list[Any], str, str | None, int, bool]:
    """Read the block whose body starts at ``start``.

    Returns the JSON values read, the leftover body text, an error, where the
    block ends and whether it had a closing tag. The plain end (the first tag
    after ``start``) is tried first; the end found by skipping JSON strings
    only when the plain one does not give readable JSON.
    """
    plain = _block_end(text, _TAG.search(text, start))
    values, rest, error = _read_payload(text[start : plain[0]])
    if error is not None:
        aware = _block_end(text, _tag_outside_strings(text, start))
        if aware != plain:
            retry = _read_payload(text[start : aware[0]])
            if retry[2] is None:
                return (*retry, aware[1], aware[2])
    return values, rest, error, plain[1], plain[2]


def _block_end(text: str, tag: re.Match[str] | None) -> tuple[int, int, bool]:
    if tag is None:
        return len(text), len(text), False
    if tag[1]:  # a closing tag
        return tag.start(), tag.end(), True
    return tag.start(), tag.start(), False


def _tag_outside_strings(text: str, start: int) -> re.Match[str] | None:
    in_string = False
    pos = start
    while (special := _JSON_SPECIAL.search(text, pos)) is not None:
        char, pos = special[0], special.end()
        if char == "\\":
            pos += 1
        elif char == '"':
            in_string = not in_string
        elif not in_string and (tag := _TAG.match(text, special.start())) is not None:
            return tag
    return None


def _read_payload(payload: str) -> tuple[list[Any], str, str | None]:
    body = _FENCE_CLOSE.sub("", _FENCE_OPEN.sub("", payload.strip())).strip()
    if not body:
        return [], "", "the <tool_call> block is empty"
    decoder = json.JSONDecoder()
    values: list[Any] = []
    pos = 0
    while pos < len(body):
        try:
            value, pos = decoder.raw_decode(body, pos)
        except (ValueError, RecursionError) as exc:
            if values:
                break
            repaired = _repair(body)
            if repaired is _FAILED:
                reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
                return [], body, f"the text inside <tool_call> is not valid JSON ({reason})"
            return [repaired], "", None
        values.append(value)
        while pos < len(body) and body[pos].isspace():
            pos += 1
    return values, body[pos:], None


def _repair(body: str) -> Any:
    """``body`` read leniently (trailing commas, a Python dict), or ``_FAILED``."""
    try:
        return json.loads(_without_trailing_commas(body))
    except (ValueError, RecursionError):
        pass
    try:
        # Only literals are evaluated; the JSON round trip rejects sets, bytes, etc.
        return json.loads(json.dumps(ast.literal_eval(body)))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _FAILED


def _without_trailing_commas(body: str) -> str:
    out: list[str] = []
    in_string = escaped = False
    for index, char in enumerate(body):
        if escaped:
            escaped = False
        elif in_string:
            escaped = char == "\\"
            in_string = char != '"'
        elif char == '"':
            in_string = True
        elif char == "," and (after := _NEXT_CHAR.match(body, index + 1)) and after[1] in "}]":
            continue
        out.append(char)
    return "".join(out)


def _to_call(value: Any, call_id: str) -> ToolCall:
    if not isinstance(value, dict):
        problem = f'a call must be a JSON object with "name" and "arguments", not {_kind(value)}'
        return _failed(call_id, problem, None)
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        return _failed(call_id, 'the call has no "name" (the tool to run, as a string)', None)
    name = name.strip()
    raw = next((value[key] for key in _ARGUMENT_KEYS if key in value), None)
    if raw is not None and not isinstance(raw, str | Mapping):
        return _failed(call_id, f"the arguments must be a JSON object, not {_kind(raw)}", name)
    try:
        arguments, error = decode_arguments(raw)
    except RecursionError:  # a double-encoded string nested beyond what json.loads reads
        arguments, error = {}, "the arguments are nested too deeply"
    if error is not None:
        return _failed(call_id, error, name)
    return ToolCall(id=call_id, name=name, arguments=arguments)


def _failed(call_id: str, problem: str, name: str | None) -> ToolCall:
    target = f" to {name}" if name else ""
    error = (
        f"Your tool call{target} could not be read: {problem}. Write each call as {EXAMPLE_CALL}"
    )
    return ToolCall(id=call_id, name=name or "unknown", error=error)


def _kind(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    kinds = {str: "a string", int: "a number", float: "a number", list: "a list"}
    return kinds.get(type(value), "an object")


def _join_prose(pieces: list[str]) -> str:
    """The text around the blocks, without fences the blocks leave empty."""
    pieces = [_CLOSE.sub("", piece) for piece in pieces]
    last = len(pieces) - 1
    fences = 0
    for index in range(last):
        fences += len(_FENCE_LINE.findall(pieces[index]))
        opener = _FENCE_AT_END.search(pieces[index])
        if opener is None or fences % 2 == 0:  # an even count: that fence closes code
            continue
        after = index + 1
        while after < last and not pieces[after].strip():
            after += 1
        closer = _FENCE_AT_START.match(pieces[after])
        if closer is not None or (after == last and not pieces[after].strip()):
            pieces[index] = pieces[index][: opener.start()]
            pieces[after] = pieces[after][closer.end() :] if closer else ""
            fences -= 1
    return "\n\n".join(part for part in (piece.strip() for piece in pieces) if part)


def _call_block(call: ToolCall) -> str:
    payload = json.dumps(
        {"name": call.name, "arguments": dict(call.arguments)}, ensure_ascii=False, default=str
    )
    # "<\/" is the same JSON string, so no closing tag can appear in the payload.
    safe = payload.replace("</", "<\\/")
    return f"<tool_call>{safe}</tool_call>"


def _result_block(message: ChatMessage) -> str:
    name = html.escape(message.tool_name or "", quote=True)
    call_id = html.escape(message.tool_call_id or "", quote=True)
    status = "error" if message.is_error else "ok"
    # A result that itself contains "</tool_result>" must not end its block early.
    content = _RESULT_CLOSE.sub("<\\\\/", message.content)
    return f'<tool_result name="{name}" id="{call_id}" status="{status}">{content}</tool_result>'
