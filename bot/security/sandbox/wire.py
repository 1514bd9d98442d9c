"""Running a sandboxed command through ``pinclaw-sandbox.socket``, for the systemd service.

The service unit forbids PinClaw to create namespaces (that keeps the
network-facing daemon's kernel surface small), so under systemd the daemon
hands each command to ``pinclaw sandbox-exec``, which systemd starts per
connection on ``pinclaw-sandbox.socket`` in a unit of its own that may run
bubblewrap. The helper runs nothing but ``bwrap``; what that runs, and how
narrowly, is the daemon's layout.

The wire: the daemon sends one JSON line ``{"argv", "cwd", "env"}``; the
helper answers with frames, ``O`` + length + output bytes as they come, then
``X`` + the exit status (negative: killed by that signal), or ``E`` + length +
a message when the command could not be started. When the daemon closes the
connection (its time limit, a cancelled call) the helper kills the command's
whole process group and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

SOCKET_ENV = "PINCLAW_SANDBOX_SOCKET"
MAX_REQUEST = 1024 * 1024
_LENGTH = struct.Struct(">I")
_STATUS = struct.Struct(">i")


class SandboxUnavailable(OSError):
    """The helper could not be reached or refused the request."""


def encode_request(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> bytes:
    """The request line for ``argv`` run in ``cwd`` with ``env``."""
    body = {"argv": list(argv), "cwd": os.fspath(cwd), "env": dict(env)}
    return json.dumps(body).encode() + b"\n"


async def run_remote(
    path: str,
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    output: Callable[[bytes], None],
) -> int:
    """Run ``argv`` through the helper at ``path``; feed output to ``output``; the status.

    Cancel the task to stop the command: closing the connection makes the
    helper kill it.
    """
    try:
        reader, writer = await asyncio.open_unix_connection(path)
    except OSError as exc:
        raise SandboxUnavailable(f"the sandbox socket {path} cannot be reached: {exc}") from exc
    try:
        writer.write(encode_request(argv, cwd, env))
        await writer.drain()
        while True:
            kind = await reader.readexactly(1)
            if kind == b"X":
                status: int = _STATUS.unpack(await reader.readexactly(_STATUS.size))[0]
                return status
            (size,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
            data = await reader.readexactly(size)
            if kind == b"E":
                raise SandboxUnavailable(data.decode(errors="replace"))
            output(data)
    except asyncio.IncompleteReadError:
        raise SandboxUnavailable("the sandbox helper hung up before the command ended") from None
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


def run_remote_blocking(
    path: str, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float
) -> tuple[int, bytes]:
    """``run_remote`` without an event loop, for the check at start: (status, output)."""
    output = b""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout_s)
            conn.connect(path)
            conn.sendall(encode_request(argv, cwd, env))
            stream = conn.makefile("rb")
            while True:
                kind = stream.read(1)
                if kind == b"X":
                    return _STATUS.unpack(stream.read(_STATUS.size))[0], output
                if kind not in (b"O", b"E"):
                    raise SandboxUnavailable("the sandbox helper hung up before the command ended")
                (size,) = _LENGTH.unpack(stream.read(_LENGTH.size))
                data = stream.read(size)
                if kind == b"E":
                    raise SandboxUnavailable(data.decode(errors="replace"))
                output += data
    except SandboxUnavailable:
        raise
    except (OSError, struct.error) as exc:
        raise SandboxUnavailable(f"the sandbox socket {path} cannot be used: {exc}") from exc


def serve_connection(fd: int = 0) -> int:
    """``pinclaw sandbox-exec``: serve one request on the socket at ``fd`` (systemd's)."""
    conn = socket.socket(fileno=os.dup(fd))
    try:
        request = _read_request(conn)
        argv, cwd, env = _checked(request)
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except (ValueError, OSError) as exc:
        with contextlib.suppress(OSError):
            message = str(exc).encode()
            conn.sendall(b"E" + _LENGTH.pack(len(message)) + message)
        conn.close()
        return 1
    try:
        _relay(conn, proc)
    finally:
        conn.close()
    return 0


def _read_request(conn: socket.socket) -> dict[str, object]:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            raise ValueError("the request ended early")
        data += chunk
        if len(data) > MAX_REQUEST:
            raise ValueError("the request is too large")
    request = json.loads(data)
    if not isinstance(request, dict):
        raise ValueError("the request is not an object")
    return request


def _checked(request: dict[str, object]) -> tuple[list[str], str, dict[str, str]]:
    """The request's parts; only bubblewrap may be run, from an absolute folder."""
    argv, cwd, env = request.get("argv"), request.get("cwd"), request.get("env")
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        raise ValueError("argv must be a list of strings")
    if not (isinstance(cwd, str) and os.path.isabs(cwd)):
        raise ValueError("cwd must be an absolute path")
    if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
        raise ValueError("env must map names to strings")
    bwrap = shutil.which("bwrap")
    if bwrap is None or os.path.realpath(argv[0]) != os.path.realpath(bwrap):
        raise ValueError("this helper runs bubblewrap (bwrap) and nothing else")
    return [str(a) for a in argv], cwd, {str(k): str(v) for k, v in env.items()}


def _relay(conn: socket.socket, proc: subprocess.Popen[bytes]) -> None:
    """Copy output to the connection; kill the group if the connection goes away."""
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, "output")
    selector.register(conn, selectors.EVENT_READ, "peer")
    try:
        while True:
            for key, _ in selector.select():
                if key.data == "peer" and not _peer_alive(conn):
                    _kill(proc)
                    return
                if key.data == "output":
                    chunk = os.read(proc.stdout.fileno(), 65536)
                    if not chunk:
                        status = proc.wait()
                        conn.sendall(b"X" + _STATUS.pack(status))
                        return
                    conn.sendall(b"O" + _LENGTH.pack(len(chunk)) + chunk)
    except OSError:  # the daemon went away mid-send
        _kill(proc)
    finally:
        selector.close()


def _peer_alive(conn: socket.socket) -> bool:
    try:
        return conn.recv(4096, socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
