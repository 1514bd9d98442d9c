"""PinClaw's own listening ports, which no sandboxed command may reach, whatever the config allows.

The egress proxy asks ``is_own`` before each connection it makes. A port is
PinClaw's when this process listens on it (every TCP socket in LISTEN state
among its open descriptors: the status endpoint and web panel, a channel's
webhook server, anything a library opened) or when the config names it (the
``[web] listen`` port, which another PinClaw process of the same config may
hold). Such a port is refused on any address of this machine, not only the one
it is bound to: a server on ``0.0.0.0`` answers on every local address.

Linux only (``/proc``), like the sandbox itself; where ``/proc`` cannot be
read, only the configured ports count.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Collection
from ipaddress import IPv6Address, ip_address

LISTEN = "0A"  # the state column of /proc/net/tcp


def listening_ports(pid: str = "self") -> set[int]:
    """The TCP ports process ``pid`` listens on (IPv4 and IPv6)."""
    inodes = _socket_inodes(pid)
    ports: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}", encoding="ascii") as rows:
                next(rows, None)  # the heading
                for row in rows:
                    fields = row.split()
                    if len(fields) > 9 and fields[3] == LISTEN and fields[9] in inodes:
                        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        except (OSError, ValueError):
            continue
    return ports


def _socket_inodes(pid: str) -> set[str]:
    found: set[str] = set()
    folder = f"/proc/{pid}/fd"
    try:
        names = os.listdir(folder)
    except OSError:
        return found
    for name in names:
        with contextlib.suppress(OSError):  # closed since the listing
            target = os.readlink(f"{folder}/{name}")
            if target.startswith("socket:["):
                found.add(target[8:-1])
    return found


def is_local(address: str) -> bool:
    """Whether ``address`` is this machine: loopback, unspecified, or one of its own addresses.

    An address is this machine's when a socket can be bound to it (the kernel
    refuses to bind to an address no interface has).
    """
    ip = ip_address(address)
    if isinstance(ip, IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback or ip.is_unspecified:
        return True
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((str(ip), 0))
    except OSError:
        return False
    return True


def is_own(address: str, port: int, configured: Collection[int] = ()) -> bool:
    """Whether ``address``:``port`` reaches PinClaw itself (blocking: reads ``/proc``)."""
    if port not in configured and port not in listening_ports():
        return False
    return is_local(address)
