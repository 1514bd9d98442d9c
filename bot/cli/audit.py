"""``pinclaw audit verify`` and ``pinclaw audit show``."""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any

from bot.core.errors import UsageError
from bot.security.audit import verify


def verify_audit(path: Path, *, named: bool = False) -> int:
    """Check the chain; print one line; exit 0 when it holds (or there is none yet: a fresh
    install), 1 when it is broken; a log ``named`` on the command line must exist."""
    if not path.exists():
        if named:
            raise UsageError(f"there is no file {path}")
        print(f"{path}: no audit log yet (no tool has been called), nothing to verify")
        return 0
    result = verify(path)
    if result.ok:
        print(f"{path}: OK, {result.entries} entries, the hash chain is intact")
        return 0
    print(
        f"{path}: BROKEN at line {result.line}: {result.problem} "
        f"(the {result.entries} entries before it are intact)"
    )
    return 1


def show_audit(path: Path, count: int) -> int:
    """Print the last ``count`` entries as one line each."""
    if not path.exists():
        print(f"No audit entries yet ({path} appears with the first tool call).")
        return 0
    with path.open(encoding="utf-8") as handle:
        last = deque((line for line in handle if line.strip()), maxlen=max(1, count))
    for raw in last:
        try:
            entry = json.loads(raw)
        except ValueError:
            print(f"(unreadable line) {raw.strip()[:120]}")
            continue
        if entry.get("kind") == "panel":  # what a person did in the web panel
            print(_panel_line(entry))
            continue
        args = json.dumps(entry.get("arguments", {}), ensure_ascii=False)
        args = args if len(args) <= 100 else args[:99] + "…"
        who = f" by {entry['approved_by']}" if entry.get("approved_by") else ""
        why = f" ({entry['reason']})" if entry.get("reason") else ""
        print(
            f"{entry.get('seq', '?'):>5} {entry.get('ts', '')[:19]} {entry.get('sender', '')} "
            f"{entry.get('tool', '')} {args} -> {entry.get('decision', '')}{who}{why}, "
            f"{entry.get('outcome', '')}"
        )
    return 0


def _panel_line(entry: dict[str, Any]) -> str:
    details = json.dumps(entry.get("details", {}), ensure_ascii=False)
    details = details if len(details) <= 100 else details[:99] + "…"
    return (
        f"{entry.get('seq', '?'):>5} {entry.get('ts', '')[:19]} {entry.get('person', '')} "
        f"(web panel, {entry.get('client', '')}) {entry.get('action', '')} {details} "
        f"-> {entry.get('outcome', '')}"
    )
