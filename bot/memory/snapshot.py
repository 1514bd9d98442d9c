"""MEMORY_SNAPSHOT.md: the core memories as Markdown a person can read, and PinClaw can
restore from if the database is lost.

Each entry is a heading with its key, one HTML comment with its scope, category
and time (invisible when rendered), and its content. Restoring reads exactly
that shape back; anything else in the file is ignored. A person's entries name
them the way a new database can find them again: ``owner``, or one of their
accounts (``account:telegram:7001``), never a row id.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from bot.memory.models import Memory, NewMemory

OWNER = "owner"
ACCOUNT = "account:"
HEADER = (
    "# PinClaw memory snapshot\n\n"
    "<!-- Written by PinClaw every day (and by `pinclaw memory export`). If the database\n"
    "is lost, PinClaw restores these memories from this file at its next start. -->\n"
)
_ENTRY = re.compile(
    r"^### (?P<key>[^\n]+)\n<!-- scope=(?P<scope>\S+) category=(?P<category>\S+) "
    r"updated=(?P<updated>\S+) -->\n(?P<content>.*?)(?=\n### |\Z)",
    re.MULTILINE | re.DOTALL,
)


def render(memories: list[Memory], scopes: Mapping[str, str] | None = None) -> str:
    """The snapshot text for ``memories``; ``scopes`` renames scopes as they are written."""
    parts = [HEADER]
    names = scopes or {}
    for memory in sorted(memories, key=lambda m: (names.get(m.scope, m.scope), m.key)):
        updated = datetime.fromtimestamp(memory.updated_at, UTC).isoformat(timespec="seconds")
        key = " ".join(memory.key.split())
        scope = names.get(memory.scope, memory.scope)
        parts.append(
            f"\n### {key}\n<!-- scope={scope} category={memory.category} "
            f"updated={updated} -->\n{memory.content.strip()}\n"
        )
    return "".join(parts)


def parse(text: str) -> list[tuple[NewMemory, float]]:
    """The entries in a snapshot, with the time each was last updated."""
    found = []
    for match in _ENTRY.finditer(text):
        try:
            updated = datetime.fromisoformat(match["updated"]).timestamp()
        except ValueError:
            continue
        content = match["content"].strip()
        if content:
            item = NewMemory(match["key"].strip(), content, match["category"], match["scope"])
            found.append((item, updated))
    return found


def write(path: Path, memories: list[Memory], scopes: Mapping[str, str] | None = None) -> None:
    """Write the snapshot atomically (a crash never leaves half a file), owner-only."""
    temporary = path.with_name(f".{path.name}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(render(memories, scopes))
    os.replace(temporary, path)
