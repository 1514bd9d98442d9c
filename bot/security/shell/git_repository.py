"""What a git command in a folder will read, found without running git.

``read_repository`` finds the repository as git 2.39 does (``-C``,
``--git-dir``, ``--work-tree``, ``--bare``; else walking up from the folder
to a ``.git`` folder or a ``.git`` file's ``gitdir:``, or a bare repository),
then reads every settings file git reads there: ``commondir``'s ``config``,
``config.worktree``, every ``include.path`` and ``includeIf.*.path``
(whatever the condition), and the same again for each repository nested in
the index (``git status`` looks into submodules). It runs nothing. What the
settings make git run is sorted by ``shell.git_settings``.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from bot.security.shell.git_config_file import ConfigError, parse_config

MAX_FILES = 64
MAX_REPOSITORIES = 32
MAX_INCLUDE_DEPTH = 10  # git's own limit
MAX_CONFIG_BYTES = 1 << 20
MAX_INDEX_BYTES = 64 << 20
_HEX = re.compile(rb"^[0-9a-f]{40}(?:[0-9a-f]{24})?\s*$")


class Unreadable(Exception):
    """The repository's settings cannot be known (the message says why)."""


@dataclass
class Repository:
    """Everything git reads from one repository (and the ones nested in it)."""

    git_dir: Path
    common_dir: Path
    top: Path | None  # the working tree's top folder; None when bare
    settings: list[tuple[str, str | None, Path]] = field(default_factory=list)
    places: list[Path] = field(default_factory=list)  # files and folders it reads
    hooks: list[str] = field(default_factory=list)
    nested: list[Repository] = field(default_factory=list)

    def every(self) -> list[Repository]:
        """This repository and all nested ones."""
        return [self, *(repo for child in self.nested for repo in child.every())]


@dataclass
class _Budget:
    files: int = MAX_FILES
    repositories: int = MAX_REPOSITORIES

    def spend_file(self) -> None:
        self.files -= 1
        if self.files < 0:
            raise Unreadable("git would read more settings files than can be checked")


def read_repository(
    folder: Path,
    *,
    home: Path,
    git_dir: Path | None = None,
    work_tree: Path | None = None,
    bare: bool = False,
) -> Repository | None:
    """The repository git would use in ``folder`` (None: no repository there).

    Raises ``Unreadable`` when its settings cannot be read or followed.
    """
    budget = _Budget()
    if git_dir is None and bare:
        git_dir = folder
    if git_dir is not None:
        found: tuple[Path, Path | None] | None = (git_dir, work_tree or folder)
    else:
        found = _discover(folder)
    if found is None:
        return None
    return _repository(found[0], work_tree or found[1], home, budget, nested=True)


def _discover(folder: Path) -> tuple[Path, Path | None] | None:
    """Walk up from ``folder`` like ``setup_git_directory_gently``: (git dir, top)."""
    for place in (folder, *folder.parents):
        dotgit = place / ".git"
        if _is_regular_file(dotgit):
            return _gitfile(dotgit), place
        if _is_git_dir(dotgit):
            return dotgit, place
        if _is_git_dir(place):
            return place, None  # a bare repository
    return None


def _repository(
    git_dir: Path, top: Path | None, home: Path, budget: _Budget, *, nested: bool
) -> Repository:
    budget.repositories -= 1
    if budget.repositories < 0:
        raise Unreadable("the repository holds more nested repositories than can be checked")
    common = _common_dir(git_dir)
    repo = Repository(git_dir, common, top, places=[git_dir, common])
    _read_file(common / "config", repo, home, budget, depth=0)
    _read_file(git_dir / "config.worktree", repo, home, budget, depth=0)
    worktree = next((v for k, v, _ in reversed(repo.settings) if k == "core.worktree"), None)
    if worktree:
        repo.top = setting_path(worktree, git_dir, home)
        repo.places.append(repo.top)
    repo.places.extend(_alternates(common))
    hooks_path = next((v for k, v, _ in reversed(repo.settings) if k == "core.hookspath"), None)
    base = top if top is not None else git_dir
    repo.hooks = _hooks(setting_path(hooks_path, base, home) if hooks_path else common / "hooks")
    sha256 = any(k == "extensions.objectformat" and v == "sha256" for k, v, _ in repo.settings)
    if nested and repo.top is not None:
        for path in _gitlinks(git_dir / "index", 32 if sha256 else 20):
            inner = repo.top / path
            dotgit = inner / ".git"
            if _is_regular_file(dotgit):
                repo.nested.append(_repository(_gitfile(dotgit), inner, home, budget, nested=True))
            elif _is_git_dir(dotgit):
                repo.nested.append(_repository(dotgit, inner, home, budget, nested=True))
    return repo


