"""Raw I2C access through smbus2: scan a bus, read and write registers, allowlisted.

Every call opens ``/dev/i2c-N`` in a worker thread behind the bus's
``DeviceGate``, so calls to one bus run one at a time (a sensor measurement is
never split by another caller's traffic) and a stuck bus cannot freeze the
chats. smbus2 is imported only inside those calls: PinClaw without I2C never
loads it. Kernel errors become sentences a person can act on, in one place
(``describe_os_error``).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from bot.config.hardware import I2C_MAX_TRANSFER, HardwareConfig
from bot.core.errors import Refused, ToolError
from bot.hardware.blocking import DeviceGate

if TYPE_CHECKING:
    from smbus2 import SMBus

T = TypeVar("T")

DEVICE_PATH = "/dev/i2c-{bus}"
"""Where bus N's character device is; ``I2cBank(device_path=...)`` points tests elsewhere."""

FIRST_ADDRESS = 0x03
LAST_ADDRESS = 0x77
MAX_TRANSFER = I2C_MAX_TRANSFER

_NO_ANSWER = frozenset({errno.EREMOTEIO, errno.ENXIO})
# i2cdetect's "auto" mode reads (rather than quick-writes) these ranges: a quick
# write can corrupt some EEPROMs (0x50-0x5f) and lock some sensors (0x30-0x37).
_READ_PROBE = (range(0x30, 0x38), range(0x50, 0x60))
_QUICK = 0x00010000  # I2C_FUNC_SMBUS_QUICK, from linux/i2c.h


def hex_address(address: int) -> str:
    """An address the way i2cdetect shows it: ``0x76``."""
    return f"0x{address:02x}"


def describe_os_error(exc: OSError, *, bus: int, address: int | None, path: str) -> str:
    """One sentence for a person about a failed I2C call."""
    at = f" at {hex_address(address)}" if address is not None else ""
    code = exc.errno
    if code in _NO_ANSWER and address is not None:
        return (
            f"nothing answered at {hex_address(address)} on bus {bus} "
            "— check the wiring and the address"
        )
    if code == errno.ENOENT:
        return f"I2C bus {bus} is not there ({path} is missing); enable I2C with raspi-config"
    if code in (errno.EACCES, errno.EPERM):
        return (
            f"PinClaw may not open {path}; add the user it runs as to the i2c group "
            "(sudo usermod -aG i2c USER) and restart PinClaw"
        )
    if code == errno.EBUSY:
        return (
            f"the device{at} on bus {bus} is in use by a kernel driver "
            "(i2cdetect shows it as UU); remove the dtoverlay that loads that driver"
        )
    if code == errno.ETIMEDOUT:
        return f"I2C bus {bus} timed out{at}; a device may be holding the bus — check the wiring"
    if code == errno.EIO:
        return f"I2C bus {bus} reported an I/O error{at}; check the wiring and the pull-ups"
    if code == errno.EOPNOTSUPP:
        return f"the I2C adapter of bus {bus} does not support this kind of transfer"
    reason = os.strerror(code) if code else "unknown error"
    return f"I2C bus {bus} failed{at}: {reason.lower()} (errno {code})"


