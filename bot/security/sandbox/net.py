"""How a sandboxed command that may use the network gets out: the relay and what it needs.

Every sandboxed command runs in a network namespace of its own, with nothing
but its own loopback. One that may use the network gets a relay as its first
process (``relay.py``, mounted at ``/run/pinclaw/relay.py``) that
listens on the sandbox's 127.0.0.1 and carries each connection over the egress
proxy's Unix socket (mounted at ``/run/pinclaw/egress.sock``) to the daemon,
which judges every destination (``net/egress.py``).

The relay runs with the daemon's own Python (its version is known), started
isolated (``-I -S``). Where that Python lives in a place the sandbox hides (a
pyenv or uv Python under ``/home`` or ``/root``), only its pieces are mounted,
read-only: the program, the standard library, its compiled modules and
``libpython``; never anything inside a forbidden place. If that cannot be
done, the system's ``/usr/bin/python3`` is used when the sandbox sees it.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

INSIDE = "/run/pinclaw"
RELAY_INSIDE = f"{INSIDE}/relay.py"
SOCKET_INSIDE = f"{INSIDE}/egress.sock"
RELAY_FILE = Path(__file__).with_name("relay.py")
SYSTEM_PYTHON = "/usr/bin/python3"


@dataclass(frozen=True, slots=True)
class Relay:
    """The interpreter that runs the relay, and the read-only mounts it and the relay need."""

    python: str
    mounts: tuple[str, ...]

    def options(self, socket_path: str) -> list[str]:
        """``bwrap`` options: after every other mount, so they land in the hidden places."""
        return [*self.mounts, "--ro-bind", socket_path, SOCKET_INSIDE]

    def argv(self, argv: Sequence[str]) -> list[str]:
        """``argv``, run by the relay."""
        return [self.python, "-I", "-S", RELAY_INSIDE, SOCKET_INSIDE, *argv]


def find_relay(hidden: Sequence[str], forbidden: Sequence[str]) -> Relay | None:
    """The relay for a sandbox hiding ``hidden``; never mounting inside ``forbidden``.

    Both are real paths; None when no Python can run inside.
    """
    if not RELAY_FILE.is_file():
        return None
    relay = ("--ro-bind", os.fspath(RELAY_FILE), RELAY_INSIDE)
    for python, pieces in (_own_python(), (SYSTEM_PYTHON, [])):
        program = os.path.realpath(python)
        if not os.access(program, os.X_OK):
            continue
        needed = [p for p in dict.fromkeys([program, *pieces]) if _under(p, hidden)]
        needed = [p for p in needed if not any(_under(p, [o]) for o in needed if o != p)]
        if any(_under(p, forbidden) for p in needed):
            continue
        if python == SYSTEM_PYTHON and needed:
            continue  # the system's Python is only a fallback: used where it is seen
        mounts = [option for p in needed for option in ("--ro-bind", p, p)]
        return Relay(program, (*mounts, *relay))
    return None


def _own_python() -> tuple[str, list[str]]:
    """The daemon's base interpreter (a virtualenv's is a link to it) and what it loads."""
    program = getattr(sys, "_base_executable", "") or sys.executable
    pieces = [os.path.dirname(os.__file__)]
    import _socket  # a compiled module: where the others are

    compiled = getattr(_socket, "__file__", None)
    if compiled:
        pieces.append(os.path.dirname(compiled))
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        libdir, name = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
        if libdir and name and os.path.exists(os.path.join(libdir, name)):
            pieces.append(os.path.join(libdir, name))
    return program, [os.path.realpath(p) for p in pieces]


def _under(path: str, places: Sequence[str]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in places)
