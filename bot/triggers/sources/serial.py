"""Serial lines as events: ``on = "serial:PORT"`` reads a port of ``[hardware.serial]``
line by line and fires when a line matches the trigger's ``pattern`` (``re.search``).

One reader per port, however many triggers watch it: a thread that keeps the
port open (exclusively, as the serial tools open it), splits what arrives at
the port's ``line_ending`` and hands each line to the event loop. When the port
vanishes (unplugged, the TCP peer gone) the reader closes it and opens it again
with a growing wait (``FIRST_WAIT_S`` doubling up to ``MAX_WAIT_S``), so the
triggers resume when the device is back. While a trigger reads a port, the
``serial_send`` tool refuses that port with a sentence saying so.

A line is decoded as UTF-8 (bad bytes become U+FFFD) and cut to
``MAX_LINE_CHARS``; a line longer than the port's ``max_bytes`` is dropped up to
its end. The values for ``say`` are ``{port}``, ``{line}``, ``{match}`` (what the
pattern matched) and each named group of the pattern (``(?P<temp>\\d+)`` is
``{temp}``; a group that took no part is empty). The line is text from a device:
an ``ask`` turn treats it as untrusted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from bot.config.hardware import SerialPort
from bot.core.errors import ToolError, log_bug
from bot.core.messages import decode_text
from bot.hardware import serial_io
from bot.triggers.sources import Emit, SourceDeps, SourceState, cancel_all
from bot.triggers.spec import Event, Trigger

log = logging.getLogger(__name__)

MAX_LINE_CHARS = 1000
FIRST_WAIT_S = 0.5
MAX_WAIT_S = 30.0
QUEUE_LINES = 1000


class _Reader:
    """One port, read in its own thread until ``stop``; reopened after it vanishes."""

    def __init__(
        self, name: str, config: SerialPort, line: Callable[[str, str, float], None]
    ) -> None:
        self.name = name
        self.config = config
        self._line = line
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"serial trigger {name}", daemon=True
        )
        self.state: tuple[bool, str] = (False, f"opening {config.port}")

    def start(self) -> None:
        self._thread.start()

    async def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            await asyncio.to_thread(self._thread.join, 5.0)

    def _run(self) -> None:
        wait = FIRST_WAIT_S
        while not self._stopping.is_set():
            try:
                link = serial_io.open_port(self.config)
            except ToolError as exc:
                self.state = (False, f"{exc} (trying again in {wait:g} s)")
            except Exception:
                log.exception("serial trigger source: opening %s failed", self.config.port)
                self.state = (False, f"could not open {self.config.port} (see the log)")
            else:
                wait = FIRST_WAIT_S
                self._read(link)  # until it is lost or the reader stops
            if self._stopping.wait(wait):
                return
            wait = min(MAX_WAIT_S, wait * 2)

    def _read(self, link: Any) -> None:
        config = self.config
        ending = config.line_ending.encode("ascii")
        pending = bytearray()
        skipping = False  # in a line longer than max_bytes, dropped up to its end
        try:
            link.reset_input_buffer()  # what waited before PinClaw was reading is stale
            self.state = (True, f"reading {config.port}")
            log.info("serial trigger source: reading %s", config.port)
            while not self._stopping.is_set():
                pending += link.read(max(1, min(link.in_waiting, config.max_bytes)))
                while (at := pending.find(ending)) >= 0:
                    raw = bytes(pending[:at])
                    del pending[: at + len(ending)]
                    if not skipping:
                        self._line(self.name, _text(raw, config.line_ending), time.time())
                    skipping = False
                if len(pending) > config.max_bytes:
                    pending.clear()
                    skipping = True
        except OSError as exc:  # pyserial's SerialException is an OSError
            self.state = (False, f"{config.port} went away; opening it again")
            log.warning("serial trigger source: lost %s: %s", config.port, exc)
        except Exception:
            log.exception("serial trigger source: reading %s failed", config.port)
            self.state = (False, f"reading {config.port} failed (see the log); trying again")
        finally:
            try:
                link.close()
            except OSError:
                log.debug("closing %s failed", config.port, exc_info=True)


class SerialSource:
    """The ports the current serial triggers name, each read by one reader."""

    kind = "serial"

    def __init__(self, emit: Emit, ports: dict[str, SerialPort]) -> None:
        self._emit = emit
        self._ports = ports
        self._triggers: dict[str, list[Trigger]] = {}
        self._readers: dict[str, _Reader] = {}
        self._events: asyncio.Queue[tuple[str, Event]] = asyncio.Queue(QUEUE_LINES)
        self._sender: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dropped = 0

    async def start(self) -> None:
        """Start a reader for every watched port; a missing device is waited for."""
        if self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._sender = asyncio.create_task(self._send_loop(), name="serial trigger events")
        self._sync()

    async def stop(self) -> None:
        """Stop the readers (their ports close) and the events not handed over yet."""
        if self._loop is None:
            return
        self._loop = None
        readers, self._readers = list(self._readers.values()), {}
        for reader in readers:
            serial_io.hold(reader.config.port, None)
        await asyncio.gather(*(reader.stop() for reader in readers))
        if self._sender is not None:
            await cancel_all([self._sender])
            self._sender = None

    async def watch(self, triggers: Sequence[Trigger]) -> None:
        """Read the ports these triggers name, and stop reading the others."""
        wanted: dict[str, list[Trigger]] = {}
        for trigger in triggers:
            wanted.setdefault(trigger.subject, []).append(trigger)
        self._triggers = wanted
        gone = [self._readers.pop(name) for name in list(self._readers) if name not in wanted]
        for reader in gone:
            serial_io.hold(reader.config.port, None)
        await asyncio.gather(*(reader.stop() for reader in gone))
        if self._loop is not None:
            self._sync()

    def states(self) -> list[SourceState]:
        """One line per port: reading it, or why not (and that it is tried again)."""
        found = []
        for name, triggers in sorted(self._triggers.items()):
            reader = self._readers.get(name)
            if reader is None:
                ok, detail = False, _missing(name) if name not in self._ports else "not started"
            else:
                ok, detail = reader.state
                if ok:
                    detail += f" for {_who(triggers)}"
            found.append(SourceState(f"serial:{name}", ok, detail))
        return found

    def _sync(self) -> None:
        for name, triggers in self._triggers.items():
            config = self._ports.get(name)
            if config is None:
                continue  # checked at the start; states() says it
            serial_io.hold(config.port, _who(triggers))
            if name not in self._readers:
                reader = self._readers[name] = _Reader(name, config, self._line_threadsafe)
                reader.start()

    def _line_threadsafe(self, port: str, line: str, at: float) -> None:
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # a closed loop: PinClaw is stopping
            loop.call_soon_threadsafe(self._line, port, line, at)

    def _line(self, port: str, line: str, at: float) -> None:
        for trigger in self._triggers.get(port, []):
            match = re.search(trigger.pattern, line)
            if match is None:
                continue
            fields: dict[str, Any] = match.groupdict(default="")
            fields.update(port=port, line=line, match=match[0])
            event = Event(f"{port} sent: {line[:200]}", fields, untrusted=True, at=at)
            try:
                self._events.put_nowait((trigger.name, event))
            except asyncio.QueueFull:
                self._dropped += 1
                if self._dropped in (1, 100) or self._dropped % 1000 == 0:
                    log.warning("serial trigger source: %d lines dropped (too many)", self._dropped)

    async def _send_loop(self) -> None:
        while True:
            name, event = await self._events.get()
            try:
                await self._emit(name, event)
            except Exception as exc:
                log_bug(log, f"the serial event for trigger {name} was lost", exc)


def _text(raw: bytes, ending: str) -> str:
    if ending == "\n" and raw.endswith(b"\r"):  # Arduino's println sends \r\n
        raw = raw[:-1]
    return decode_text(raw)[:MAX_LINE_CHARS]


def _who(triggers: Sequence[Trigger]) -> str:
    names = ", ".join(sorted(t.name for t in triggers))
    return f"the trigger{'s' if len(triggers) > 1 else ''} {names}"


def _missing(name: str) -> str:
    return f"there is no serial port {name!r} in [hardware.serial]"


def build(deps: SourceDeps, emit: Emit) -> SerialSource:
    """The serial source for the ports of ``[hardware.serial]``."""
    return SerialSource(emit, dict(deps.app.loaded.config.hardware.serial))
