"""What ``pinclaw hardware`` prints: every configured device, checked live."""

from __future__ import annotations

from bot.config.hardware import HardwareConfig
from bot.core.errors import PinclawError
from bot.hardware import pin_library
from bot.hardware.gpio import GpioBank
from bot.hardware.i2c import DEVICE_PATH, I2cBank, hex_address
from bot.hardware.sensors import SensorBank
from bot.hardware.serial_io import is_present, list_ports


async def hardware_report(
    config: HardwareConfig, *, sensors: bool = True, i2c_path: str = DEVICE_PATH
) -> int:
    """Print the report; 0 when everything configured was found, 1 otherwise.

    ``i2c_path`` is the bus device pattern (tests point it at a fake).
    """
    problems = 0
    problems += await _gpio(config)
    problems += await _i2c(config, sensors, i2c_path)
    problems += _serial(config)
    if problems:
        print(f"\n{problems} problem(s) found; see the lines marked !")
    return 1 if problems else 0


async def _gpio(config: HardwareConfig) -> int:
    factory = config.pin_factory or "gpiozero's default"
    print(f"GPIO (pin factory: {factory}{', simulated' if config.pin_factory == 'mock' else ''})")
    if config.pin_factory != "mock":
        print(f"  {pin_library.summary(config.pin_factory)}")
    if not config.gpio:
        print("  no devices in [hardware.gpio]")
        return 0
    bank = GpioBank(config)
    try:
        states = await bank.states()
    except PinclawError as exc:
        print(f"  ! {exc}")
        return 1
    finally:
        await bank.close()
    for name, device in config.gpio.items():
        print(f"  {name:<16} pin {device.pin:<3} {device.kind:<7} {states.get(name, '?')}")
    return 0


async def _i2c(config: HardwareConfig, read_sensors: bool, path: str) -> int:
    print("I2C")
    if not config.i2c.buses:
        print("  no buses in [hardware.i2c]")
        return 0
    bank, problems, missing = I2cBank(config, device_path=path), 0, set()
    expected = {(s.bus, s.address): name for name, s in config.sensors.items()}
    for bus in config.i2c.buses:
        try:
            found = await bank.scan(bus)
        except PinclawError as exc:
            print(f"  ! bus {bus}: {exc}")
            problems += 1
            continue
        listed = " ".join(hex_address(a) for a in found) or "nothing answered"
        print(f"  bus {bus}: {listed}")
        for (sensor_bus, address), name in expected.items():
            if sensor_bus == bus and address not in found:
                print(f"  ! {name}: nothing at {hex_address(address)} on bus {bus}")
                problems += 1
                missing.add(name)
    if read_sensors and config.sensors:
        sensor_bank = SensorBank(config, bank)
        for name in config.sensors:
            if name in missing:
                continue
            try:
                print(f"  {(await sensor_bank.read_sensor(name)).text()}")
            except PinclawError as exc:
                print(f"  ! {name}: {exc}")
                problems += 1
    return problems


def _serial(config: HardwareConfig) -> int:
    print("Serial ports")
    problems = 0
    for name, port in config.serial.items():
        present = is_present(port.port)
        mark = {True: "present", False: "! not found", None: "a URL, checked when used"}
        print(f"  {name:<16} {port.port} at {port.baud} baud: {mark[present]}")
        problems += 1 if present is False else 0
    ports = list_ports()
    if ports:
        print("  on this machine:")
    for info in ports:
        usb = f" (USB {info.usb_id})" if info.vid else ""
        print(f"    {info.device}{usb} {info.description}".rstrip())
    if not ports and not config.serial:
        print("  none configured, none found")
    return problems
