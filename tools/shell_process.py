"""Running one command bounded: a time limit, capped output, and nothing left behind.

The command gets no stdin and its own session; stdout and stderr are merged
into one stream so the model reads them in the order a terminal would show
them. When the command's shell exits (after a short drain of its output), at
the time limit, or when the call is cancelled, every process it started is
stopped: SIGTERM, then SIGKILL after a grace. Output past the cap keeps its
first and last halves and counts the middle.

Without the kernel sandbox the command runs under ``tools.shell_reaper``, a
subreaper that keeps even processes that start a new session or fork twice
in its subtree and ends the whole tree when told (or when the daemon dies).
Under the sandbox the command is bubblewrap in a process group of its own:
its PID namespace ends everything in it when the command or bubblewrap ends.
(Off Linux, where there are no subreapers, the group is all there is, and a
process that starts a session of its own leaves it.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.core.errors import ToolError
from bot.security.sandbox.wire import SandboxUnavailable, run_remote

log = logging.getLogger(__name__)

REAPER = Path(__file__).with_name("shell_reaper.py")
STOP_GRACE_S = 2.0  # between SIGTERM and SIGKILL
POLL_S = 0.05
DRAIN_S = 0.5  # how long output is still read after the shell itself exited
CHUNK = 64 * 1024
REAPER_WAIT_S = STOP_GRACE_S + 3.0  # for the supervisor to end the tree, before it is killed


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
    contained: bool = False,
) -> Outcome:
    """Run ``argv`` in ``cwd``; stop every process it started when it ends, at the limit,
    or when cancelled.

    ``contained``: ``argv`` is bubblewrap with a PID namespace of its own, which
    needs no supervisor. ``via``: the socket of the sandbox helper that runs it
    instead (under systemd).
    """
    if via is not None:
        return await _run_via(via, argv, cwd=cwd, env=env, limit_s=limit_s, max_bytes=max_bytes)
    started = time.monotonic()
    await asyncio.to_thread(cwd.mkdir, parents=True, exist_ok=True)
    if contained or sys.platform != "linux":  # the subreaper is Linux's
        command: _Group | _Supervised = await _Group.start(argv, cwd, env)
    else:
        command = await _Supervised.start(argv, cwd, env)
    capture = Capture(max_bytes)
    reader = asyncio.create_task(
        _drain(command.output, capture), name=f"shell-output-{command.pid}"
    )
    timed_out = False
    try:
        try:
            async with asyncio.timeout(limit_s):
                await command.exited(reader)
        except TimeoutError:
            timed_out = True
        seconds = time.monotonic() - started
        if not timed_out:  # background processes may still be writing
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(reader), DRAIN_S)
        await command.stop()
        with contextlib.suppress(TimeoutError):  # a process out of reach may hold the pipe
            await asyncio.wait_for(asyncio.shield(reader), STOP_GRACE_S)
    finally:
        try:
            await command.abandon()  # cancelled or failed: nothing may outlive the call
        finally:
            reader.cancel()  # done by now, or held open by a process out of reach
    return Outcome(command.returncode, timed_out, seconds, capture)


async def _spawn(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], stdin: int
) -> asyncio.subprocess.Process:
    """Start ``argv`` in a session of its own, its stdout and stderr one pipe."""
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=stdin,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolError(f"the command could not be started: {exc.strerror or exc}") from None
    except ValueError:  # a NUL byte, which no command line can hold
        raise ToolError("the command contains a NUL byte and cannot be run") from None


class _Supervised:
    """A command under ``tools.shell_reaper``, talked to over a socket (its stdin)."""

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        control: asyncio.StreamReader,
        orders: asyncio.StreamWriter,
    ) -> None:
        assert proc.stdout is not None
        self.output = proc.stdout
        self.pid = proc.pid
        self.returncode: int | None = None
        self._proc = proc
        self._control = control
        self._orders = orders
        self._done = False

    @classmethod
    async def start(cls, argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> _Supervised:
        """Start the supervisor running ``argv``; hand it the command's environment.

        That goes over the socket: Python may change its own environment at start
        (a C locale is coerced to C.UTF-8), which the command must not inherit.
        """
        python = sys.executable or "python3"
        grace = str(STOP_GRACE_S)
        supervisor = [python, "-I", "-S", os.fspath(REAPER), str(os.getpid()), grace, "--"]
        ours, theirs = socket.socketpair()
        try:
            with theirs:
                proc = await _spawn([*supervisor, *argv], cwd, env, theirs.fileno())
            control, orders = await asyncio.open_unix_connection(sock=ours)
        except BaseException:
            ours.close()  # the supervisor, if it started, sees the end and runs nothing
            raise
        entries = (os.fsencode(f"{name}={value}") + b"\0" for name, value in env.items())
        orders.write(b"".join(entries) + b"\0")
        return cls(proc, control, orders)

    async def exited(self, reader: asyncio.Task[None]) -> None:
        """Wait for the supervisor's word that the shell exited (or that it could not start)."""
        line = await self._control.readline()
        self._read(line)

    async def stop(self) -> None:
        """Have the supervisor end the whole tree; wait until it has and is gone."""
        with contextlib.suppress(OSError):
            self._orders.write_eof()
        try:
            async with asyncio.timeout(REAPER_WAIT_S):
                rest = await self._control.read()  # its end of file: it exited
        except TimeoutError:
            log.warning("the supervisor of shell command %d did not finish; killed", self.pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            rest = b""
        finally:
            self._done = True
            self._orders.close()
        for line in rest.splitlines():
            self._read(line)
        if self.returncode is None:  # killed before it could say: its own status
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._proc.wait(), POLL_S * 10)
            self.returncode = self._proc.returncode

    async def abandon(self) -> None:
        """After a cancel or a failure: the same stop, still bounded in time."""
        if not self._done:
            await self.stop()  # its first step tells the supervisor, before any await

    def _read(self, line: bytes) -> None:
        kind, _, value = line.decode(errors="replace").strip().partition(" ")
        if kind == "status":
            self.returncode = int(value)
        elif kind == "error":
            raise ToolError(f"the command could not be started: {value}")


class _Group:
    """A command in a process group of its own: bubblewrap, whose PID namespace ends
    everything in it, or (off Linux) the command itself."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        self.output = proc.stdout
        self.pid = proc.pid
        self._proc = proc

    @classmethod
    async def start(cls, argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> _Group:
        """Start ``argv`` as the leader of a new session."""
        return cls(await _spawn(argv, cwd, env, asyncio.subprocess.DEVNULL))

    @property
    def returncode(self) -> int | None:
        """The command's exit status (negative: the signal that ended it)."""
        return self._proc.returncode

    async def exited(self, reader: asyncio.Task[None]) -> None:
        """Wait for the command itself (not what it left behind) to exit."""
        await _exited(self._proc, reader)

    async def stop(self) -> None:
        """Stop the whole group."""
        await stop_group(self._proc)

    async def abandon(self) -> None:
        """After a cancel: kill the group at once, and see it gone (bounded)."""
        if self._proc.returncode is None:
            _signal_group(self._proc.pid, signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._proc.wait(), STOP_GRACE_S)


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
