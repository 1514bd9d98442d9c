"""Serial devices through pyserial: list the machine's ports, send one line, read one reply.

Every exchange opens the port, writes a line, reads the reply up to the line
ending and closes the port again. Holding nothing open between calls survives
unplugging and replugging, leaves the port to other programs in between, and
needs no shutdown step; an open costs a few milliseconds. Device paths are
opened with pyserial's ``exclusive=True`` (an ``flock``), so two programs that
both ask for exclusive access never talk over each other.

One catch with opening per call: most Arduino boards reset when DTR rises, and
Linux drops DTR when a port is closed (the ``HUPCL`` flag), so every open would
reset the board and its bootloader would swallow the line. After opening a
device path PinClaw clears ``HUPCL``: DTR stays up after the close and the next
open does not reset the board (only the first open after plugging in does).

pyserial is imported inside the functions only: PinClaw without serial ports
never loads it. Library and kernel errors become sentences in one place
(``_open_error``, ``_exchange_error``). Run the blocking calls through the port's
``DeviceGate`` (``SerialLink.send``): off the loop, one at a time, with a deadline.

A serial trigger keeps its port open to read it (``bot.triggers.sources.serial``)
and says so with ``hold``; meanwhile ``SerialLink.send`` refuses that port with a
sentence naming the triggers, rather than an "in use by another program".
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.config.hardware import HardwareConfig, SerialPort
from bot.core.errors import ToolError
from bot.hardware.blocking import DeviceGate

if TYPE_CHECKING:
    from serial import SerialBase  # type: ignore[import-untyped, unused-ignore]

log = logging.getLogger(__name__)

_POLL_S = 0.1
"""pyserial's read timeout: how far past its deadline a read may run, not the reply timeout."""
_CONNECT_S = 5.0
"""pyserial's fixed connect timeout for ``socket://`` ports."""
_ENDING_NAMES = {"\n": "\\n (LF)", "\r\n": "\\r\\n (CR LF)", "\r": "\\r (CR)"}
_MISSING = frozenset({errno.ENOENT, errno.ENODEV, errno.ENXIO})
_GONE = frozenset({errno.EIO, errno.ENODEV, errno.ENXIO, errno.EPIPE})
_IN_USE = frozenset({errno.EBUSY, errno.EAGAIN, errno.EWOULDBLOCK})
_NOT_SERIAL = frozenset({errno.ENOTTY, errno.EISDIR, errno.EINVAL})
_HELD: dict[str, str] = {}
"""Ports kept open by a reader in this process (as configured), and who reads them."""


@dataclass(frozen=True, slots=True)
class PortInfo:
    """A serial port the system knows, with its USB identity where it has one."""

    device: str
    description: str
    vid: str | None
    pid: str | None
    serial_number: str | None
    manufacturer: str | None

    @property
    def usb_id(self) -> str | None:
        """``vid:pid`` as lsusb shows it (``2341:0043``), or None for a non-USB port."""
        return f"{self.vid}:{self.pid}" if self.vid and self.pid else None


@dataclass(frozen=True, slots=True)
class Reply:
    """What a device answered: the text without its line ending, and whether it was whole.

    ``complete`` is False when the reply stopped at ``max_bytes`` or the timeout
    before the line ending arrived; ``note`` then says which, for the model.
    """

    text: str
    complete: bool = True
    note: str = ""


@dataclass(frozen=True, slots=True)
class SerialLink:
    """One configured port: its name, its settings and the gate its calls go through."""

    name: str
    config: SerialPort
    gate: DeviceGate

    async def send(self, text: str) -> Reply:
        """``send_line`` off the event loop, one call at a time on this port."""
        reader = holder(self.config.port)
        if reader is not None:
            raise ToolError(
                f"the serial port {self.name} is kept open by {reader}, which reads its lines; "
                "PinClaw cannot send to it meanwhile (disable or remove that trigger first)"
            )
        return await self.gate.run(send_line, self.config, text)


def list_ports() -> list[PortInfo]:
    """The serial ports this machine has now (USB adapters, the Pi's UART...), by device."""
    from serial.tools import list_ports as system_ports  # type: ignore[import-untyped, unused-ignore]

    found = []
    for info in system_ports.comports():
        description = "" if info.description in (None, "n/a") else str(info.description)
        found.append(
            PortInfo(
                device=str(info.device),
                description=description,
                vid=None if info.vid is None else f"{info.vid:04x}",
                pid=None if info.pid is None else f"{info.pid:04x}",
                serial_number=info.serial_number,
                manufacturer=info.manufacturer,
            )
        )
    return sorted(found, key=lambda port: port.device)


