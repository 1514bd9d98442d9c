"""The terminal as a chat channel, for ``pinclaw chat``.

Lines typed at the prompt become inbound messages; replies are printed, and
streamed as the model writes them. The next prompt appears only after the
reply, so the conversation reads in order. ``/quit``, ``/exit`` or end of input
(Ctrl-D) closes the channel.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import TextIO

from bot.channel import Inbox
from bot.conversation import TextSink
from bot.messages import InboundMessage, OutboundMessage

QUIT_WORDS = frozenset({"/quit", "/exit", ":q"})


class TerminalChannel:
    """Reads stdin on a helper thread and prints replies to stdout."""

    name = "terminal"

    def __init__(
        self,
        *,
        chat_id: str = "chat",
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        user: str = "owner",
    ) -> None:
        self._chat_id = chat_id
        self._stdin = stdin or sys.stdin
        self._stdout = stdout or sys.stdout
        self._user = user
        self._interactive = self._stdin.isatty() and self._stdout.isatty()
        self._ready = threading.Event()
        self._closed = asyncio.Event()
        self._thread: threading.Thread | None = None
        self._streamed = False
        self._count = 0

    async def start(self, inbox: Inbox) -> None:
        """Begin reading lines; idempotent."""
        if self._thread is not None:
            return
        loop = asyncio.get_running_loop()
        self._ready.set()
        self._thread = threading.Thread(
            target=self._read_lines, args=(loop, inbox), name="terminal-input", daemon=True
        )
        self._thread.start()

    async def stop(self) -> None:
        """Stop reading; the reader thread is a daemon and ends with the process."""
        self._closed.set()

    async def closed(self) -> None:
        """Wait until the person leaves (``/quit`` or end of input)."""
        await self._closed.wait()

    async def send(self, message: OutboundMessage) -> None:
        """Print a reply (or finish a streamed one) and show the next prompt."""
        if self._streamed:
            self._write("\n")
        else:
            self._write(f"{self._label()}{message.text}\n")
        self._streamed = False
        self._ready.set()

    def text_sink(self, message: InboundMessage) -> TextSink:
        """Print reply text as it arrives."""

        def sink(piece: str) -> None:
            if not self._streamed:
                self._write(self._label())
                self._streamed = True
            self._write(piece)

        return sink

    def _label(self) -> str:
        return "pinclaw> " if self._interactive else ""

    def _write(self, text: str) -> None:
        self._stdout.write(text)
        self._stdout.flush()

    def _read_lines(self, loop: asyncio.AbstractEventLoop, inbox: Inbox) -> None:
        while not self._closed.is_set():
            self._ready.wait()
            self._ready.clear()
            line = self._read_one()
            if line is None or line.strip().lower() in QUIT_WORDS:
                loop.call_soon_threadsafe(self._closed.set)
                return
            if not line.strip():
                self._ready.set()
                continue
            self._count += 1
            message = InboundMessage(
                channel=self.name,
                chat_id=self._chat_id,
                sender_id=self._user,
                sender_name=self._user,
                text=line.strip(),
                message_id=str(self._count),
            )
            asyncio.run_coroutine_threadsafe(inbox.put(message), loop)

    def _read_one(self) -> str | None:
        if self._interactive:
            try:
                return input("you> ")
            except (EOFError, KeyboardInterrupt):
                self._write("\n")
                return None
        line = self._stdin.readline()
        return line if line else None