def _read_file(path: Path, repo: Repository, home: Path, budget: _Budget, depth: int) -> None:
    if depth > MAX_INCLUDE_DEPTH:
        raise Unreadable("the repository's settings include each other too deeply")
    try:
        pairs = _parsed(str(path))
    except (FileNotFoundError, NotADirectoryError):
        return  # git skips a missing file, an include too
    except (OSError, ConfigError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else exc
        raise Unreadable(f"git's settings file {path} cannot be read: {why}") from None
    budget.spend_file()
    repo.places.append(path)
    for key, value in pairs:
        repo.settings.append((key, value, path))
        including = key == "include.path" or (key[:10] == "includeif." and key[-5:] == ".path")
        if value and including:
            _read_file(setting_path(value, path.parent, home), repo, home, budget, depth + 1)


def setting_path(value: str, base: Path, home: Path) -> Path:
    """A path from a setting: ``~/`` is the home folder, a relative one starts at ``base``."""
    if value == "~" or value.startswith("~/"):
        value = str(home) + value[1:]
    return Path(os.path.normpath(base / value))


def _parsed(path: str) -> list[tuple[str, str | None]]:
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError("it is not a regular file")
    if info.st_size > MAX_CONFIG_BYTES:
        raise ConfigError("it is too large")
    return _parsed_cached(path, _identity(info))


def _identity(info: os.stat_result) -> tuple[int, ...]:
    """What changes whenever a file does (the change time cannot be set back)."""
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


@functools.lru_cache(maxsize=256)
def _parsed_cached(path: str, identity: tuple[int, ...]) -> list[tuple[str, str | None]]:
    return parse_config(_read(path, MAX_CONFIG_BYTES))


def _read(path: Path | str, limit: int) -> bytes:
    """A regular file's first ``limit`` bytes; never waits on a pipe or a device."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "it is not a regular file")
        chunks, left = [], limit
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _is_regular_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _gitfile(dotgit: Path) -> Path:
    """The git dir a ``.git`` file names (``read_gitfile_gently``)."""
    try:
        text = _read(dotgit, 8192)
    except OSError as exc:
        raise Unreadable(f"{dotgit} cannot be read: {exc.strerror}") from None
    if not text.startswith(b"gitdir: "):
        raise Unreadable(f"{dotgit} is not a git file git can read")
    target = os.fsdecode(text[len(b"gitdir: ") :].rstrip(b"\r\n"))
    found = Path(os.path.normpath(dotgit.parent / target))
    if not _is_git_dir(found):
        raise Unreadable(f"{dotgit} names {found}, which is not a repository")
    return found


def _is_git_dir(path: Path) -> bool:
    """``is_git_directory``: a valid HEAD, and objects and refs (in ``commondir``)."""
    if not _valid_head(path / "HEAD"):
        return False
    try:
        common = _common_dir(path)
    except Unreadable:
        return True  # git would look further; reading it shows the problem
    return all(os.access(common / name, os.X_OK) for name in ("objects", "refs"))


def _valid_head(head: Path) -> bool:
    try:
        if head.is_symlink():
            return os.readlink(head).startswith("refs/")
        text = _read(head, 255)
    except (OSError, ValueError):
        return False
    if text.startswith(b"ref:"):
        return text[4:].lstrip().startswith(b"refs/")
    return bool(_HEX.match(text))


def _common_dir(git_dir: Path) -> Path:
    try:
        text = _read(git_dir / "commondir", 8192)
    except FileNotFoundError:
        return git_dir
    except OSError as exc:
        raise Unreadable(f"{git_dir / 'commondir'} cannot be read: {exc.strerror}") from None
    return Path(os.path.normpath(git_dir / os.fsdecode(text.rstrip(b"\r\n"))))


def _alternates(common: Path) -> list[Path]:
    objects = common / "objects"
    try:
        data = _read(objects / "info" / "alternates", 1 << 16)
        lines = data.decode("utf-8", "surrogateescape").splitlines()
    except OSError:
        return []
    return [
        Path(os.path.normpath(objects / line.strip('"')))
        for line in lines
        if line.strip() and not line.startswith("#")
    ]


def _hooks(folder: Path) -> list[str]:
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [
        name
        for name in names
        if not name.endswith(".sample")
        and _is_regular_file(folder / name)
        and os.access(folder / name, os.X_OK)
    ]


def _gitlinks(index: Path, hash_size: int) -> list[str]:
    """The paths of submodules (mode 160000) in an index file, read like ``read-cache.c``."""
    try:
        info = os.stat(index)
    except OSError:
        return []
    if info.st_size > MAX_INDEX_BYTES:
        raise Unreadable(f"the index {index} is too large to check")
    try:
        links = _gitlinks_cached(str(index), hash_size, _identity(info))
        for name in os.listdir(index.parent):
            if name.startswith("sharedindex."):  # a split index: its base holds entries too
                base = index.parent / name
                shared = os.stat(base)
                if shared.st_size > MAX_INDEX_BYTES:
                    raise Unreadable(f"the index {base} is too large to check")
                links = links + _gitlinks_cached(str(base), hash_size, _identity(shared))
        return links
    except OSError as exc:
        raise Unreadable(f"the index {index} cannot be read: {exc.strerror}") from None


@functools.lru_cache(maxsize=64)
def _gitlinks_cached(path: str, hash_size: int, identity: tuple[int, ...]) -> list[str]:
    found = _entries(_read(path, MAX_INDEX_BYTES), hash_size)
    if found is None:
        raise Unreadable(f"the index {path} is not one git would read")
    return [name for name, mode in found if mode & 0o170000 == 0o160000]


def _entries(data: bytes, hash_size: int) -> list[tuple[str, int]] | None:
    if len(data) < 12 or data[:4] != b"DIRC":
        return None
    version = int.from_bytes(data[4:8], "big")
    count = int.from_bytes(data[8:12], "big")
    if version not in (2, 3, 4):
        return None
    pos, previous, found = 12, b"", []
    for _ in range(count):
        fixed = pos + 40 + hash_size + 2
        if fixed > len(data):
            return None
        mode = int.from_bytes(data[pos + 24 : pos + 28], "big")
        flags = int.from_bytes(data[fixed - 2 : fixed], "big")
        start = fixed + (2 if flags & 0x4000 and version >= 3 else 0)
        if version == 4:
            strip, start = _varint(data, start)
            end = data.find(b"\0", start)
            if end < 0 or strip > len(previous):
                return None
            name = previous[: len(previous) - strip] + data[start:end]
            pos = end + 1
        else:
            end = data.find(b"\0", start)
            if end < 0:
                return None
            name = data[start:end]
            pos += (start - pos + len(name) + 8) & ~7
        previous = name
        found.append((os.fsdecode(name), mode))
    return found if len(data) - pos >= hash_size else None  # extensions, then the checksum


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """git's offset varint (``decode_varint``)."""
    c = data[pos] if pos < len(data) else 0
    pos += 1
    value = c & 127
    while c & 128:
        c = data[pos] if pos < len(data) else 0
        pos += 1
        value = ((value + 1) << 7) + (c & 127)
    return value, pos
