"""Chromium's processes, found and measured through ``/proc`` (Linux only).

The browser is launched with a marker switch of its own (``--pinclaw-browser=ID``,
which Chromium ignores); its process tree is every process with that switch
and all their descendants (zygotes, renderers, the GPU and utility processes).
Two sums over the tree: resident memory (``resident_bytes``), where a page
shared by several processes (Chromium's code, above all) counts once for
each, so it overstates what the tree takes by hundreds of MiB; and the
proportional set size (``proportional_bytes``, from ``smaps_rollup``), where a
shared page is split between the processes sharing it: what the tree really
takes from the machine, and what the browser's memory cap is held to.
"""

from __future__ import annotations

import os
import signal
from collections import defaultdict

MARKER = "--pinclaw-browser="
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def marker(browser_id: str) -> str:
    """The switch that names one browser launch."""
    return MARKER + browser_id


def tree(browser_id: str, proc: str = "/proc") -> set[int]:
    """The pids of the browser launched with ``marker(browser_id)`` and all its descendants."""
    wanted = marker(browser_id).encode()
    children: dict[int, list[int]] = defaultdict(list)
    roots: set[int] = set()
    for pid in _pids(proc):
        parent = _parent(proc, pid)
        if parent is None:
            continue
        children[parent].append(pid)
        try:
            with open(f"{proc}/{pid}/cmdline", "rb") as file:
                if wanted in file.read().split(b"\0"):
                    roots.add(pid)
        except OSError:
            continue
    found: set[int] = set()
    waiting = list(roots)
    while waiting:
        pid = waiting.pop()
        if pid not in found:
            found.add(pid)
            waiting.extend(children.get(pid, ()))
    return found


def resident_bytes(pids: set[int], proc: str = "/proc") -> int:
    """The resident memory of ``pids`` together (a process gone meanwhile counts 0)."""
    total = 0
    for pid in pids:
        try:
            with open(f"{proc}/{pid}/statm", encoding="ascii") as file:
                total += int(file.read().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            continue
    return total


def proportional_bytes(pids: set[int], proc: str = "/proc") -> int:
    """The proportional set size of ``pids`` together (a process gone meanwhile counts 0)."""
    total = 0
    for pid in pids:
        try:
            with open(f"{proc}/{pid}/smaps_rollup", encoding="ascii") as file:
                for line in file:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError, IndexError):
            continue
    return total


def kill(pids: set[int]) -> None:
    """SIGKILL each of ``pids`` (the browser's own tree), ignoring those already gone."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue


def _pids(proc: str) -> list[int]:
    try:
        return [int(name) for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return []


def _parent(proc: str, pid: int) -> int | None:
    try:
        with open(f"{proc}/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return None
    # "pid (comm) state ppid …": comm may hold spaces and parentheses, so split after the last ")"
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None
