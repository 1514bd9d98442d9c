"""Start-up of a command without the cyclic garbage collector.

Start-up (imports, the config, opening the core) allocates a few hundred
thousand objects that live as long as the process, and the collector, which
runs every 700 new objects, walks them again and again for nothing: about a
tenth of ``pinclaw agent -m``. The console script pauses it before the command
runs; the command calls ``resume_collector`` once it is up, which moves what
start-up made to the permanent generation (``gc.freeze``) so later collections
skip it, and turns collection back on. A command that does not call it gets
collection back before it runs. Called in-process (tests), nothing was paused
and both functions do nothing.
"""

from __future__ import annotations

import gc

_paused: set[str] = set()  # holds "gc" while this module has collection paused


def pause_collector() -> None:
    """Stop automatic collection until ``resume_collector`` (if it is on)."""
    if gc.isenabled():
        gc.disable()
        _paused.add("gc")


def resume_collector(*, freeze: bool = True) -> None:
    """Collect again, if ``pause_collector`` stopped it; ``freeze`` keeps what exists
    now (start-up's long-lived objects) out of every later collection."""
    if "gc" not in _paused:
        return
    _paused.clear()
    if freeze:
        gc.freeze()
    gc.enable()
