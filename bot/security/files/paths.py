"""The workspace sandbox: which paths the agent's file tools may touch, and safe I/O there.

``PathGuard`` resolves a path the way the kernel would (relative paths against
the workspace, ``~`` to the home folder, every symbolic link followed) and
judges the result: inside the workspace or an extra root, outside, or in a
forbidden location. Forbidden wins over everything, except that a forbidden
folder holding the workspace (``~/.pinclaw`` holds ``~/.pinclaw/workspace``)
still leaves the workspace itself usable.

Checking alone cannot hold against a path that changes after the check, so
the I/O helpers take a checked path and reach it through directory file
descriptors without following any link (``bot.security.files.dirfd``). They block:
tools call them through ``asyncio.to_thread``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Generator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from bot.core.errors import Refused, ToolError
from bot.core.tool_api import Assessment, Risk
from bot.security.files import dirfd
from bot.security.files.dirfd import Entry, Kind
from bot.security.files.resolve import Unresolvable, resolve, settled

__all__ = ["Entry", "Kind", "PathGuard", "PathRefused", "Verdict"]

Verdict = Literal["inside", "outside", "forbidden"]

MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
MAX_WALK_DEPTH = 64


class PathRefused(Refused):
    """The policy refuses a path; ``forbidden`` means no approval can allow it."""

    def __init__(self, message: str, *, forbidden: bool) -> None:
        super().__init__(message)
        self.forbidden = forbidden


class PathGuard:
    """Where file tools may work: the workspace and extra roots, minus forbidden places.

    Extra roots and forbidden places may start with ``~`` (``home``); relative
    ones are taken relative to the workspace. Judging: ``check`` (raises),
    ``verdict`` (never raises), ``assess`` (for a tool's policy assessment),
    ``display``. I/O on a path returned by ``check``: ``read_bytes``,
    ``write_bytes``, ``append_bytes``, ``stat``, ``list_dir``, ``walk``; they block.
    """

    def __init__(
        self,
        workspace: Path,
        *,
        extra_roots: Sequence[Path] = (),
        forbidden: Sequence[str] = (),
        home: Path | None = None,
    ) -> None:
        self.home = Path(os.path.abspath(home if home is not None else Path.home()))
        self.workspace = Path(settled(os.path.abspath(workspace)))
        self._ws = str(self.workspace)
        extra = [Path(settled(self._absolute(os.fspath(r), None))) for r in extra_roots]
        self.roots: tuple[Path, ...] = (self.workspace, *extra)
        self._roots = [str(r) for r in self.roots]
        places: set[str] = set()
        for entry in forbidden:
            absolute = self._absolute(entry, None)
            places.update((os.path.normpath(absolute), settled(absolute)))
        self._forbidden = sorted(places)
        self._where = (
            "the workspace" if not extra else "the workspace and the other allowed folders"
        )

    @property
    def forbidden(self) -> tuple[str, ...]:
        """The forbidden places as absolute paths (each as written and with links resolved)."""
        return tuple(self._forbidden)

    def absolute(self, raw: str, base: Path | None = None) -> str:
        """``raw`` as a normalised absolute path (``~`` expanded), without touching the disk."""
        return os.path.normpath(self._absolute(raw, base))

    def check(self, raw: str, *, must_exist: bool = False) -> Path:
        """The resolved absolute path for ``raw``, or ``PathRefused`` saying why not."""
        lexical, resolved, exists = self._locate(raw, None)
        shown = _shown(raw)
        if self._is_forbidden(lexical):
            raise PathRefused(f"'{shown}' is in a forbidden location", forbidden=True)
        if self._is_forbidden(resolved):
            raise PathRefused(f"'{shown}' points into a forbidden location", forbidden=True)
        if self._root_of(resolved) is None:
            how = "points" if self._root_of(lexical) is not None else "is"
            raise PathRefused(f"'{shown}' {how} outside {self._where}", forbidden=False)
        if must_exist and not exists:
            raise ToolError(f"'{shown}' does not exist")
        return Path(resolved)

    def verdict(self, raw: str, base: Path | None = None) -> Verdict:
        """Judge ``raw`` (relative to ``base`` or the workspace) without raising.

        A NUL byte is never a real path and is judged forbidden; a path that
        cannot be resolved (a link loop, too long) is judged outside.
        """
        if "\0" in raw:
            return "forbidden"
        try:
            lexical, resolved, _ = self._locate(raw, base)
        except ToolError:
            return "outside"
        if self._is_forbidden(lexical) or self._is_forbidden(resolved):
            return "forbidden"
        return "inside" if self._root_of(resolved) is not None else "outside"

    def display(self, path: Path) -> str:
        """``path`` for messages: relative when inside the workspace, else absolute."""
        text = os.fspath(path)
        if _within(text, self._ws):
            return os.path.relpath(text, self._ws)
        return text

    def assess(self, *raws: str, risk: Risk) -> Assessment:
        """An assessment for a call touching ``raws``: forbidden marked, outside refused."""
        outside: PathRefused | None = None
        for raw in raws:
            try:
                self.check(raw)
            except PathRefused as exc:
                if exc.forbidden:
                    return Assessment(risk, str(exc), forbidden=True)
                outside = outside or exc
        if outside is not None:
            raise outside
        return Assessment(risk)

    def read_bytes(self, path: Path, *, max_bytes: int) -> bytes:
        """The content of the checked file ``path``; ``ToolError`` when over ``max_bytes``."""
        target = self._usable(path)
        with self._plain_errors(target):
            fd = dirfd.open_dir(os.path.dirname(target))
            try:
                return dirfd.read_file(
                    fd, os.path.basename(target), target, max_bytes, vet=self._vet(target)
                )
            finally:
                os.close(fd)

    def write_bytes(self, path: Path, data: bytes) -> bool:
        """Atomically write ``data`` to the checked ``path``, creating folders; True if new."""
        return self._in_folder_of(path, lambda fd, name, _target: dirfd.write_file(fd, name, data))

    def append_bytes(self, path: Path, data: bytes) -> bool:
        """Append ``data`` to the checked file ``path``, made if missing; True if it was new."""
        return self._in_folder_of(
            path,
            lambda fd, name, target: dirfd.append_file(
                fd, name, target, data, vet=self._vet(target)
            ),
        )

    def _vet(self, target: str) -> Callable[[os.stat_result], None]:
        """Refuse an opened file that is also a file in a forbidden place (a hard link)."""

        def vet(info: os.stat_result) -> None:
            from bot.security.files.hardlinks import check_links  # a file with several links

            found = check_links(info, self._forbidden, self._roots)
            if found.found:
                raise PathRefused(
                    f"'{self.display(Path(target))}' is a hard link to a file in a forbidden "
                    "location",
                    forbidden=True,
                )
            if found.unchecked:
                raise PathRefused(
                    f"'{self.display(Path(target))}' has {info.st_nlink} hard links, and they "
                    "could not all be checked against the forbidden locations",
                    forbidden=True,
                )

        return vet

    def _in_folder_of(self, path: Path, write: Callable[[int, str, str], bool]) -> bool:
        """Run ``write(folder_fd, name, target)`` for the checked file ``path``, its folders
        made below their root first."""
        target = self._usable(path)
        if target in self._roots:
            raise ToolError(f"'{self.display(path)}' is a folder, not a file")
        root = self._root_of(target) or target
        with self._plain_errors(target):
            fd = dirfd.open_dir(
                os.path.dirname(target), create_below=root, before_mkdir=self._allow_new_dir
            )
            try:
                return write(fd, os.path.basename(target), target)
            finally:
                os.close(fd)

    def stat(self, path: Path) -> Entry:
        """What the checked ``path`` is (a link is reported, not followed)."""
        target = self._usable(path)
        with self._plain_errors(target):
            fd = dirfd.open_dir(os.path.dirname(target))
            try:
                return dirfd.stat_entry(fd, os.path.basename(target) or ".", target)
            finally:
                os.close(fd)

    def list_dir(self, path: Path) -> list[Entry]:
        """The entries of the checked folder ``path``, forbidden ones left out."""
        return list(self.walk(path, max_depth=1))

    def walk(
        self,
        path: Path,
        *,
        max_depth: int = MAX_WALK_DEPTH,
        skip_names: Collection[str] = (),
    ) -> Generator[Entry, None, None]:
        """Entries below the checked folder ``path``, depth first, never following links.

        Forbidden places, and entries named in ``skip_names``, are skipped with
        everything below them. Stop iterating whenever enough was seen; open
        descriptors are closed on the way out.
        """
        target = self._usable(path)
        with self._plain_errors(target):
            fd = dirfd.open_dir(target)

        def prune(child: str) -> bool:
            return os.path.basename(child) in skip_names or self._is_forbidden(child)

        try:
            depth = max(1, min(max_depth, MAX_WALK_DEPTH))
            yield from dirfd.walk(fd, target, max_depth=depth, prune=prune)
        finally:
            os.close(fd)

    def _locate(self, raw: str, base: Path | None) -> tuple[str, str, bool]:
        """The lexical and the resolved absolute path for ``raw``, and whether it exists."""
        if "\0" in raw:
            raise ToolError("the path contains a NUL byte, which no file name can hold")
        try:
            encoded = os.fsencode(raw)
        except UnicodeEncodeError:
            raise ToolError("the path is not valid text") from None
        if len(encoded) > MAX_PATH_BYTES or any(
            len(part) > MAX_NAME_BYTES for part in encoded.split(b"/")
        ):
            raise ToolError(f"the path '{_shown(raw)}' is too long")
        absolute = self._absolute(raw or ".", base)
        if len(os.fsencode(absolute)) > MAX_PATH_BYTES:
            raise ToolError(f"the path '{_shown(raw)}' is too long")
        try:
            resolved, exists = resolve(absolute)
        except Unresolvable as exc:
            raise ToolError(f"'{_shown(raw)}' cannot be used: {exc}") from None
        return os.path.normpath(absolute), resolved, exists

    def _absolute(self, raw: str, base: Path | None) -> str:
        if raw == "~" or raw.startswith("~/"):
            raw = str(self.home) + raw[1:]
        elif raw.startswith("~"):
            raw = os.path.expanduser(raw)  # ~user; left as a plain name if unknown
        if os.path.isabs(raw):
            return "/" + raw.lstrip("/")
        start = self._ws if base is None else os.path.join(self._ws, os.fspath(base))
        return os.path.join(start, raw)

    def _is_forbidden(self, path: str) -> bool:
        for place in self._forbidden:
            if _within(path, place):
                # A forbidden folder around the workspace guards what is around it.
                if _within(self._ws, place) and self._ws != place and _within(path, self._ws):
                    continue
                return True
        return False

    def _root_of(self, path: str) -> str | None:
        inside = [root for root in self._roots if _within(path, root)]
        return max(inside, key=len) if inside else None

    def _usable(self, path: Path) -> str:
        """Re-judge a path from ``check`` before I/O (lexically: no file system access)."""
        text = os.fspath(path)
        if "\0" in text or not os.path.isabs(text) or os.path.normpath(text) != text:
            raise ToolError(f"'{_shown(text)}' is not a checked path")
        if self._is_forbidden(text):
            raise PathRefused(f"'{self.display(path)}' is in a forbidden location", forbidden=True)
        if self._root_of(text) is None:
            raise PathRefused(f"'{text}' is outside {self._where}", forbidden=False)
        return text

    def _allow_new_dir(self, path: str) -> None:
        if self._is_forbidden(path) or self._root_of(path) is None:
            raise PathRefused(
                f"'{self.display(Path(path))}' may not be created here", forbidden=True
            )

    @contextmanager
    def _plain_errors(self, path: str) -> Iterator[None]:
        """Turn file system errors into messages for the model."""
        shown = f"'{self.display(Path(path))}'"
        try:
            yield
        except dirfd.LinkOnTheWay as exc:
            raise PathRefused(
                f"{shown} changed while in use: '{self.display(Path(exc.where))}' became a "
                "symbolic link, which is not followed",
                forbidden=False,
            ) from None
        except dirfd.TooLarge as exc:
            raise ToolError(
                f"{shown} is {exc.size} bytes, more than the limit of {exc.limit} bytes"
            ) from None
        except dirfd.NotRegularFile:
            raise ToolError(f"{shown} is not an ordinary file (a device, pipe or socket)") from None
        except FileNotFoundError:
            raise ToolError(f"{shown} does not exist") from None
        except NotADirectoryError:
            raise ToolError(f"{shown}: a part of the path is a file, not a folder") from None
        except IsADirectoryError:
            raise ToolError(f"{shown} is a folder, not a file") from None
        except PermissionError:
            raise ToolError(f"{shown}: permission denied") from None
        except OSError as exc:
            reason = os.strerror(exc.errno) if exc.errno else "an error"
            raise ToolError(f"{shown} could not be used: {reason.lower()}") from None


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _shown(raw: str, limit: int = 100) -> str:
    text = "".join(c if c.isprintable() else "?" for c in raw[:limit])
    return text + ("…" if len(raw) > limit else "")
