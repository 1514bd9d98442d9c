"""Fake I2C chips for ``tests/fake_i2c.py``: an EEPROM-like register map, a BME280, an SHT31.

Each chip sees only the I2C transactions addressed to it (bytes written, a
read of N bytes) and behaves as its datasheet says: a BME280 takes writes as
register/value pairs and raises its ``measuring`` bit during a forced
measurement; an SHT31 NACKs reads until a measurement is ready and protects
each word with a CRC-8.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Mapping

from tests.fake_i2c import kernel_error


class RegisterChip:
    """A register map with an auto-incrementing pointer, like a 24C02 EEPROM."""

    def __init__(self, size: int = 256) -> None:
        self.memory = bytearray(size)
        self.pointer = 0
        self.quick_writes = 0

    def write(self, data: bytes) -> None:
        if not data:
            self.quick_writes += 1
            return
        self.pointer = data[0]
        for value in data[1:]:
            self.store(self.pointer, value)
            self.pointer = (self.pointer + 1) % len(self.memory)

    def read(self, length: int) -> bytes:
        out = bytearray()
        for _ in range(length):
            out.append(self.load(self.pointer))
            self.pointer = (self.pointer + 1) % len(self.memory)
        return bytes(out)

    def load(self, register: int) -> int:
        return self.memory[register]

    def store(self, register: int, value: int) -> None:
        self.memory[register] = value


class HangingChip(RegisterChip):
    """A chip that holds the bus (clock stretching forever) until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def read(self, length: int) -> bytes:
        self.release.wait(10)
        return super().read(length)


def sensirion_crc(word: bytes) -> int:
    """CRC-8 of the SHT3x datasheet (poly x^8+x^5+x^4+1, init 0xFF), as long division."""
    register = (int.from_bytes(word, "big") ^ 0xFF00) << 8
    for bit in range(23, 7, -1):
        if register & (1 << bit):
            register ^= 0x131 << (bit - 8)
    return register & 0xFF


class FakeSht31:
    """An SHT31 answering single-shot commands with CRC-protected words."""

    def __init__(self, raw_t: int, raw_h: int, *, busy_reads: int = 0) -> None:
        self.raw_t, self.raw_h = raw_t, raw_h
        self.busy_reads = busy_reads
        self.corrupt_crc = False
        self.commands: list[int] = []
        self._pending = False
        self._busy = 0

    def write(self, data: bytes) -> None:
        if not data:
            return  # a quick write: the address is acknowledged
        command = int.from_bytes(data, "big")
        if len(data) != 2 or command not in (0x2400, 0x30A2):
            raise kernel_error(errno.EREMOTEIO)  # an invalid command is not acknowledged
        self.commands.append(command)
        self._pending = command == 0x2400
        self._busy = self.busy_reads

    def read(self, length: int) -> bytes:
        if not self._pending:
            raise kernel_error(errno.EREMOTEIO)  # nothing measured: the read header is NACKed
        if self._busy:
            self._busy -= 1
            raise kernel_error(errno.EREMOTEIO)  # still converting
        self._pending = False
        frame = bytearray()
        for word in (self.raw_t.to_bytes(2, "big"), self.raw_h.to_bytes(2, "big")):
            frame += word + bytes([sensirion_crc(word)])
        if self.corrupt_crc:
            frame[5] ^= 0x01
        return bytes(frame[:length])


# Trimming parameters: T and P from the worked example in Bosch's BMP280 datasheet
# (same formulas in the BME280), H typical of a real BME280 dump.
BOSCH_EXAMPLE_TRIM: Mapping[str, int] = {
    "T1": 27504, "T2": 26435, "T3": -1000,
    "P1": 36477, "P2": -10685, "P3": 3024, "P4": 2855, "P5": 140,
    "P6": -7, "P7": 15500, "P8": -14600, "P9": 6000,
    "H1": 75, "H2": 362, "H3": 0, "H4": 313, "H5": 50, "H6": 30,
}  # fmt: skip

_WORDS = ("T1", "T2", "T3", "P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9")


class FakeBme280(RegisterChip):
    """A BME280: chip id, trimming NVM, forced mode, a ``measuring`` status bit.

    Writes are register/value pairs (datasheet 6.2.1). ``ctrl_hum`` takes effect
    when ``ctrl_meas`` is written; a forced measurement keeps ``measuring`` set
    for ``measuring_reads`` status reads (for ever if ``stuck``), then fills the
    data registers and returns to sleep mode.
    """

    def __init__(
        self,
        trim: Mapping[str, int],
        *,
        adc_t: int,
        adc_p: int,
        adc_h: int,
        measuring_reads: int = 2,
        chip_id: int = 0x60,
    ) -> None:
        super().__init__()
        self.adc = (adc_t, adc_p, adc_h)
        self.measuring_reads = measuring_reads
        self.stuck = False
        self.status_reads = 0
        self.measurements = 0
        self._remaining = 0
        self._osrs_h = 0
        self.memory[0xD0] = chip_id
        for i, name in enumerate(_WORDS):
            word = trim[name].to_bytes(2, "little", signed=name not in ("T1", "P1"))
            self.memory[0x88 + 2 * i : 0x8A + 2 * i] = word
        self.memory[0xA1] = trim["H1"]
        h4, h5 = trim["H4"] & 0xFFF, trim["H5"] & 0xFFF
        self.memory[0xE1:0xE8] = bytes(
            [
                *trim["H2"].to_bytes(2, "little", signed=True),
                trim["H3"],
                h4 >> 4,
                (h4 & 0x0F) | (h5 & 0x0F) << 4,
                h5 >> 4,
                trim["H6"] & 0xFF,
            ]
        )
        self.memory[0xF7:0xFF] = bytes([0x80, 0, 0, 0x80, 0, 0, 0x80, 0])  # reset values

    def write(self, data: bytes) -> None:
        if len(data) < 2:
            super().write(data)
            return
        for register, value in zip(data[::2], data[1::2], strict=False):
            self.store(register, value)
        if len(data) % 2:
            self.pointer = data[-1]

    def store(self, register: int, value: int) -> None:
        if register in (0xF2, 0xF5):
            self.memory[register] = value
        elif register == 0xF4:
            self.memory[register] = value
            self._osrs_h = self.memory[0xF2] & 0x07
            if value & 0x03 in (0x01, 0x02):
                self._remaining = self.measuring_reads
                if not self._remaining:
                    self._finish()

    def load(self, register: int) -> int:
        if register == 0xF3:
            self.status_reads += 1
            if not self._remaining:
                return 0x00
            if not self.stuck:
                self._remaining -= 1
                if not self._remaining:
                    self._finish()  # done while this read still saw the bit set
            return 0x08
        return self.memory[register]

    def _finish(self) -> None:
        adc_t, adc_p, adc_h = self.adc
        osrs_t, osrs_p = self.memory[0xF4] >> 5, (self.memory[0xF4] >> 2) & 0x07
        if not osrs_t:
            adc_t = 0x80000
        if not osrs_p:
            adc_p = 0x80000
        if not self._osrs_h:
            adc_h = 0x8000
        self.memory[0xF7:0xFF] = bytes(
            [
                *(adc_p >> 12, (adc_p >> 4) & 0xFF, (adc_p & 0x0F) << 4),
                *(adc_t >> 12, (adc_t >> 4) & 0xFF, (adc_t & 0x0F) << 4),
                *(adc_h >> 8, adc_h & 0xFF),
            ]
        )
        self.memory[0xF4] &= 0xFC  # back to sleep mode
        self.measurements += 1
