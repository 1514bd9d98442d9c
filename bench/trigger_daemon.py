"""The daemon under test in the trigger benchmark: ``pinclaw run`` with a hand on a mock pin.

    python bench/trigger_daemon.py CONFIG_PATH [PIN]

It runs the same ``Daemon`` as ``pinclaw run`` (config, logging and start as
there), in this process, so that the benchmark can drive a pin of gpiozero's
``MockFactory`` (``[hardware] pin_factory = "mock"``), which lives in the daemon's
process. It prints ``ready`` once Telegram is connected. Then each ``edge`` line
on stdin flips the mock pin ``PIN`` (from a thread, as a real pin library calls
back from its own) and prints ``time.monotonic()`` taken just before the flip:
the moment of the event, on the clock the fake Telegram server stamps calls
with. The daemon stops when stdin closes.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any

from bot.cli.logs import setup_daemon_logging
from bot.config import load_config
from bot.daemon.main import Daemon


def mock_pin(daemon: Daemon, pin: int) -> Any:
    """The ``MockPin`` numbered ``pin`` of the pin factory of the daemon's GPIO tools
    (the GPIO trigger source watches its inputs through the same bank)."""
    from bot.triggers.sources.gpio import shared_bank

    bank = shared_bank(daemon.app.tools)
    if bank is None or bank.factory is None:
        raise RuntimeError("the daemon has opened no GPIO pin factory")
    return bank.factory.pin(pin)


def drive(
    daemon: Daemon, pin: int | None, loop: asyncio.AbstractEventLoop, stop: asyncio.Event
) -> None:
    """Answer ``edge`` lines until stdin closes (or a flip fails), then set ``stop``."""
    level = False
    mock = None
    try:
        for line in sys.stdin:
            if line.strip() != "edge" or pin is None:
                continue
            mock = mock or mock_pin(daemon, pin)
            level = not level
            started = time.monotonic()
            if level:
                mock.drive_high()
            else:
                mock.drive_low()
            print(f"{started:.9f}", flush=True)
    finally:
        loop.call_soon_threadsafe(stop.set)


async def run(config: str, pin: int | None) -> None:
    """Open and start the daemon, serve the driver, stop when stdin closes."""
    loaded = load_config(config)
    setup_daemon_logging(loaded)
    async with Daemon.open(loaded) as daemon:
        await daemon.start()
        if not await daemon.channels["telegram"].status.wait_connected(60):
            raise RuntimeError("telegram did not connect")
        print("ready", flush=True)
        loop, stop = asyncio.get_running_loop(), asyncio.Event()
        threading.Thread(
            target=drive, args=(daemon, pin, loop, stop), name="pin", daemon=True
        ).start()
        await stop.wait()


def main() -> None:
    """Run until stdin closes."""
    config = sys.argv[1]
    pin = int(sys.argv[2]) if len(sys.argv) > 2 else None
    asyncio.run(run(config, pin))


if __name__ == "__main__":
    main()
