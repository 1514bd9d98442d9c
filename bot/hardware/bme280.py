"""Bosch BME280 over I2C: one forced-mode measurement, compensated with the datasheet maths.

Follows the BME280 datasheet (BST-BME280-DS002): check the chip id, read the
trimming parameters, start a forced measurement with x1 oversampling, wait
until the ``measuring`` status bit clears, read the burst 0xF7..0xFE, and
apply the integer compensation formulas of section 4.2.3 (32-bit temperature
and humidity, 64-bit pressure). ``measure`` is blocking: run it behind the
bus's gate.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.core.errors import ToolError

if TYPE_CHECKING:
    from smbus2 import SMBus

CHIP_ID = 0x60
REG_CHIP_ID = 0xD0
REG_CALIB_TP = 0x88  # 0x88..0xA1: dig_T1..dig_P9, a reserved byte, dig_H1
REG_CALIB_H = 0xE1  # 0xE1..0xE7: dig_H2..dig_H6
REG_CTRL_HUM = 0xF2
REG_STATUS = 0xF3
REG_CTRL_MEAS = 0xF4
REG_CONFIG = 0xF5
REG_DATA = 0xF7  # 0xF7..0xFE: press[3], temp[3], hum[2]

OVERSAMPLE_X1 = 0b001
MODE_FORCED = 0b01
STATUS_MEASURING = 0x08
STATUS_IM_UPDATE = 0x01

MEASURE_TYPICAL_S = 0.008  # datasheet 9.1: 1 + 2 + 2.5 + 2.5 ms at x1 oversampling
MEASURE_LIMIT_S = 0.1
POLL_S = 0.002

_OTHER_CHIPS = {0x56: "a BMP280", 0x57: "a BMP280", 0x58: "a BMP280", 0x55: "a BMP180"}
_SKIPPED_TP = 0x80000
_SKIPPED_H = 0x8000


@dataclass(frozen=True, slots=True)
class Calibration:
    """The trimming parameters ``dig_*`` burnt into each chip."""

    t1: int
    t2: int
    t3: int
    p1: int
    p2: int
    p3: int
    p4: int
    p5: int
    p6: int
    p7: int
    p8: int
    p9: int
    h1: int
    h2: int
    h3: int
    h4: int
    h5: int
    h6: int

    @classmethod
    def parse(cls, tp: bytes, h: bytes) -> Calibration:
        """Decode 26 bytes from 0x88 and 7 bytes from 0xE1 (datasheet table 16)."""
        words = [int.from_bytes(tp[i : i + 2], "little") for i in range(0, 24, 2)]
        signed = [_signed(w, 16) for w in words]
        return cls(
            t1=words[0],
            t2=signed[1],
            t3=signed[2],
            p1=words[3],
            p2=signed[4],
            p3=signed[5],
            p4=signed[6],
            p5=signed[7],
            p6=signed[8],
            p7=signed[9],
            p8=signed[10],
            p9=signed[11],
            h1=tp[25],
            h2=_signed(h[0] | h[1] << 8, 16),
            h3=h[2],
            # dig_H4 and dig_H5 are signed 12-bit values sharing the nibbles of 0xE5.
            h4=_signed(h[3] << 4 | (h[4] & 0x0F), 12),
            h5=_signed(h[5] << 4 | h[4] >> 4, 12),
            h6=_signed(h[6], 8),
        )


@dataclass(frozen=True, slots=True)
class Compensated:
    """One compensated measurement."""

    temperature_c: float
    pressure_hpa: float
    humidity_pct: float


def compensate(cal: Calibration, adc_t: int, adc_p: int, adc_h: int) -> Compensated:
    """The datasheet's integer compensation of raw ADC values."""
    var1 = (((adc_t >> 3) - (cal.t1 << 1)) * cal.t2) >> 11
    var2 = (((((adc_t >> 4) - cal.t1) * ((adc_t >> 4) - cal.t1)) >> 12) * cal.t3) >> 14
    t_fine = var1 + var2
    temperature = (t_fine * 5 + 128) >> 8  # 0.01 °C
    return Compensated(
        temperature_c=temperature / 100,
        pressure_hpa=_pressure_q24_8(cal, t_fine, adc_p) / 256 / 100,
        humidity_pct=_humidity_q22_10(cal, t_fine, adc_h) / 1024,
    )


