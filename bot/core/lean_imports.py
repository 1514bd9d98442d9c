"""Keep two optional imports of our libraries out of the process.

Both are imports a library makes only if the package happens to be installed,
for features PinClaw never uses, and together they cost about 9 MiB of every
PinClaw process (measured in bench/README.md):

- ``cryptography``: python-telegram-bot imports it, when present, for Telegram
  Passport decryption (``Bot(private_key=...)``); PyJWT for RSA/EC keys. It is
  installed only because the ``mcp`` SDK asks for ``pyjwt[crypto]``.
- ``httpx._main``: httpx's command-line client, which imports click and pygments
  when they are installed (``uvicorn``, again from ``mcp``, brings click).

Both libraries treat the module as absent (``ImportError``) and carry on. A
``None`` in ``sys.modules`` is Python's documented way to make an import fail;
nothing is done when the module has already been imported, and
``allow_skipped_imports`` lifts the skip before the ``mcp`` SDK, which needs
cryptography, is imported.
"""

from __future__ import annotations

import importlib.util
import sys

SKIPPED = ("cryptography", "httpx._main")


ABSENT = ("sniffio",)
"""Imports that fail anyway when the package is not installed, but only after a search
of every ``sys.path`` entry: httpcore imports sniffio inside every request (and uses
asyncio without it), a dozen directory searches a message."""


def skip_unused_optional_imports() -> None:
    """Make the optional imports above fail fast, unless something already loaded them;
    and those of ``ABSENT`` that are not installed, without the search each time."""
    for name in SKIPPED:
        parent = name.rpartition(".")[0]
        if name in sys.modules or (parent and parent in sys.modules):
            continue
        sys.modules[name] = None  # type: ignore[assignment]
    for name in ABSENT:
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            sys.modules[name] = None  # type: ignore[assignment]


def allow_skipped_imports() -> None:
    """Undo the skip before importing a library that needs one of them (the ``mcp`` SDK)."""
    for name in SKIPPED:
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]
