"""The terminal as a chat channel, for ``pinclaw chat``.

Lines typed at the prompt become inbound messages; replies are printed, and
streamed as the model writes them. The next prompt appears only after the
reply, so the conversation reads in order. On a terminal (not in a pipe) a
spinner turns while the model has not written anything yet, and what tools
run shows as a dim line. ``run`` returns when the person
leaves with ``/quit``, ``/exit`` or end of input (Ctrl-D), or when whatever read
the replies went away (``pinclaw chat | head``): ``reader_gone`` says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import sys
import threading
import unicodedata
from collections.abc import AsyncIterator
from typing import TextIO

from bot.approvals.texts import parse_choice
from bot.core.channel import ButtonPress, ChannelStatus, ChatTarget, DeliveryError, Inbox
from bot.core.chat_commands import CommandInfo
from bot.core.markdown import render
from bot.core.messages import Attachment, Button, InboundMessage, OutboundFile, OutboundMessage
from bot.security.visible import escape

QUIT_WORDS = frozenset({"/quit", "/exit", ":q"})
SPINNER_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
SPINNER_EVERY_S = 0.1
DIM, PLAIN, CLEAR_LINE = "\x1b[2m", "\x1b[0m", "\r\x1b[K"


class TerminalChannel:
    """Reads stdin on a helper thread and prints replies to stdout."""

    name = "terminal"
    paste_limit = 0  # a line is read whole
    own_commands = (CommandInfo("quit", "Leave the chat (also /exit, or Ctrl-D)"),)

    def __init__(
        self,
        *,
        chat_id: str = "chat",
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        user: str = "owner",
        stream: bool = True,
    ) -> None:
        self._chat_id = chat_id
        self._stdin = stdin or sys.stdin
        self._stdout = stdout or sys.stdout
        self._user = user
        self._interactive = self._stdin.isatty() and self._stdout.isatty()
        self._stream = stream
        self._spinner = Spinner(self._stdout)
        self._ready = threading.Event()
        self._closed = asyncio.Event()
        self._thread: threading.Thread | None = None
        self._streamed = False
        self._answer: tuple[str, dict[str, str]] | None = None  # (ref, choice -> action id)
        self._approvals = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self.reader_gone = False
        self.status = ChannelStatus(self.name)

    async def run(self, inbox: Inbox) -> None:
        """Read lines until the person leaves (the reader thread is a daemon thread)."""
        self._loop = loop = asyncio.get_running_loop()
        self._ready.set()
        self._thread = threading.Thread(
            target=self._read_lines, args=(loop, inbox), name="terminal-input", daemon=True
        )
        self._thread.start()
        self.status.connected("")
        try:
            await self._closed.wait()
        finally:
            self._closed.set()

    @contextlib.asynccontextmanager
    async def typing(self, message: InboundMessage) -> AsyncIterator[None]:
        """A spinner until the model writes (on a terminal only; a pipe gets nothing)."""
        if self._interactive:
            self._spinner.start()
        try:
            yield
        finally:
            self._spinner.stop()

    async def fetch(self, attachment: Attachment) -> bytes:
        """The terminal has no attachments."""
        raise DeliveryError("the terminal has no attachments")

    async def send(self, message: OutboundMessage) -> None:
        """Print a reply (or finish a streamed one) and show the next prompt."""
        if self._streamed:
            self._write("\n")
        else:
            self._write(f"{self._label()}{message.text}\n")
        self._streamed = False
        self._ready.set()

    async def post_approval(
        self, target: ChatTarget, text: str, buttons: tuple[Button, ...]
    ) -> str:
        """Show the request, whole (the terminal has no length limit, and its arguments
        print exactly as written); the next line typed (y / a / n) is the answer."""
        if self._streamed:
            self._write("\n")
            self._streamed = False
        choices = {b.action_id.rpartition(":")[2]: b.action_id for b in buttons}
        keys = " / ".join(
            k for k, c in (("y = once", "once"), ("a = always", "always")) if c in choices
        )
        request = text.rsplit("\n\n_Reply_", 1)[0]  # typing /approve is not needed here
        self._write(f"{plain_request(request)}\nAllow it? {keys} / n = deny [y/a/N] ")
        self._approvals += 1
        ref = str(self._approvals)
        self._answer = (ref, choices)
        self._ready.set()
        return ref

    async def close_approval(self, target: ChatTarget, message_ref: str, text: str) -> None:
        """Print the record the request became (the last line of ``text``)."""
        if self._answer is not None and self._answer[0] == message_ref:
            self._answer = None
            self._write("\n")
        self._write(f"{_plain(text.rsplit(chr(10), 1)[-1])}\n")

    def direct_target(self, user_id: str) -> ChatTarget | None:
        """The terminal has only one chat."""
        return None

    async def send_file(self, file: OutboundFile) -> None:
        """The terminal runs where the file is: say where to find it (and its caption)."""
        if self._streamed:
            self._write("\n")
            self._streamed = False
        size = len(file.data)
        shown = f"{size / 1024:.1f} KB" if size >= 1024 else f"{size} bytes"
        caption = f"{_plain(file.caption)}\n" if file.caption else ""
        self._write(f"{caption}[file] {file.name} ({shown}): {file.path or file.name}\n")

    def text_sink(self, message: InboundMessage) -> TerminalReply | None:
        """Print reply text as it arrives (None when ``[agent] stream`` is off)."""
        return TerminalReply(self) if self._stream else None

    def show_text(self, piece: str) -> None:
        """Print a piece of the reply, after the label if it is the first."""
        if not self._streamed:
            self._write(self._label())
            self._streamed = True
        self._write(piece)

    def show_status(self, line: str) -> None:
        """Print what runs as a dim line (terminal only), then spin until more text comes."""
        if not self._interactive:
            return
        if self._streamed:
            self._write("\n")
            self._streamed = False
        self._write(f"{DIM}{_plain(line)}{PLAIN}\n")
        self._spinner.start()

    def _label(self) -> str:
        return "pinclaw> " if self._interactive else ""

    def _write(self, text: str) -> None:
        try:
            self._spinner.stop()
            self._stdout.write(text)
            self._stdout.flush()
        except BrokenPipeError:  # nobody reads the replies any more: leave, as after /quit
            self.reader_gone = True
            self._ready.set()
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._closed.set)

    def _read_lines(self, loop: asyncio.AbstractEventLoop, inbox: Inbox) -> None:
        while not self._closed.is_set():
            self._ready.wait()
            self._ready.clear()
            line = self._read_one()
            answer = self._answer
            if answer is not None:  # this line answers an approval, it is not a message
                self._answer = None
                self._press(loop, inbox, answer, line or "")
                if line is None:
                    loop.call_soon_threadsafe(self._closed.set)
                    return
                continue
            if line is None or line.strip().lower() in QUIT_WORDS:
                loop.call_soon_threadsafe(self._closed.set)
                return
            if not line.strip():
                self._ready.set()
                continue
            message = InboundMessage(
                channel=self.name,
                chat_id=self._chat_id,
                sender_id=self._user,
                sender_name=self._user,
                text=line.strip(),
            )
            asyncio.run_coroutine_threadsafe(inbox.put(message), loop)

    def _press(
        self,
        loop: asyncio.AbstractEventLoop,
        inbox: Inbox,
        answer: tuple[str, dict[str, str]],
        line: str,
    ) -> None:
        """Turn the typed answer into a button press for the approval service."""
        ref, choices = answer
        choice = parse_choice(line) or "deny"
        action = choices.get(choice) or choices.get("deny", "")
        press = ButtonPress(self.name, self._chat_id, self._user, self._user, action, ref)

        async def deliver() -> None:
            reply = await inbox.press(press)
            if not reply.text.startswith(("Allowed", "Always", "Denied")):
                self._write(f"{reply.text}\n")

        asyncio.run_coroutine_threadsafe(deliver(), loop)

    def _read_one(self) -> str | None:
        if self._interactive:
            try:
                # An approval question ends with its own "[y/N] " prompt.
                return input("" if self._answer is not None else "you> ")
            except (EOFError, KeyboardInterrupt):
                self._write("\n")
                return None
        line = self._stdin.readline()
        return line if line else None


class TerminalReply:
    """A streamed reply in the terminal: printed as it comes; the end is the next prompt."""

    def __init__(self, channel: TerminalChannel) -> None:
        self._channel = channel

    def __call__(self, piece: str) -> None:
        """Print a piece of the reply."""
        self._channel.show_text(piece)

    def status(self, line: str) -> None:
        """Show what runs, as a dim line."""
        self._channel.show_status(line)

    async def finish(self, message: OutboundMessage) -> None:
        """End the reply (print it whole if nothing was streamed)."""
        await self._channel.send(message)

    def close(self) -> None:
        """Nothing to stop: what was printed stays."""

    async def abandon(self, note: str) -> None:
        """Nothing to change: the terminal prints the /stop answer itself."""

    async def withdraw(self) -> None:
        """Nothing to take back: what was printed stays."""


class Spinner:
    """A spinner on the current line while the model has not written yet; ``stop`` clears it."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start turning (again); idempotent."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._spin(), name="spinner")

    def stop(self) -> None:
        """Stop and clear the line, if it was turning."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            self._stream.write(CLEAR_LINE)
            self._stream.flush()

    async def _spin(self) -> None:
        for frame in itertools.cycle(SPINNER_FRAMES):
            self._stream.write(f"\r{DIM}{frame} thinking…{PLAIN}")
            self._stream.flush()
            await asyncio.sleep(SPINNER_EVERY_S)


_ITALIC = re.compile(r"(?<!\w)_(\S(?:.*?\S)?)_(?!\w)")


def _plain(text: str) -> str:
    """Markdown emphasis and code marks removed, for a terminal (snake_case kept)."""
    return _ITALIC.sub(r"\1", text.replace("**", "").replace("`", ""))


class _PlainStyle:
    """Markdown as plain terminal text: marks dropped, code exactly as written."""

    def text(self, raw: str) -> str:
        return raw

    def bold(self, inner: str) -> str:
        return inner

    def italic(self, inner: str) -> str:
        return inner

    def strike(self, inner: str) -> str:
        return inner

    def code(self, raw: str) -> str:
        return raw

    def link(self, inner: str, url: str) -> str:
        return f"{inner} ({url})"

    def pre(self, raw: str, language: str) -> str:
        return raw

    def heading(self, inner: str) -> str:
        return inner


def plain_request(text: str) -> str:
    """An approval request for the terminal: the arguments exactly as the core wrote them
    (``**`` or ``_x_`` in a command stay), and no control character reaches the terminal."""
    shown = render(text, _PlainStyle())
    return "".join(
        escape(c) if c not in "\n\t" and unicodedata.category(c) == "Cc" else c for c in shown
    )