def is_device_path(port: str) -> bool:
    """Whether ``port`` is a device path (``/dev/ttyUSB0``) rather than a URL (``socket://``)."""
    return "://" not in port


def is_present(port: str) -> bool | None:
    """Whether a device path exists now; None for a URL, which only an open can tell."""
    return os.path.exists(port) if is_device_path(port) else None


def port_key(port: str) -> str:
    """What identifies a port's device: the real path of a device path, else the URL."""
    return os.path.realpath(port) if is_device_path(port) else port


def hold(port: str, reader: str | None) -> None:
    """Note that ``reader`` ("the trigger temp-alert") keeps ``port`` open; None: no more."""
    if reader is None:
        _HELD.pop(port, None)
    else:
        _HELD[port] = reader


def holder(port: str) -> str | None:
    """Who keeps ``port`` (or another name for its device) open to read it, if anyone."""
    key = port_key(port)
    return next((who for held, who in _HELD.items() if held == port or port_key(held) == key), None)


def gate_timeout(config: SerialPort, call_timeout_s: float) -> float:
    """The gate's deadline for one exchange: ``call_timeout_s``, or longer if the port needs it."""
    connect = 0.0 if is_device_path(config.port) else _CONNECT_S
    return max(call_timeout_s, connect + 2 * config.timeout_s + 1)


def make_links(hardware: HardwareConfig) -> dict[str, SerialLink]:
    """A link per configured port; names for the same device share one gate."""
    gates: dict[str, DeviceGate] = {}
    links = {}
    for name, config in hardware.serial.items():
        port = config.port
        key = os.path.realpath(port) if is_device_path(port) else port
        if key not in gates or port.startswith("loop://"):  # each loop:// is its own loopback
            gates[key] = DeviceGate(name, gate_timeout(config, hardware.call_timeout_s))
        links[name] = SerialLink(name, config, gates[key])
    return links


def send_line(config: SerialPort, text: str) -> Reply:
    """Open the port, write ``text`` and the line ending, read one reply line, close.

    Blocking: call it through a ``DeviceGate``. Raises ``ToolError`` when the port
    cannot be used or nothing at all arrives within ``timeout_s``.
    """
    data = text.encode("utf-8") + config.line_ending.encode("ascii")
    link = open_port(config)
    try:
        link.reset_input_buffer()  # what arrived before this call is not its reply
        _write(link, config, data)
        return _read_reply(link, config)
    except OSError as exc:  # pyserial's SerialException is an OSError
        raise _exchange_error(config.port, exc) from None
    finally:
        try:
            link.close()
        except OSError:
            log.debug("closing %s failed", config.port, exc_info=True)


def open_port(config: SerialPort) -> SerialBase:
    """The port opened (exclusively, if a device path) with a short read timeout;
    ``ToolError`` with a sentence when it cannot be."""
    import serial  # type: ignore[import-untyped, unused-ignore]

    device = is_device_path(config.port)
    extra = {"exclusive": True} if device and os.name == "posix" else {}
    try:
        link = serial.serial_for_url(
            config.port,
            baudrate=config.baud,
            timeout=min(_POLL_S, config.timeout_s),
            write_timeout=config.timeout_s,
            **extra,
        )
    except (OSError, ValueError) as exc:
        raise _open_error(config.port, exc) from None
    if device:
        _keep_dtr_on_close(link)
    return link


def _keep_dtr_on_close(link: SerialBase) -> None:
    if os.name != "posix":
        return
    import termios

    try:
        attributes = termios.tcgetattr(link.fileno())
        if attributes[2] & termios.HUPCL:
            attributes[2] &= ~termios.HUPCL
            termios.tcsetattr(link.fileno(), termios.TCSANOW, attributes)
    except (termios.error, OSError):
        log.debug("could not clear HUPCL on %s", link.port, exc_info=True)


def _write(link: SerialBase, config: SerialPort, data: bytes) -> None:
    import serial  # type: ignore[import-untyped, unused-ignore]

    try:
        link.write(data)
    except serial.SerialTimeoutException:
        link.reset_output_buffer()  # else the close waits for the stuck bytes to drain
        raise ToolError(
            f"{config.port} did not take the line within {config.timeout_s:g} s; "
            "is the device reading (or holding flow control)?"
        ) from None


