"""A fake Linux I2C kernel: the ``ioctl`` smbus2 calls on ``/dev/i2c-N``, with fake chips.

There is no ``i2c-stub`` module here, so the fake sits exactly at the kernel
boundary: ``install`` replaces ``smbus2.smbus2.ioctl`` and the real ``SMBus``
opens a temp file per bus. The fake decodes the ctypes structs smbus2 passes
(``I2C_SLAVE``/``I2C_SLAVE_FORCE``, ``I2C_FUNCS``, ``I2C_SMBUS`` with its data
union, ``I2C_RDWR`` with its ``i2c_msg`` array), turns every SMBus transfer into
plain I2C messages as the kernel's emulation does for the Pi's controller, and
hands them to the chip at that address (chips: ``tests/fake_i2c_chips.py``).
No chip means a NACK: ``OSError(121)``, as on a Raspberry Pi.

Each bus records which open file did what, so a test can tell whether two
callers' transactions ever interleaved.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest
import smbus2.smbus2 as kernel_abi
from smbus2 import I2cFunc

BCM2835_FUNCS = int(I2cFunc.I2C | I2cFunc.SMBUS_EMUL)
"""What the Raspberry Pi's i2c-bcm2835 driver reports: no SMBus block reads."""

RDWR_MAX_MESSAGES = 42  # I2C_RDWR_IOCTL_MAX_MSGS in linux/i2c-dev.h

_NEEDS: dict[tuple[int, bool], int] = {
    (kernel_abi.I2C_SMBUS_QUICK, False): I2cFunc.SMBUS_QUICK,
    (kernel_abi.I2C_SMBUS_QUICK, True): I2cFunc.SMBUS_QUICK,
    (kernel_abi.I2C_SMBUS_BYTE, False): I2cFunc.SMBUS_WRITE_BYTE,
    (kernel_abi.I2C_SMBUS_BYTE, True): I2cFunc.SMBUS_READ_BYTE,
    (kernel_abi.I2C_SMBUS_BYTE_DATA, False): I2cFunc.SMBUS_WRITE_BYTE_DATA,
    (kernel_abi.I2C_SMBUS_BYTE_DATA, True): I2cFunc.SMBUS_READ_BYTE_DATA,
    (kernel_abi.I2C_SMBUS_WORD_DATA, False): I2cFunc.SMBUS_WRITE_WORD_DATA,
    (kernel_abi.I2C_SMBUS_WORD_DATA, True): I2cFunc.SMBUS_READ_WORD_DATA,
    (kernel_abi.I2C_SMBUS_PROC_CALL, False): I2cFunc.SMBUS_PROC_CALL,
    (kernel_abi.I2C_SMBUS_BLOCK_DATA, False): I2cFunc.SMBUS_WRITE_BLOCK_DATA,
    (kernel_abi.I2C_SMBUS_BLOCK_DATA, True): I2cFunc.SMBUS_READ_BLOCK_DATA,
    (kernel_abi.I2C_SMBUS_I2C_BLOCK_DATA, False): I2cFunc.SMBUS_WRITE_I2C_BLOCK,
    (kernel_abi.I2C_SMBUS_I2C_BLOCK_DATA, True): I2cFunc.SMBUS_READ_I2C_BLOCK,
}


def kernel_error(code: int) -> OSError:
    """The ``OSError`` the real ``fcntl.ioctl`` raises for ``-code``."""
    return OSError(code, os.strerror(code))


class Chip(Protocol):
    """A device on the bus, seen as the I2C transactions addressed to it."""

    def write(self, data: bytes) -> None:
        """Bytes written after the address (none for a quick write); raise to NACK."""

    def read(self, length: int) -> bytes:
        """Exactly ``length`` bytes for a read; raise ``kernel_error(EREMOTEIO)`` to NACK."""


@dataclass(frozen=True, slots=True)
class Message:
    """One ``i2c_msg``: a write of ``data`` or a read of ``length`` bytes."""

    address: int
    read: bool
    data: bytes = b""
    length: int = 0


