"""Running one command bounded: its own process group, a time limit, capped output.

The command gets no stdin and its own session; stdout and stderr are merged
into one stream so the model reads them in the order a terminal would show
them. At the time limit (or when the call is cancelled) the whole process
group is stopped, children and grandchildren too: SIGTERM, then SIGKILL after
a grace. Output past the cap keeps its first and last halves and counts the
middle. Under the kernel sandbox the group is bubblewrap, whose namespace dies
with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.core.errors import ToolError
from bot.security.sandbox_wire import SandboxUnavailable, run_remote

STOP_GRACE_S = 2.0  # between SIGTERM and SIGKILL
POLL_S = 0.05
DRAIN_S = 0.5  # how long output is still read after the shell itself exited
CHUNK = 64 * 1024


@dataclass(slots=True)
class Capture:
    """Output kept from a stream: its first and last ``max_bytes / 2``, and the total."""

    max_bytes: int
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0

    def add(self, chunk: bytes) -> None:
        """Keep what fits; the middle of an oversized stream is only counted."""
        self.total += len(chunk)
        room = self.max_bytes // 2 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > 2 * self._tail_size:  # trim now and then, not on every chunk
            del self.tail[: -self._tail_size]

    @property
    def _tail_size(self) -> int:
        return self.max_bytes - self.max_bytes // 2

    @property
    def dropped(self) -> int:
        """How many bytes (from the middle) were not kept."""
        return self.total - len(self.head) - min(len(self.tail), self._tail_size)

    def text(self) -> str:
        """The kept output as text, with a marker where the middle was dropped."""
        head = self.head.decode("utf-8", errors="replace")
        tail = bytes(self.tail[-self._tail_size :]).decode("utf-8", errors="replace")
        if not self.dropped:
            return head + tail
        return f"{head}\n…[{self.dropped} bytes of output dropped here]…\n{tail}"


@dataclass(slots=True)
class Outcome:
    """How a command ended and what it printed."""

    returncode: int | None
    timed_out: bool
    seconds: float
    output: Capture

    def render(self) -> str:
        """The result text: a status line first, then the output."""
        if self.timed_out:
            status = f"stopped after {self.seconds:.1f} s (time limit)"
        elif self.returncode is not None and self.returncode < 0:
            status = f"killed by signal {-self.returncode} after {self.seconds:.1f} s"
        else:
            status = f"exit code {self.returncode} ({self.seconds:.1f} s)"
        if self.output.dropped:
            status += (
                f"; output was {self.output.total} bytes, {self.output.dropped} bytes "
                "in the middle were dropped"
            )
        body = self.output.text()
        return f"{status}\n{body}" if body else f"{status}\n(no output)"


async def run_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    limit_s: float,
    max_bytes: int,
    via: str | None = None,
) -> Outcome:
    """Run ``argv`` in its own session in ``cwd``; stop the whole group at the limit.

    ``via``: the socket of the sandbox helper that runs it instead (under systemd).
    """
    if via is not None:
        return await _run_via(via, argv, cwd=cwd, env=env, limit_s=limit_s, max_bytes=max_bytes)
    started = time.monotonic()
    try:
        await asyncio.to_thread(cwd.mkdir, parents=True, exist_ok=True)
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolError(f"the command could not be started: {exc.strerror or exc}") from None
    except ValueError:  # a NUL byte, which no command line can hold
        raise ToolError("the command contains a NUL byte and cannot be run") from None
    capture = Capture(max_bytes)
    assert proc.stdout is not None
    reader = asyncio.create_task(_drain(proc.stdout, capture), name=f"shell-output-{proc.pid}")
    timed_out = False
    try:
        try:
            async with asyncio.timeout(limit_s):
                await _exited(proc, reader)
        except TimeoutError:
            timed_out = True
        seconds = time.monotonic() - started
        if not timed_out:  # background processes may still hold the pipe open
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(reader), DRAIN_S)
        await stop_group(proc)
        with contextlib.suppress(TimeoutError):  # a process that left the group may hold it
            await asyncio.wait_for(asyncio.shield(reader), STOP_GRACE_S)
    finally:
        if proc.returncode is None:  # cancelled: nothing may outlive the call
            _signal_group(proc.pid, signal.SIGKILL)
        reader.cancel()  # done by now, or held open by a process that left the group
    return Outcome(proc.returncode, timed_out, seconds, capture)


async def _run_via(
    socket_path: str,
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    limit_s: float,
    max_bytes: int,
) -> Outcome:
    """``run_command`` through the helper; leaving (limit, cancel) makes it kill the command."""
    started = time.monotonic()
    capture = Capture(max_bytes)
    await asyncio.to_thread(cwd.mkdir, parents=True, exist_ok=True)
    try:
        async with asyncio.timeout(limit_s):
            status = await run_remote(socket_path, argv, cwd=cwd, env=env, output=capture.add)
    except TimeoutError:
        return Outcome(None, True, time.monotonic() - started, capture)
    except SandboxUnavailable as exc:
        raise ToolError(f"the command could not be started in the sandbox: {exc}") from None
    return Outcome(status, False, time.monotonic() - started, capture)


async def _exited(proc: asyncio.subprocess.Process, reader: asyncio.Task[None]) -> None:
    """Wait for the shell itself to exit.

    ``Process.wait`` also waits until the output pipe closes, which a process left
    in the background keeps open; ``returncode`` is set as soon as the shell exits.
    """
    while proc.returncode is None and not reader.done():
        await asyncio.wait([reader], timeout=POLL_S)
    if proc.returncode is None:
        await proc.wait()


async def _drain(stream: asyncio.StreamReader, capture: Capture) -> None:
    """Read to the end, keeping what fits: the child never blocks on a full pipe."""
    while chunk := await stream.read(CHUNK):
        capture.add(chunk)


async def stop_group(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the process group, SIGKILL whatever is left after a grace, and reap."""
    if _signal_group(proc.pid, signal.SIGTERM):
        # Nothing signals a group's end, so poll for it; the grace bounds the wait.
        for _ in range(round(STOP_GRACE_S / POLL_S)):
            if not await asyncio.to_thread(_group_alive, proc.pid):
                break
            await asyncio.sleep(POLL_S)
        _signal_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), STOP_GRACE_S)


def _signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Send ``sig`` to the group; False when the group is already gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs; zombies awaiting their reaper do not count."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True  # no /proc to look closer: assume the worst
    for entry in entries:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] not in (b"Z", b"X") and int(fields[2]) == pgid:
                return True
    return False
