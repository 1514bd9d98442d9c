"""PinClaw's version: one source, the installed package's metadata (pyproject's ``version``).

Read on first use, not on import. The metadata is found as ``importlib.metadata``
finds it (the first ``pinclaw-*.dist-info`` or ``.egg-info`` along ``sys.path``),
but read here directly: ``importlib.metadata.version`` keeps a listing of every
folder on the path and parses the whole file as e-mail headers, about 1 MiB that
an idle daemon would hold for one line it logs at start. It is still the
fallback for what the plain search cannot read (a path entry that is a zip file).
"""

from __future__ import annotations

import functools
import os
import sys

UNKNOWN = "0+unknown"
"""What a source tree run without installing reports (no package metadata to read)."""


@functools.cache
def pinclaw_version() -> str:
    """The installed PinClaw's version, e.g. ``0.2.0``."""
    for entry in sys.path:
        found = _version_in(entry or ".")
        if found:
            return found
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pinclaw")
    except PackageNotFoundError:
        return UNKNOWN


def _version_in(folder: str) -> str:
    """The ``Version:`` of the first PinClaw metadata in ``folder`` ("" if none is there)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return ""
    for name in names:
        if not name.startswith("pinclaw-") or not name.endswith((".dist-info", ".egg-info")):
            continue
        file = "METADATA" if name.endswith(".dist-info") else "PKG-INFO"
        try:
            with open(os.path.join(folder, name, file), encoding="utf-8") as metadata:
                for line in metadata:
                    if line.startswith("Version:"):
                        return line.partition(":")[2].strip()
                    if not line.strip():
                        break  # the headers end at the first blank line
        except OSError:
            continue
    return ""