@dataclass
class FakeBus:
    """One ``/dev/i2c-N``: its chips, the addresses kernel drivers hold, and a log."""

    number: int
    path: Path
    funcs: int = BCM2835_FUNCS
    chips: dict[int, Chip] = field(default_factory=dict)
    claimed: set[int] = field(default_factory=set)
    log: list[tuple[int, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, address: int, chip: Chip) -> None:
        """Put ``chip`` on the bus at ``address``."""
        self.chips[address] = chip

    def transfer(self, session: int, messages: list[Message]) -> list[bytes]:
        """Run one combined transaction; stop at the first NACK, like the controller."""
        with self.lock:
            replies = []
            for message in messages:
                kind = f"read {message.length}" if message.read else f"write {message.data.hex()}"
                self.log.append((session, f"0x{message.address:02x} {kind}"))
                chip = self.chips.get(message.address)
                if chip is None:
                    raise kernel_error(errno.EREMOTEIO)
                if message.read:
                    reply = chip.read(message.length)
                    assert len(reply) == message.length, "a fake chip answered the wrong length"
                    replies.append(reply)
                else:
                    chip.write(message.data)
                    replies.append(b"")
            return replies

    def interleaved(self) -> bool:
        """Whether one open file's traffic was ever split by another's."""
        done: set[int] = set()
        current: int | None = None
        for session, _ in self.log:
            if session == current:
                continue
            if session in done:
                return True
            if current is not None:
                done.add(current)
            current = session
        return False


@dataclass
class _Open:
    bus: FakeBus
    session: int
    address: int = 0


class FakeI2c:
    """The kernel side of every fake bus; ``install`` it, then open ``path_pattern``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path_pattern = str(root / "i2c-{bus}")
        self._files: dict[tuple[int, int], FakeBus] = {}
        self._open: dict[int, _Open] = {}
        self._sessions = 0
        self._lock = threading.Lock()

    def add_bus(self, number: int, *, funcs: int = BCM2835_FUNCS) -> FakeBus:
        """Create ``/dev/i2c-<number>`` (a temp file) and its bus."""
        path = Path(self.path_pattern.format(bus=number))
        path.touch()
        stat = path.stat()
        bus = FakeBus(number, path, funcs)
        self._files[(stat.st_dev, stat.st_ino)] = bus
        return bus

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Route smbus2's ioctls here for the rest of the test."""
        monkeypatch.setattr(kernel_abi, "ioctl", self.ioctl)

    def ioctl(self, fd: int, request: int, arg: Any = 0, mutate_flag: bool = True) -> int:
        """What ``i2cdev_ioctl`` does for ``request`` on the file ``fd``."""
        handle = self._handle(fd, fresh=request == kernel_abi.I2C_FUNCS)
        if request in (kernel_abi.I2C_SLAVE, kernel_abi.I2C_SLAVE_FORCE):
            if not 0 <= arg <= 0x7F:
                raise kernel_error(errno.EINVAL)
            if request == kernel_abi.I2C_SLAVE and arg in handle.bus.claimed:
                raise kernel_error(errno.EBUSY)
            handle.address = arg
            return 0
        if request == kernel_abi.I2C_FUNCS:
            arg.value = handle.bus.funcs
            with handle.bus.lock:
                handle.bus.log.append((handle.session, "open"))
            return 0
        if request == kernel_abi.I2C_PEC:
            return 0
        if request == kernel_abi.I2C_SMBUS:
            return self._smbus(handle, arg)
        if request == kernel_abi.I2C_RDWR:
            return self._rdwr(handle, arg)
        raise kernel_error(errno.ENOTTY)

    def _handle(self, fd: int, *, fresh: bool) -> _Open:
        stat = os.fstat(fd)
        bus = self._files.get((stat.st_dev, stat.st_ino))
        if bus is None:
            raise kernel_error(errno.ENOTTY)  # not an i2c-dev file: inappropriate ioctl
        with self._lock:
            handle = self._open.get(fd)
            if fresh or handle is None or handle.bus is not bus:
                self._sessions += 1
                handle = self._open[fd] = _Open(bus, self._sessions)
            return handle

    def _smbus(self, handle: _Open, arg: Any) -> int:
        reading = arg.read_write == kernel_abi.I2C_SMBUS_READ
        size, command = arg.size, arg.command
        needed = _NEEDS.get((size, reading))
        if needed is None or not handle.bus.funcs & needed:
            raise kernel_error(errno.EOPNOTSUPP)
        data = arg.data.contents  # union i2c_smbus_data: byte, word, block[34]
        addr = handle.address
        write_only = [Message(addr, read=False, data=bytes([command]))]
        if size == kernel_abi.I2C_SMBUS_QUICK:
            self._run(handle, [Message(addr, read=reading)])
        elif size == kernel_abi.I2C_SMBUS_BYTE:
            if reading:
                data.byte = self._run(handle, [Message(addr, read=True, length=1)])[0][0]
            else:
                self._run(handle, write_only)
        elif size == kernel_abi.I2C_SMBUS_BYTE_DATA:
            if reading:
                data.byte = self._read_after(handle, command, 1)[0]
            else:
                self._write(handle, command, bytes([data.byte]))
        elif size == kernel_abi.I2C_SMBUS_WORD_DATA:
            if reading:
                data.word = int.from_bytes(self._read_after(handle, command, 2), "little")
            else:
                self._write(handle, command, data.word.to_bytes(2, "little"))
        elif size == kernel_abi.I2C_SMBUS_PROC_CALL:
            sent = bytes([command]) + data.word.to_bytes(2, "little")
            call = [Message(addr, read=False, data=sent), Message(addr, read=True, length=2)]
            data.word = int.from_bytes(self._run(handle, call)[1], "little")
        elif size == kernel_abi.I2C_SMBUS_I2C_BLOCK_DATA:
            length = data.block[0]
            if not 1 <= length <= kernel_abi.I2C_SMBUS_BLOCK_MAX:
                raise kernel_error(errno.EINVAL)
            if reading:
                data.block[1 : length + 1] = list(self._read_after(handle, command, length))
            else:
                self._write(handle, command, bytes(data.block[1 : length + 1]))
        else:  # I2C_SMBUS_BLOCK_DATA: the length travels on the wire
            self._smbus_block(handle, command, data, reading)
        return 0

    def _smbus_block(self, handle: _Open, command: int, data: Any, reading: bool) -> None:
        if not reading:
            length = data.block[0]
            if not 1 <= length <= kernel_abi.I2C_SMBUS_BLOCK_MAX:
                raise kernel_error(errno.EINVAL)
            self._write(handle, command, bytes(data.block[0 : length + 1]))
            return
        reply = self._read_after(handle, command, 1 + kernel_abi.I2C_SMBUS_BLOCK_MAX)
        if not 1 <= reply[0] <= kernel_abi.I2C_SMBUS_BLOCK_MAX:
            raise kernel_error(errno.EPROTO)
        data.block[0 : reply[0] + 1] = list(reply[: reply[0] + 1])

    def _rdwr(self, handle: _Open, arg: Any) -> int:
        count: int = arg.nmsgs
        if not 0 < count <= RDWR_MAX_MESSAGES:
            raise kernel_error(errno.EINVAL)
        raw = [arg.msgs[i] for i in range(count)]
        messages = [
            Message(m.addr, read=True, length=m.len)
            if m.flags & kernel_abi.I2C_M_RD
            else Message(m.addr, read=False, data=ctypes.string_at(m.buf, m.len))
            for m in raw
        ]
        replies = handle.bus.transfer(handle.session, messages)
        for m, reply in zip(raw, replies, strict=True):
            if m.flags & kernel_abi.I2C_M_RD:
                ctypes.memmove(m.buf, reply, m.len)
        return count

    def _run(self, handle: _Open, messages: list[Message]) -> list[bytes]:
        return handle.bus.transfer(handle.session, messages)

    def _write(self, handle: _Open, command: int, payload: bytes) -> None:
        self._run(handle, [Message(handle.address, read=False, data=bytes([command]) + payload)])

    def _read_after(self, handle: _Open, command: int, length: int) -> bytes:
        """Write the register, repeated start, read: one combined transaction."""
        addr = handle.address
        return self._run(
            handle,
            [
                Message(addr, read=False, data=bytes([command])),
                Message(addr, read=True, length=length),
            ],
        )[1]
