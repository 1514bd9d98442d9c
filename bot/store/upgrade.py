"""Safe schema upgrades: a copy of the database first, and one line when something fails.

Before PinClaw changes the tables of a database that holds data, it copies the
file with SQLite's backup API to ``backups/pre-<version>.db`` beside it
(``version`` is the PinClaw about to upgrade it). The copy is made once per
process and version; a copy already there is kept, not replaced: an upgrade
that failed changed nothing, so the first copy is still the state from before
it, and a restart loop cannot fill the disk with copies. When the copy cannot
be made (a full disk), nothing is upgraded.

The upgrade itself runs as one transaction (``Database``): a failing step
undoes every component's steps, and ``MigrationFailed`` names the copy.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from pathlib import Path

from bot.core.errors import UserError

BACKUPS = "backups"
_made: set[Path] = set()  # the copies this process made or found, so each is taken once


class BackupFailed(UserError):
    """The copy before an upgrade could not be made; the database was left as it was."""


class MigrationFailed(UserError):
    """A migration step failed; the database is as it was, and ``backup`` is its copy."""

    def __init__(self, message: str, backup: Path) -> None:
        super().__init__(message)
        self.backup = backup


def backup_path(database: Path, version: str) -> Path:
    """Where the copy of ``database`` before the upgrade to ``version`` goes."""
    return database.parent / BACKUPS / f"pre-{version}.db"


def backup_before_upgrade(raw: sqlite3.Connection, database: Path, version: str) -> Path:
    """Copy the open database (on its connection's thread) unless this version's copy exists.

    Raises ``BackupFailed`` (nothing written) when the copy cannot be made.
    """
    target = backup_path(database, version)
    if target in _made or target.exists():
        _made.add(target)
        return target
    partial = target.with_name(f"{target.name}.partial")
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.closing(sqlite3.connect(partial)) as copy:
            raw.backup(copy)
            verdict = copy.execute("PRAGMA quick_check").fetchone()[0]
        if verdict != "ok":
            raise sqlite3.DatabaseError(f"the copy does not pass SQLite's quick check: {verdict}")
        os.chmod(partial, 0o600)
        os.replace(partial, target)  # only a whole copy ever has the final name
    except (OSError, sqlite3.Error) as exc:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise BackupFailed(backup_failed(database, target, version, exc)) from None
    _made.add(target)
    return target


def backup_failed(database: Path, target: Path, version: str, exc: BaseException) -> str:
    """One line: the upgrade did not happen, because the copy before it failed, and what to do."""
    full = (isinstance(exc, OSError) and exc.errno == errno.ENOSPC) or "full" in str(exc).lower()
    fix = (
        f"free some space on the disk of {target.parent} and start PinClaw again"
        if full
        else f"make sure PinClaw can write to {target.parent} and start it again"
    )
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return (
        f"the database {database} needs an upgrade for PinClaw {version}, but the copy "
        f"taken before it failed ({reason}); nothing was changed: {fix}"
    )


def migration_failed(
    database: Path, version: str, step: str, exc: BaseException, backup: Path
) -> MigrationFailed:
    """The error for a failed upgrade: what failed, that nothing changed, and where the copy is."""
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return MigrationFailed(
        f"the database {database} could not be upgraded for PinClaw {version}: {step} failed "
        f"({reason}); nothing was changed, so the version used before still works with it, "
        f"and its copy from before the upgrade is {backup}",
        backup,
    )


def statements(script: str) -> list[str]:
    """The SQL statements of a migration script, one by one.

    ``executescript`` would commit the upgrade's open transaction before it runs;
    SQLite's own ``complete_statement`` finds where each statement ends (a ``;``
    in a string, a comment or a trigger's body does not end one).
    """
    found: list[str] = []
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \t\r\n;"):
                found.append(pending)
            pending = ""
    if pending.strip(" \t\r\n;"):
        found.append(pending.removesuffix(";"))  # no ";" after the last one
    return found


def run_script(script: str, raw: sqlite3.Connection) -> None:
    """Run a migration script's statements inside the transaction ``raw`` has open."""
    for statement in statements(script):
        raw.execute(statement)
