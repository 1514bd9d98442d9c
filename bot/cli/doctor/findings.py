"""What a check finds, and running the checks: concurrently, each within its time limit.

A ``Probe`` is one check to run (``run`` returns a ``Finding``); ``run_probes``
starts them all at once and yields their findings in the order given, so the
report reads the same every time while the slow checks overlap. A probe that
overruns its limit becomes a failed finding; one that crashes is a bug, logged
with an id. Blocking work goes through ``in_thread``: a daemon thread, so a
check that hangs (a huge database on a slow SD card) cannot hold the exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from bot.core.errors import log_bug

log = logging.getLogger(__name__)

T = TypeVar("T")
Status = Literal["ok", "fail", "warn", "info"]
"""ok ✓, fail ✗ (the exit code is 1), warn ! (worth fixing, not broken), info – (neutral)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One line of the report: which check, its status, what was found and the fix."""

    check: str
    status: Status
    text: str
    fix: str = ""
    latency_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Probe:
    """A check to run, how long it may take, and what to do when it takes longer."""

    check: str
    run: Callable[[], Awaitable[Finding]]
    timeout_s: float = 15.0
    late_fix: str = ""


async def run_probes(probes: Sequence[Probe]) -> AsyncIterator[Finding]:
    """Run every probe concurrently; yield the findings in the probes' order."""
    tasks = [asyncio.create_task(_guarded(probe), name=f"doctor-{probe.check}") for probe in probes]
    try:
        for task in tasks:
            yield await task
    finally:
        for task in tasks:
            task.cancel()


async def _guarded(probe: Probe) -> Finding:
    try:
        async with asyncio.timeout(probe.timeout_s):
            return await probe.run()
    except TimeoutError:
        text = f"{probe.check}: no result within {probe.timeout_s:.0f} s"
        return Finding(probe.check, "fail", text, probe.late_fix)
    except Exception as exc:
        error_id = log_bug(log, f"doctor: the {probe.check} check failed", exc)
        return Finding(
            probe.check,
            "fail",
            f"{probe.check}: the check itself crashed (error id {error_id}, logged on stderr)",
            "please report it, with that log",
        )


async def in_thread(work: Callable[[], T]) -> T:
    """``work()`` in a daemon thread of its own; the result, once it is done."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():  # the wait may have timed out meanwhile
            outcome()

    def target() -> None:
        try:
            result = work()
        except BaseException as exc:
            outcome = functools.partial(done.set_exception, exc)
        else:
            outcome = functools.partial(done.set_result, result)
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=target, name="doctor-check", daemon=True).start()
    return await done


async def command_output(argv: Sequence[str], timeout_s: float) -> str:
    """What a command prints on stdout (``systemctl``, ``chromium --version``); "" when it
    cannot be run or does not finish within ``timeout_s`` (it is killed then)."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError:
        return ""
    try:
        async with asyncio.timeout(timeout_s):
            out, _ = await process.communicate()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        return ""
    return out.decode("utf-8", "replace")
