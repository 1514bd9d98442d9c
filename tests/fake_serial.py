"""Fake serial devices: a small sensor board on a pty pair, and the same board behind TCP.

``PtyDevice`` is what the kernel offers for a USB serial adapter: PinClaw opens
``device.path`` (``/dev/pts/N``) exactly as it would ``/dev/ttyUSB0``, with the
real pyserial, while a thread on the master side answers each line.
``TcpDevice`` answers the same commands on 127.0.0.1 for ``socket://`` ports.
Both are context managers that stop their thread and close every descriptor.

The board's commands (``Sensor.respond``): ``PING`` -> ``PONG``, ``TEMP?`` ->
``21.5``, ``ECHO text`` -> ``text``, ``SILENT`` -> nothing, ``FLOOD`` ->
``FLOOD_BYTES`` bytes with no line ending, ``PRINTLN`` -> ``OK`` ending in
``\\r\\n`` whatever the board's line ending (like Arduino's ``Serial.println``);
anything else -> ``ERR unknown command``. Replies end with the board's line
ending unless ``reply_ending`` says otherwise (a misconfigured port).
"""

from __future__ import annotations

import os
import select
import socket
import termios
import threading
import tty
from collections.abc import Callable
from types import TracebackType
from typing import Self

FLOOD_BYTES = 500


class Sensor:
    """The board's command set and line handling, shared by both transports."""

    def __init__(self, line_ending: str = "\n", reply_ending: str | None = None) -> None:
        self.line_ending = line_ending
        self.reply_ending = line_ending if reply_ending is None else reply_ending
        self.received: list[str] = []

    def respond(self, command: str) -> bytes:
        """What the board sends back for one command line."""
        end = self.reply_ending.encode()
        if command == "SILENT":
            return b""
        if command == "FLOOD":
            return b"x" * FLOOD_BYTES
        if command == "PRINTLN":
            return b"OK\r\n"
        answers = {"PING": "PONG", "TEMP?": "21.5"}
        if command.startswith("ECHO "):
            answers[command] = command.removeprefix("ECHO ")
        return answers.get(command, "ERR unknown command").encode() + end

    def reader(self) -> Callable[[bytes], bytes]:
        """A line splitter for one connection: feed it bytes, get the answers to whole lines."""
        pending = bytearray()
        end = self.line_ending.encode()

        def feed(data: bytes) -> bytes:
            pending.extend(data)
            out = b""
            while (at := pending.find(end)) >= 0:
                command = pending[:at].decode(errors="replace")
                del pending[: at + len(end)]
                self.received.append(command)
                out += self.respond(command)
            return out

        return feed


class _Device:
    """A thread serving file descriptors until ``__exit__`` wakes it through a pipe."""

    name = "fake-serial"

    def __init__(self, sensor: Sensor) -> None:
        self.sensor = sensor
        self._wake_r, self._wake_w = -1, -1
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _serve(self) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError


class PtyDevice(_Device):
    """A board on a pty: open ``path`` as the serial port. HUPCL starts on, as on a UART."""

    def __init__(self, line_ending: str = "\n", reply_ending: str | None = None) -> None:
        super().__init__(Sensor(line_ending, reply_ending))
        self.path = ""
        self._master, self._slave = -1, -1

    def __enter__(self) -> Self:
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # no echo, no newline translation: bytes as on a wire
        attributes = termios.tcgetattr(self._slave)
        attributes[2] |= termios.HUPCL
        termios.tcsetattr(self._slave, termios.TCSANOW, attributes)
        os.set_blocking(self._master, False)
        self.path = os.ttyname(self._slave)
        return super().__enter__()

    def hangs_up_on_close(self) -> bool:
        """Whether the port's HUPCL flag is set (closing it would drop DTR)."""
        return bool(termios.tcgetattr(self._slave)[2] & termios.HUPCL)

    def _serve(self) -> None:
        feed = self.sensor.reader()
        while True:
            ready, _, _ = select.select([self._master, self._wake_r], [], [])
            if self._wake_r in ready:
                return
            try:
                data = os.read(self._master, 4096)
                reply = feed(data)
                if reply:
                    os.write(self._master, reply)
            except BlockingIOError:
                continue  # a full buffer drops bytes, as a real UART would

    def _close(self) -> None:
        os.close(self._master)
        os.close(self._slave)


class TcpDevice(_Device):
    """The board behind a TCP port on 127.0.0.1: use ``url`` as the serial port."""

    name = "fake-serial-tcp"

    def __init__(self, line_ending: str = "\n") -> None:
        super().__init__(Sensor(line_ending))
        self.url = ""
        self._listener: socket.socket | None = None
        self._clients: dict[socket.socket, Callable[[bytes], bytes]] = {}

    def __enter__(self) -> Self:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"socket://127.0.0.1:{self._listener.getsockname()[1]}"
        return super().__enter__()

    def _serve(self) -> None:
        listener = self._listener
        assert listener is not None
        while True:
            watched = [listener.fileno(), self._wake_r, *(c.fileno() for c in self._clients)]
            ready, _, _ = select.select(watched, [], [])
            if self._wake_r in ready:
                return
            if listener.fileno() in ready:
                client, _ = listener.accept()
                self._clients[client] = self.sensor.reader()
            for client in [c for c in self._clients if c.fileno() in ready]:
                self._take(client)

    def _take(self, client: socket.socket) -> None:
        try:
            data = client.recv(4096)
            if data:
                client.sendall(self._clients[client](data))
                return
        except OSError:
            pass
        del self._clients[client]
        client.close()

    def _close(self) -> None:
        for client in self._clients:
            client.close()
        if self._listener is not None:
            self._listener.close()