def measure(smbus: SMBus, address: int) -> Compensated:
    """Take one forced-mode measurement from the BME280 at ``address`` (blocking)."""
    chip = smbus.read_byte_data(address, REG_CHIP_ID)
    if chip != CHIP_ID:
        other = _OTHER_CHIPS.get(chip, "another chip")
        raise ToolError(
            f"the device at 0x{address:02x} is not a BME280: its chip id is 0x{chip:02x} "
            f"({other}); check the sensor's driver and address in the config"
        )
    _wait_until_clear(smbus, address, STATUS_IM_UPDATE, "load its calibration")
    cal = Calibration.parse(
        bytes(smbus.read_i2c_block_data(address, REG_CALIB_TP, 26)),
        bytes(smbus.read_i2c_block_data(address, REG_CALIB_H, 7)),
    )
    # ctrl_hum takes effect only when ctrl_meas is written, so it goes first.
    smbus.write_byte_data(address, REG_CTRL_HUM, OVERSAMPLE_X1)
    smbus.write_byte_data(address, REG_CONFIG, 0x00)  # IIR filter off
    ctrl_meas = OVERSAMPLE_X1 << 5 | OVERSAMPLE_X1 << 2 | MODE_FORCED
    smbus.write_byte_data(address, REG_CTRL_MEAS, ctrl_meas)
    time.sleep(MEASURE_TYPICAL_S)
    _wait_until_clear(smbus, address, STATUS_MEASURING, "finish its measurement")
    raw = bytes(smbus.read_i2c_block_data(address, REG_DATA, 8))
    adc_p = raw[0] << 12 | raw[1] << 4 | raw[2] >> 4
    adc_t = raw[3] << 12 | raw[4] << 4 | raw[5] >> 4
    adc_h = raw[6] << 8 | raw[7]
    if _SKIPPED_TP in (adc_t, adc_p) or adc_h == _SKIPPED_H:
        raise ToolError(
            f"the BME280 at 0x{address:02x} returned no measurement (its data registers "
            "still hold their reset values); try again, and check its power supply"
        )
    return compensate(cal, adc_t, adc_p, adc_h)


def _wait_until_clear(smbus: SMBus, address: int, bit: int, doing: str) -> None:
    deadline = time.monotonic() + MEASURE_LIMIT_S
    while smbus.read_byte_data(address, REG_STATUS) & bit:
        if time.monotonic() > deadline:
            raise ToolError(
                f"the BME280 at 0x{address:02x} did not {doing} within "
                f"{MEASURE_LIMIT_S * 1000:.0f} ms; check its power supply"
            )
        time.sleep(POLL_S)


def _pressure_q24_8(cal: Calibration, t_fine: int, adc_p: int) -> int:
    """Pressure in Pa as Q24.8 (the datasheet's 64-bit integer formula)."""
    var1 = t_fine - 128000
    var2 = var1 * var1 * cal.p6
    var2 += (var1 * cal.p5) << 17
    var2 += cal.p4 << 35
    var1 = ((var1 * var1 * cal.p3) >> 8) + ((var1 * cal.p2) << 12)
    var1 = (((1 << 47) + var1) * cal.p1) >> 33
    if var1 == 0:
        return 0  # the datasheet's guard against dividing by zero (a chip with no trimming)
    p = 1048576 - adc_p
    p = _c_divide(((p << 31) - var2) * 3125, var1)
    var1 = (cal.p9 * (p >> 13) * (p >> 13)) >> 25
    var2 = (cal.p8 * p) >> 19
    return ((p + var1 + var2) >> 8) + (cal.p7 << 4)


def _humidity_q22_10(cal: Calibration, t_fine: int, adc_h: int) -> int:
    """Relative humidity in % as Q22.10 (the datasheet's 32-bit integer formula)."""
    x = t_fine - 76800
    scaled = ((adc_h << 14) - (cal.h4 << 20) - cal.h5 * x + 16384) >> 15
    factor = (
        ((((x * cal.h6) >> 10) * (((x * cal.h3) >> 11) + 32768)) >> 10) + 2097152
    ) * cal.h2 + 8192
    x = scaled * (factor >> 14)
    x -= ((((x >> 15) * (x >> 15)) >> 7) * cal.h1) >> 4
    x = min(max(x, 0), 419430400)  # 0..100 %RH
    return x >> 12


def _c_divide(numerator: int, denominator: int) -> int:
    """Integer division rounding toward zero, as C does (Python's // floors)."""
    quotient = abs(numerator) // abs(denominator)
    return quotient if (numerator < 0) == (denominator < 0) else -quotient


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value & (1 << (bits - 1)) else value
