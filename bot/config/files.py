"""The config as a file on disk: its size and shape, and the paths it names.

``read_document`` refuses a file too large or nested too deep to be a config
before anything recursive sees it. ``check_paths`` makes sure every place the
config points at can be used: the data folder (and the workspace in it) is a
folder, or can be created, and can be written; file names meant for the
workspace or the data folder are plain names there, not folders; extra roots
are folders. Every command runs both, so ``pinclaw config check`` passes
exactly when ``pinclaw run`` would get past its config.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from bot.core.errors import ConfigError

MAX_BYTES = 1024 * 1024
MAX_DEPTH = 32


def read_document(path: Path) -> dict[str, Any]:
    """The parsed TOML of ``path``; ``ConfigError`` naming the problem in one line."""
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ConfigError(
                f"{path}: the file is {size:,} bytes; a config file is at most {MAX_BYTES:,}"
            )
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the file: {exc}") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: values are nested too deeply to read") from None
    if where := _too_deep(document):
        shown = where if len(where) <= 40 else where[:40] + "…"
        raise ConfigError(f"{path}: {shown}: nested more than {MAX_DEPTH} levels deep")
    return document


def _too_deep(document: dict[str, Any]) -> str:
    """The key path of the first value nested deeper than ``MAX_DEPTH`` ("" if none)."""
    stack: list[tuple[Any, str, int]] = [(document, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            return where or "the document"
        if isinstance(value, dict):
            stack += [(v, f"{where}.{k}" if where else str(k), depth + 1) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    return ""


def check_paths(data_dir: Path, config: Any, where: str = "general.data_dir") -> None:
    """Every path the config names is usable; ``ConfigError`` naming the key (``where``
    for the data folder, which may come from ``$PINCLAW_DATA_DIR``) if not."""
    _folder(data_dir, where)
    workspace = data_dir / "workspace"
    if data_dir.is_dir():
        _folder(workspace, f"{where} (its workspace folder)")
    own = {workspace: "its workspace folder", data_dir / "pinclaw.db": "its database"}
    named = [
        ("agent.identity_file", config.agent.identity_file, workspace),
        ("memory.snapshot_file", config.memory.snapshot_file, workspace),
        ("security.audit_log", config.security.audit_log, data_dir),
    ]
    if config.daemon.log_file:
        named.append(("daemon.log_file", config.daemon.log_file, data_dir))
    for key, name, base in named:
        path = base / Path(name).expanduser()
        if taken := own.get(Path(os.path.normpath(path))):
            raise ConfigError(f"{key}: {path} is PinClaw's own {taken.removeprefix('its ')}")
        _file(path, key)
    for index, root in enumerate(config.security.extra_roots):
        folder = Path(root).expanduser()
        if folder.exists() and not folder.is_dir():
            raise ConfigError(f"security.extra_roots[{index}]: {folder} is a file, not a folder")


def _folder(path: Path, key: str) -> None:
    """``path`` is a writable folder, or can be created as one."""
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise ConfigError(f"{key}: {path} is a file, not a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise ConfigError(f"{key}: {path} is not writable for this user")
        return
    parent = _nearest_existing(path)
    if not parent.is_dir():
        raise ConfigError(f"{key}: {path} cannot be created: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{key}: {path} cannot be created: {parent} is not writable")


def _file(path: Path, key: str) -> None:
    """``path`` names a file (or none yet), not a folder, in a usable place."""
    if path.is_dir():
        raise ConfigError(f"{key}: {path} is a folder, not a file")
    parent = _nearest_existing(path.parent)
    if not parent.is_dir():
        raise ConfigError(f"{key}: {path} cannot be created: {parent} is a file, not a folder")


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")
