"""Sensirion SHT31 over I2C: one single-shot measurement, checked with its CRC-8.

Follows the SHT3x datasheet: send the single-shot command 0x2400 (high
repeatability, no clock stretching), wait for the conversion (15.5 ms at most),
then read six bytes: temperature word, CRC, humidity word, CRC. Until the
conversion is done the sensor NACKs the read, so a NACK is retried briefly.
``measure`` is blocking: run it behind the bus's gate.
"""

from __future__ import annotations

import errno
import time
from ctypes import string_at
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.core.errors import ToolError

if TYPE_CHECKING:
    from smbus2 import SMBus

SINGLE_SHOT_HIGH = (0x24, 0x00)
CONVERSION_S = 0.016  # datasheet table 4: 15.5 ms at high repeatability
RETRY_S = 0.005
READ_ATTEMPTS = 4

_NOT_READY = frozenset({errno.EREMOTEIO, errno.ENXIO})


@dataclass(frozen=True, slots=True)
class Sample:
    """One converted measurement."""

    temperature_c: float
    humidity_pct: float


def crc8(data: bytes) -> int:
    """Sensirion's CRC-8: polynomial 0x31, initial value 0xFF, no reflection or final XOR."""
    crc = 0xFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x31) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def convert(frame: bytes, address: int) -> Sample:
    """Check and convert the six bytes of a measurement."""
    for start in (0, 3):
        if crc8(frame[start : start + 2]) != frame[start + 2]:
            raise ToolError(
                f"the SHT31 at 0x{address:02x} sent a reading that failed its checksum; "
                "check the wiring"
            )
    raw_t = frame[0] << 8 | frame[1]
    raw_h = frame[3] << 8 | frame[4]
    return Sample(
        temperature_c=-45 + 175 * raw_t / 65535,
        humidity_pct=100 * raw_h / 65535,
    )


def measure(smbus: SMBus, address: int) -> Sample:
    """Take one single-shot measurement from the SHT31 at ``address`` (blocking)."""
    from smbus2 import i2c_msg

    smbus.i2c_rdwr(i2c_msg.write(address, SINGLE_SHOT_HIGH))
    time.sleep(CONVERSION_S)
    reply = i2c_msg.read(address, 6)
    for _ in range(READ_ATTEMPTS):
        try:
            smbus.i2c_rdwr(reply)
            break
        except OSError as exc:
            if exc.errno not in _NOT_READY:
                raise
            time.sleep(RETRY_S)
    else:
        raise ToolError(
            f"the SHT31 at 0x{address:02x} took the measurement command but never "
            "delivered a reading; check its power supply and wiring"
        )
    return convert(string_at(reply.buf, 6), address)
