"""DeviceGate: device calls off the loop, one at a time, with a deadline."""

from __future__ import annotations

import asyncio
import threading

import pytest

from bot.core.errors import ToolError
from bot.hardware.blocking import DeviceGate


async def test_calls_run_in_a_thread_one_at_a_time() -> None:
    gate = DeviceGate("bus 1", timeout_s=5)
    inside: list[int] = []
    overlap = threading.Event()
    loop_thread = threading.get_ident()

    def work(n: int) -> int:
        assert threading.get_ident() != loop_thread
        if inside:
            overlap.set()
        inside.append(n)
        threading.Event().wait(0.02)
        inside.remove(n)
        return n * 2

    results = await asyncio.gather(*(gate.run(work, n) for n in range(5)))
    assert results == [0, 2, 4, 6, 8] and not overlap.is_set()


async def test_a_stuck_call_times_out_and_keeps_the_device_busy_until_it_returns() -> None:
    gate = DeviceGate("/dev/ttyUSB0", timeout_s=0.2)
    release = threading.Event()
    with pytest.raises(ToolError, match=r"/dev/ttyUSB0 did not answer within 0.2 s"):
        await gate.run(release.wait, 10)
    with pytest.raises(ToolError, match="still busy with an earlier call"):
        await gate.run(lambda: 1)
    release.set()
    for _ in range(200):
        try:
            assert await gate.run(lambda: 7) == 7
            break
        except ToolError:
            await asyncio.sleep(0.01)
    else:
        raise AssertionError("the device stayed busy after the stuck call returned")


async def test_errors_from_the_device_propagate_and_free_the_device() -> None:
    gate = DeviceGate("bus 1", timeout_s=1)

    def nack() -> None:
        raise OSError(121, "Remote I/O error")

    with pytest.raises(OSError):
        await gate.run(nack)
    assert await gate.run(lambda: "ok") == "ok"