class I2cBank:
    """The allowlisted I2C buses: one gate per bus, raw reads and writes, and scans."""

    def __init__(self, config: HardwareConfig, *, device_path: str = DEVICE_PATH) -> None:
        self._device_path = device_path
        self._addresses = frozenset(config.i2c.addresses)
        # pin_factory = "mock" simulates the board: a scan finds the configured sensors.
        self._simulated: dict[int, list[int]] | None = None
        if config.pin_factory == "mock":
            self._simulated = {bus: [] for bus in config.i2c.buses}
            for sensor in config.sensors.values():
                self._simulated[sensor.bus].append(sensor.address)
        self._gates = {
            bus: DeviceGate(f"I2C bus {bus}", config.call_timeout_s) for bus in config.i2c.buses
        }

    @property
    def buses(self) -> tuple[int, ...]:
        """The buses PinClaw may use, in configuration order."""
        return tuple(self._gates)

    @property
    def addresses(self) -> tuple[int, ...]:
        """The addresses that may be read and written raw, sorted."""
        return tuple(sorted(self._addresses))

    def path(self, bus: int) -> str:
        """The character device of ``bus``."""
        return self._device_path.format(bus=bus)

    async def scan(self, bus: int) -> list[int]:
        """Addresses 0x03..0x77 that acknowledge, probed like ``i2cdetect -y``.

        Addresses claimed by a kernel driver (``UU`` in i2cdetect) are left out.
        """
        if self._simulated is not None:
            self._gate(bus)
            return sorted(self._simulated.get(bus, []))
        return await self.transact(bus, None, _scan)

    async def read(self, bus: int, address: int, register: int, length: int = 1) -> bytes:
        """``length`` bytes (1..32) starting at ``register`` of an allowlisted device."""
        self._check_raw(bus, address, register)
        if not 1 <= length <= MAX_TRANSFER:
            raise ToolError(f"length must be 1 to {MAX_TRANSFER} bytes, got {length}")

        def work(smbus: SMBus) -> bytes:
            return bytes(smbus.read_i2c_block_data(address, register, length))

        return await self.transact(bus, address, work)

    async def write(self, bus: int, address: int, register: int, data: bytes) -> None:
        """Write ``data`` (1..32 bytes) starting at ``register`` of an allowlisted device."""
        self._check_raw(bus, address, register)
        if not 1 <= len(data) <= MAX_TRANSFER:
            raise ToolError(f"data must be 1 to {MAX_TRANSFER} bytes, got {len(data)}")

        def work(smbus: SMBus) -> None:
            smbus.write_i2c_block_data(address, register, list(data))

        await self.transact(bus, address, work)

    async def transact(self, bus: int, address: int | None, work: Callable[[SMBus], T]) -> T:
        """Run ``work(smbus)`` on an open ``bus`` behind its gate; errors become ``ToolError``.

        Checks only the bus: drivers of configured sensors use it for addresses
        that are not in the raw allowlist. ``address`` is for error messages.
        """
        gate = self._gate(bus)
        path = self.path(bus)
        try:
            return await gate.run(_on_bus, path, work)
        except OSError as exc:
            raise ToolError(describe_os_error(exc, bus=bus, address=address, path=path)) from None

    def _gate(self, bus: int) -> DeviceGate:
        gate = self._gates.get(bus)
        if gate is None:
            allowed = ", ".join(str(b) for b in self._gates) or "none"
            raise Refused(f"PinClaw may not use I2C bus {bus}; the buses it may use: {allowed}")
        return gate

    def _check_raw(self, bus: int, address: int, register: int) -> None:
        self._gate(bus)
        if address not in self._addresses:
            allowed = ", ".join(hex_address(a) for a in self.addresses) or "none"
            raise Refused(
                f"PinClaw may not read or write the device at {hex_address(address)}; "
                f"the addresses it may use: {allowed}"
            )
        if not 0 <= register <= 0xFF:
            raise ToolError(f"register must be 0x00 to 0xff, got {register}")


def _on_bus(path: str, work: Callable[[SMBus], T]) -> T:
    from smbus2 import SMBus

    with SMBus(path) as smbus:
        return work(smbus)


def _scan(smbus: SMBus) -> list[int]:
    can_quick = bool(smbus.funcs & _QUICK)
    found = []
    for address in range(FIRST_ADDRESS, LAST_ADDRESS + 1):
        read_probe = not can_quick or any(address in r for r in _READ_PROBE)
        try:
            if read_probe:
                smbus.read_byte(address)
            else:
                smbus.write_quick(address)
        except OSError:
            continue  # no answer, or claimed by a kernel driver (EBUSY)
        found.append(address)
    return found