def _read_reply(link: SerialBase, config: SerialPort) -> Reply:
    ending = config.line_ending.encode("ascii")
    limit = config.max_bytes
    deadline = time.monotonic() + config.timeout_s
    received = bytearray()
    searched = 0
    while True:
        end = received.find(ending, searched)
        if end >= 0:
            return Reply(_decode(bytes(received[:end]), config.line_ending))
        searched = max(0, len(received) - len(ending) + 1)
        if len(received) >= limit:
            return Reply(_decode(bytes(received)), False, _cut_note(config))
        if time.monotonic() >= deadline:
            return _late(bytes(received), config)
        wanted = min(max(link.in_waiting, 1), limit - len(received))
        received += link.read(wanted)


def _decode(data: bytes, ending: str = "") -> str:
    text = data.decode("utf-8", errors="replace")
    # Arduino's println ends lines with \r\n: with the default \n, drop the stray \r.
    return text[:-1] if ending == "\n" and text.endswith("\r") else text


def _cut_note(config: SerialPort) -> str:
    return (
        f"the reply was cut at {config.max_bytes} bytes (max_bytes) before a line ending; "
        "this is its start"
    )


def _late(received: bytes, config: SerialPort) -> Reply:
    wait = f"{config.timeout_s:g} s"
    if not received:
        raise ToolError(
            f"no answer from {config.port} within {wait} "
            f"(check that the device knows this command and runs at {config.baud} baud)"
        )
    expected = _ENDING_NAMES[config.line_ending]
    note = f"the reply did not end with {expected} within {wait}; this is what arrived"
    others = [name for code, name in _ENDING_NAMES.items() if code.encode() in received]
    if others:
        note += f" (it contains {others[0]} line endings: check line_ending for this port)"
    return Reply(_decode(received), False, note)


def _open_error(port: str, exc: BaseException) -> ToolError:
    code = _errno(exc)
    if isinstance(exc, ValueError):
        message = (
            f"{port} is not a port PinClaw can open; "
            "use a device path like /dev/ttyUSB0, socket://host:port or loop://"
        )
    elif code in _MISSING and is_device_path(port):
        message = f"{port} is not there; is the device plugged in?"
    elif code in (errno.EACCES, errno.EPERM):
        message = (
            f"PinClaw may not open {port} (permission denied); add the user it runs as to "
            f"the dialout group (sudo usermod -aG dialout {_user()}) and restart it"
        )
    elif code in _IN_USE:
        message = f"{port} is in use by another program; close that program and try again"
    elif code in _NOT_SERIAL:
        message = f"{port} is not a serial port"
    elif code == errno.ECONNREFUSED:
        message = f"nothing is listening at {port}"
    elif isinstance(_cause(exc), socket.gaierror):
        message = f"the host in {port} cannot be found"
    elif isinstance(_cause(exc), TimeoutError):
        message = f"{port} did not accept a connection within {_CONNECT_S:g} s"
    else:
        log.warning("could not open serial port %s", port, exc_info=exc)
        message = f"could not open {port}: {_reason(code)}"
    return ToolError(message)


def _exchange_error(port: str, exc: OSError) -> ToolError:
    code = _errno(exc)
    if code in _GONE or "returned no data" in str(exc):
        return ToolError(f"{port} went away during the exchange; was it unplugged?")
    if "disconnected" in str(exc):
        return ToolError(f"{port} closed the connection before answering")
    log.warning("serial exchange with %s failed", port, exc_info=exc)
    return ToolError(f"talking to {port} failed: {_reason(code)}")


def _cause(exc: BaseException) -> BaseException:
    """The OS error pyserial wrapped, when it kept one."""
    return exc.__cause__ or exc.__context__ or exc


def _errno(exc: BaseException) -> int | None:
    for candidate in (exc, _cause(exc)):
        if isinstance(candidate, OSError) and candidate.errno is not None:
            return candidate.errno
        if candidate.args and isinstance(candidate.args[0], int):  # termios.error
            return candidate.args[0]
    return None


def _user() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return "USER"


def _reason(code: int | None) -> str:
    return os.strerror(code) if code is not None and code > 0 else "an unexpected error"
