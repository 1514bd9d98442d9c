"""What the fake model says: scripted replies, and an autopilot for unscripted requests."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Say:
    """Answer with plain text (which may contain XML tool-call markup).

    Streamed (OpenAI wire), the text comes in ``pieces`` deltas, each after ``pause_s``
    seconds: a slow model, for tests of what a chat shows while it writes.
    """

    text: str
    pieces: int = 3
    pause_s: float = 0.0


@dataclass(frozen=True)
class CallTools:
    """Ask for tools. Each call is ``(name, arguments)``; a ``str`` argument is sent raw,
    so a test can send arguments that are not valid JSON."""

    calls: list[tuple[str, dict[str, Any] | str]]
    text: str = ""
    pieces: int = 3
    pause_s: float = 0.0  # as for ``Say``: how the text before the calls is streamed


@dataclass(frozen=True)
class Fail:
    """Answer with an HTTP error in the wire format's error shape."""

    status: int
    message: str = "injected failure"
    retry_after: float | None = None


@dataclass(frozen=True)
class Stall:
    """Hold the request for ``seconds`` before answering with ``then``."""

    seconds: float
    then: Reply | None = None


@dataclass(frozen=True)
class Hold:
    """Hold the request until the test sets ``gate`` (at most ``timeout_s``), then answer
    with ``then``: a turn kept running for as long as a test needs, without timing."""

    gate: threading.Event
    then: Reply | None = None
    timeout_s: float = 30.0


@dataclass(frozen=True)
class Raw:
    """Answer with exactly these bytes, bypassing the wire format: for bodies no
    well-behaved server would send (not JSON, wrong shapes, an error event mid-stream).

    With ``chunks`` the body is streamed piece by piece, each piece flushed as it is
    written; then the response ends properly, or with ``cut=True`` the connection is
    dropped before the end of the chunked body, so the client sees a broken stream.
    ``body`` is ignored when ``chunks`` is given.
    """

    status: int = 200
    body: bytes | str = b""
    content_type: str = "application/json"
    chunks: list[bytes | str] | None = None
    cut: bool = False
    headers: dict[str, str] = field(default_factory=dict)


Reply = Say | CallTools | Fail | Stall | Hold | Raw


@dataclass(frozen=True)
class RequestView:
    """A wire-neutral reading of a request, for the autopilot and for assertions."""

    model: str
    system: str
    last_role: str  # "user" or "tool"
    last_text: str  # the last user text, or the last tool result
    tool_names: tuple[str, ...]
    message_count: int
    stream: bool


@dataclass
class Recorded:
    """One request the fake received."""

    wire: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    size: int
    view: RequestView
    arrived: float = 0.0
    reply: Reply | None = field(default=None)


_ARITHMETIC = re.compile(r"([\d(][\d\s.+\-*/()%]*[\d)])")
_XML_TOOL_LINE = re.compile(r"^- (\w+): ", re.MULTILINE)
_XML_RESULT = re.compile(r"<tool_result[^>]*>(.*?)</tool_result>", re.DOTALL)


def autopilot(view: RequestView) -> Reply:
    """A deterministic stand-in for a model when nothing is scripted.

    - after a tool result: report it ("The tool said: ...");
    - "time" / "date" with a ``clock`` tool: call it;
    - an arithmetic expression with a ``calculator`` tool: call it;
    - otherwise greet or echo.

    Tools described in the system prompt for XML tool calls count too: calls are
    then written as ``<tool_call>`` text and results read from ``<tool_result>``.
    """
    xml = "<tool_call>" in view.system and not view.tool_names
    tools = tuple(_XML_TOOL_LINE.findall(view.system)) if xml else view.tool_names
    results = _XML_RESULT.findall(view.last_text) if xml else []
    if view.last_role == "tool" or results:
        return Say(f"The tool said: {results[-1] if results else view.last_text}")
    text = view.last_text.lower()
    call: tuple[str, dict[str, Any]] | None = None
    match = _ARITHMETIC.search(view.last_text)
    if "clock" in tools and ("time" in text or "date" in text):
        call = ("clock", {})
    elif "calculator" in tools and match and any(op in match.group(1) for op in "+-*/"):
        call = ("calculator", {"expression": match.group(1).strip()})
    if call and xml:
        payload = json.dumps({"name": call[0], "arguments": call[1]})
        return Say(f"<tool_call>{payload}</tool_call>")
    if call:
        return CallTools([call])
    if text.strip() in {"hi", "hello", "hey"}:
        return Say("Hello! How can I help?")
    return Say(f"You said: {view.last_text}")


def arguments_json(arguments: dict[str, Any] | str) -> str:
    """Arguments as the JSON string OpenAI-style wires carry (raw strings pass through)."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def arguments_object(arguments: dict[str, Any] | str) -> Any:
    """Arguments as an object for wires that carry objects (raw strings pass through)."""
    return arguments
