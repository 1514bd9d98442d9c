"""Putting a backup back: ``pinclaw db restore FILE``.

The backup, checked by the caller (``bot.cli.db``), is copied with SQLite's
backup API beside the database, and only then swapped in: the database it
replaces is kept aside, never deleted, as ``recover`` keeps a damaged one. It
blocks: call it in a thread, with the data folder's lock held (no daemon may
have the file open).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from bot.core.errors import UserError

_SIDE_FILES = ("-wal", "-shm", "-journal")


@dataclass(frozen=True, slots=True)
class Restored:
    """What ``restore`` did: pages copied, where the replaced database went (None: there was
    none), and whether the backup's tables are older than this PinClaw's."""

    pages: int
    aside: Path | None
    older: bool


def component_versions(path: Path) -> dict[str, int]:
    """Each component's schema version in the database at ``path`` (read-only)."""
    uri = f"{path.absolute().as_uri()}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
        rows = conn.execute("SELECT component, version FROM schema_versions").fetchall()
    return {str(name): int(version) for name, version in rows}


def restore(source: Path, database: Path) -> Restored:
    """Replace ``database`` by a copy of ``source``, a backup already checked to be sound.

    Raises ``UserError`` when the copy fails, with ``database`` unchanged.
    """
    from bot.store.schema import behind

    versions = component_versions(source)
    fresh = database.with_name(f"{database.name}.restoring")
    _remove(fresh)
    try:
        with (
            contextlib.closing(
                sqlite3.connect(f"{source.absolute().as_uri()}?mode=ro", uri=True)
            ) as src,
            contextlib.closing(sqlite3.connect(fresh)) as dst,
        ):
            src.backup(dst)
            pages = int(dst.execute("PRAGMA page_count").fetchone()[0])
        os.chmod(fresh, 0o600)
    except (OSError, sqlite3.Error) as exc:
        _remove(fresh)
        raise UserError(f"the restore failed ({exc}); {database} is unchanged") from None
    aside = None
    if database.exists():
        aside = database.with_name(f"{database.name}.replaced-{time.strftime('%Y%m%d-%H%M%S')}")
        for suffix in ("", *_SIDE_FILES):
            side = Path(f"{database}{suffix}")
            if side.exists():
                side.replace(Path(f"{aside}{suffix}"))
    fresh.replace(database)
    return Restored(pages, aside, bool(behind(versions)))


def _remove(path: Path) -> None:
    for suffix in ("", *_SIDE_FILES):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
