"""Checks of what PinClaw keeps on disk: the config file, the data folder, the database
and the free space where they are. Each is a plain blocking function (run in a thread)."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
from pathlib import Path

from bot.cli.doctor.findings import Finding
from bot.config import LoadedConfig, load_config
from bot.core.errors import ConfigError

MiB = 1024 * 1024
DISK_FAIL_BYTES = 100 * MiB
DISK_WARN_BYTES = 1024 * MiB
EXAMPLE_HINT = "pinclaw.example.toml documents every key"


def load(explicit: str | None) -> tuple[LoadedConfig | None, Finding]:
    """The config, and the finding about it; None when it cannot be used."""
    try:
        loaded = load_config(explicit)
    except ConfigError as exc:
        text = str(exc)
        fix = "" if "pinclaw onboard" in text else f"correct it in the file; {EXAMPLE_HINT}"
        # One problem a line; the ones after the first indented under it.
        return None, Finding("config", "fail", "config: " + text.replace("\n", "\n    "), fix)
    path = loaded.path
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        mode = 0
    if mode & 0o077:
        return loaded, Finding(
            "config",
            "warn",
            f"config {path} is valid, but other users may read it (mode {mode:04o}) "
            "and it may hold keys",
            f"chmod 600 {path}",
        )
    return loaded, Finding("config", "ok", f"config {path} is valid")


def data_folder(loaded: LoadedConfig) -> Finding:
    """The data folder exists, is private, and everything in it is writable by this user."""
    folder = loaded.data_dir
    if not folder.is_dir():
        return Finding(
            "data_dir",
            "info",
            f"data folder {folder}: not created yet (PinClaw makes it on first use)",
        )
    own = [
        folder,
        loaded.workspace,
        *(Path(f"{loaded.database}{end}") for end in ("", "-wal", "-shm")),
    ]
    stuck = [p for p in own if p.exists() and not os.access(p, os.W_OK)]
    user = pwd.getpwuid(os.getuid()).pw_name
    if stuck:
        names = ", ".join(p.name for p in stuck)
        return Finding(
            "data_dir",
            "fail",
            f"data folder {folder}: {user} cannot write {names} (made by another user, e.g. sudo?)",
            f"sudo chown -R {user}: {folder}",
        )
    mode = stat.S_IMODE(folder.stat().st_mode)
    if mode & 0o077:
        return Finding(
            "data_dir",
            "warn",
            f"data folder {folder}: other users may look inside (mode {mode:04o})",
            f"chmod 700 {folder}",
        )
    return Finding("data_dir", "ok", f"data folder {folder}: writable, private")


def database(path: Path) -> Finding:
    """SQLite's full integrity check, as ``pinclaw db check`` runs it."""
    from bot.cli.db import integrity_problem
    from bot.store.db import damaged_message

    if not path.exists():
        return Finding("database", "info", f"database: none yet at {path} (made on first use)")
    if problem := integrity_problem(path):
        return Finding("database", "fail", damaged_message(path, problem))
    size = path.stat().st_size
    return Finding(
        "database",
        "ok",
        f"database {path}: the integrity check found nothing wrong ({_size(size)})",
    )


def disk(folder: Path) -> Finding:
    """Free space on the file system that holds the data folder."""
    place = next((p for p in (folder, *folder.parents) if p.exists()), Path("/"))
    usage = shutil.disk_usage(place)
    text = f"disk: {_size(usage.free)} free of {_size(usage.total)} where {folder} is"
    fix = (
        "make room: sudo apt clean, sudo journalctl --vacuum-size=100M, "
        "and old files in the workspace"
    )
    if usage.free < DISK_FAIL_BYTES:
        return Finding("disk", "fail", f"{text}; the database and logs need room to write", fix)
    if usage.free < DISK_WARN_BYTES:
        return Finding("disk", "warn", f"{text}; that is getting tight", fix)
    return Finding("disk", "ok", text)


def _size(count: int) -> str:
    for unit, scale in (("GiB", 1024 * MiB), ("MiB", MiB), ("KiB", 1024)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"
