"""The sandbox's only way out: a relay from its own loopback to PinClaw's egress proxy.

This file runs inside bubblewrap, as the first process of a command that may
use the network (``python3 -I -S relay.py SOCKET ARGV...``), so it
imports nothing but the standard library and keeps to what Python 3.8 has
(the fallback interpreter may be an old system one). The sandbox has a network
namespace of its own with nothing but its loopback; the relay listens on
127.0.0.1 at a free port there, carries each connection over the Unix socket
SOCKET (bind-mounted in) to the daemon's proxy, and starts ARGV with
``http_proxy``, ``https_proxy``, ``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``
and ``all_proxy`` pointing at it (``NO_PROXY`` removed). It judges nothing:
the proxy decides where a connection may go. It exits with ARGV's status
(128 + N when a signal N ended it, as a shell says it).
"""

from __future__ import annotations  # list[str] on an older Python

import contextlib
import os
import signal
import socket
import sys
import threading

PROXY_VARIABLES = (
    "http_proxy",
    "https_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "all_proxy",
)
UNREACHABLE = (
    b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
    b"PinClaw's network proxy cannot be reached from the sandbox.\n"
)
CHUNK = 65536


def _copy(source: socket.socket, target: socket.socket) -> None:
    """Copy until ``source`` ends, then end ``target``'s sending side."""
    try:
        while True:
            data = source.recv(CHUNK)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)


def _carry(client: socket.socket, path: str) -> None:
    """One connection: to the proxy's socket and back, until both sides are done."""
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        with contextlib.suppress(OSError):
            client.sendall(UNREACHABLE)
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_copy, args=(upstream, client), daemon=True)
    back.start()
    _copy(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _serve(server: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = server.accept()
        except OSError:
            return
        threading.Thread(target=_carry, args=(client, path), daemon=True).start()


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def main(argv: list[str]) -> int:
    """Listen, start the command with the proxy variables, relay until it ends; its status."""
    if len(argv) < 3:
        sys.stderr.write("usage: relay.py SOCKET PROGRAM [ARGUMENT...]\n")
        return 2
    path, command = argv[1], argv[2:]
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # not inherited by the command
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    url = f"http://127.0.0.1:{server.getsockname()[1]}"
    env = {k: v for k, v in os.environ.items() if k.lower() != "no_proxy"}
    env.update((name, url) for name in PROXY_VARIABLES)
    threading.Thread(target=_serve, args=(server, path), daemon=True).start()
    try:
        # Python ignores SIGPIPE and SIGXFSZ; the command gets them back, as from a shell.
        pid = os.posix_spawnp(command[0], command, env, setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
    except OSError as exc:
        sys.stderr.write(f"{command[0]}: {exc.strerror or exc}\n")
        return 127
    _, status = os.waitpid(pid, 0)
    return _exit_code(status)


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stderr.flush()
    os._exit(code)  # daemon threads may be mid-copy: leave at once
