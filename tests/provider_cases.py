"""Shared pieces of the provider tests: the tools, a text sink, a fake sleep and a dead port."""

from __future__ import annotations

import socket

from bot.core.conversation import ToolSpec

CALCULATOR = ToolSpec(
    "calculator",
    "Evaluates an arithmetic expression.",
    {
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "e.g. 2+2"}},
        "required": ["expression"],
        "additionalProperties": False,
    },
)
CLOCK = ToolSpec("clock", "Tells the current time.", {"type": "object", "properties": {}})


def ignore(text: str) -> None:
    """A text sink that drops what it gets (to ask for a streamed answer)."""


class Naps:
    """A ``sleep`` that records the delays it was asked for and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def closed_port() -> int:
    """A local port that nothing listens on (bound once, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
