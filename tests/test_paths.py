"""The workspace sandbox: an escape corpus, verdicts, and races between check and use.

Every test builds its own tree under ``tmp_path`` with a fake home folder, so
the real home is never touched. The race tests run the guard's own steps one
at a time and change the tree in between: no mocks, no sleeps.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.config.security import DEFAULT_FORBIDDEN_PATHS
from bot.core.errors import ToolError
from bot.security.files.paths import PathGuard, PathRefused


@dataclass(frozen=True)
class Tree:
    """A workspace, an extra root, a fake home and an outside folder, with a guard."""

    workspace: Path
    extra: Path
    home: Path
    outside: Path
    guard: PathGuard


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    workspace, extra, home, outside = (tmp_path / n for n in ("ws", "extra", "home", "outside"))
    for folder in (workspace / "docs", extra / "private", home / ".ssh", outside / "inner"):
        folder.mkdir(parents=True)
    (workspace / "docs" / "a.txt").write_text("inside\n")
    (workspace / "secrets").mkdir()
    (workspace / "secrets" / "token.txt").write_text("t0k3n\n")
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    (outside / "secret.txt").write_text("SECRET\n")
    (outside / "inner" / "secret.txt").write_text("SECRET\n")
    (extra / "notes.txt").write_text("extra notes\n")
    (extra / "private" / "key").write_text("extra key\n")
    links = {
        "to_passwd": "/etc/passwd",
        "to_outside_dir": str(outside),
        "to_key": str(home / ".ssh" / "id_rsa"),
        "dangling_out": str(outside / "missing" / "file"),
        "dangling_in": "not_yet.txt",
        "loop_a": "loop_b",
        "loop_b": "loop_a",
        "to_docs": "docs",
    }
    for name, target in links.items():
        os.symlink(target, workspace / name)
    (workspace / "deep").mkdir()
    os.symlink(outside, workspace / "deep" / "linkdir")
    guard = PathGuard(
        workspace,
        extra_roots=[extra],
        forbidden=["~/.ssh", str(workspace / "secrets"), str(extra / "private")],
        home=home,
    )
    return Tree(workspace, extra, home, outside, guard)


OUTSIDE = "outside the workspace and the other allowed folders"

# (path, verdict, what ``check`` says: a piece of its refusal, or "" when allowed)
CORPUS = [
    ("docs/a.txt", "inside", ""),
    ("../x", "outside", f"'../x' is {OUTSIDE}"),
    ("a/../../x", "outside", f"'a/../../x' is {OUTSIDE}"),
    ("docs/../../outside/secret.txt", "outside", OUTSIDE),
    ("/etc/passwd", "outside", f"'/etc/passwd' is {OUTSIDE}"),
    ("/tmp/x", "outside", f"'/tmp/x' is {OUTSIDE}"),
    ("~/.ssh/id_rsa", "forbidden", "'~/.ssh/id_rsa' is in a forbidden location"),
    ("~/notes", "outside", f"'~/notes' is {OUTSIDE}"),
    ("~", "outside", f"'~' is {OUTSIDE}"),
    ("to_passwd", "outside", f"'to_passwd' points {OUTSIDE}"),
    ("to_outside_dir", "outside", f"'to_outside_dir' points {OUTSIDE}"),
    ("to_outside_dir/secret.txt", "outside", "points outside"),
    ("deep/linkdir/inner/secret.txt", "outside", "points outside"),
    ("to_key", "forbidden", "'to_key' points into a forbidden location"),
    ("dangling_out", "outside", "points outside"),
    ("secrets/token.txt", "forbidden", "is in a forbidden location"),
    ("secrets", "forbidden", "is in a forbidden location"),
    ("to_docs/a.txt", "inside", ""),
    ("dangling_in", "inside", ""),
    ("ünïcødé/日本語.txt", "inside", ""),
]


@pytest.mark.parametrize(("raw", "verdict", "refusal"), CORPUS, ids=[c[0] for c in CORPUS])
def test_escape_corpus(tree: Tree, raw: str, verdict: str, refusal: str) -> None:
    assert tree.guard.verdict(raw) == verdict
    if not refusal:
        resolved = tree.guard.check(raw)
        assert resolved.is_relative_to(tree.workspace)
        return
    with pytest.raises(PathRefused) as caught:
        tree.guard.check(raw)
    assert refusal in str(caught.value)
    assert caught.value.forbidden == (verdict == "forbidden")
    assert "extra_roots" not in str(caught.value)  # never hints at widening permissions


def test_checked_paths_are_resolved(tree: Tree) -> None:
    assert tree.guard.check("to_docs/a.txt") == tree.workspace / "docs" / "a.txt"
    assert tree.guard.check("dangling_in") == tree.workspace / "not_yet.txt"
    assert tree.guard.check(str(tree.workspace / "docs")) == tree.workspace / "docs"
    assert tree.guard.check("") == tree.workspace
    with pytest.raises(ToolError, match="'dangling_in' does not exist"):
        tree.guard.check("dangling_in", must_exist=True)


def test_extra_root_is_allowed_but_its_forbidden_part_is_not(tree: Tree) -> None:
    notes = str(tree.extra / "notes.txt")
    assert tree.guard.check(notes, must_exist=True) == tree.extra / "notes.txt"
    assert tree.guard.verdict(notes) == "inside"
    with pytest.raises(PathRefused, match="forbidden") as caught:
        tree.guard.check(str(tree.extra / "private" / "key"))
    assert caught.value.forbidden
    assert tree.guard.verdict(str(tree.extra / "private" / "key")) == "forbidden"


def test_configured_places_may_use_home_or_be_workspace_relative(tmp_path: Path) -> None:
    home, workspace = tmp_path / "home", tmp_path / "ws"
    (home / "notes" / "diary").mkdir(parents=True)
    workspace.mkdir()
    guard = PathGuard(
        workspace, extra_roots=[Path("~/notes")], forbidden=["~/notes/diary", ".env"], home=home
    )
    assert guard.roots == (workspace, home / "notes")
    assert guard.verdict("~/notes/todo.md") == "inside"
    assert guard.verdict("~/notes/diary/today.md") == "forbidden"
    assert guard.verdict(".env") == "forbidden"
    assert guard.verdict("src/.env") == "inside"


def test_a_symlink_loop_is_refused(tree: Tree) -> None:
    with pytest.raises(ToolError, match="symbolic links loop"):
        tree.guard.check("loop_a")
    assert tree.guard.verdict("loop_a") == "outside"


def test_a_nul_byte_is_refused(tree: Tree) -> None:
    with pytest.raises(ToolError, match="NUL byte"):
        tree.guard.check("docs/a.txt\0../../etc/passwd")
    assert tree.guard.verdict("docs\0x") == "forbidden"


@pytest.mark.parametrize("raw", ["a" * 300, "/".join(["abcdefgh"] * 600)], ids=["name", "path"])
def test_a_very_long_path_is_refused(tree: Tree, raw: str) -> None:
    with pytest.raises(ToolError, match="too long"):
        tree.guard.check(raw)
    assert tree.guard.verdict(raw) == "outside"


def test_verdict_resolves_against_a_base(tree: Tree) -> None:
    docs = tree.workspace / "docs"
    assert tree.guard.verdict("../deep", base=docs) == "inside"
    assert tree.guard.verdict("../../outside", base=docs) == "outside"
    assert tree.guard.verdict("../secrets/token.txt", base=Path("docs")) == "forbidden"
    assert tree.guard.verdict("~/.ssh", base=docs) == "forbidden"


def test_default_forbidden_places_guard_the_data_dir_but_not_its_workspace(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    workspace = home / ".pinclaw" / "workspace"
    workspace.mkdir(parents=True)
    guard = PathGuard(workspace, forbidden=DEFAULT_FORBIDDEN_PATHS, home=home)
    assert guard.check("notes/today.md") == workspace / "notes" / "today.md"
    for raw in ("../config.toml", "~/.pinclaw/pinclaw.db", "/etc/passwd", "/proc/self/environ"):
        assert guard.verdict(raw) == "forbidden", raw
        with pytest.raises(PathRefused, match="forbidden location"):
            guard.check(raw)


def test_display_is_workspace_relative(tree: Tree) -> None:
    assert tree.guard.display(tree.workspace / "docs" / "a.txt") == "docs/a.txt"
    assert tree.guard.display(tree.workspace) == "."
    assert tree.guard.display(tree.extra / "notes.txt") == str(tree.extra / "notes.txt")


def test_read_and_write_through_the_guard(tree: Tree) -> None:
    guard = tree.guard
    target = guard.check("new/sub/file.txt")
    assert guard.write_bytes(target, b"one") is True
    assert guard.read_bytes(target, max_bytes=10) == b"one"
    os.chmod(target, 0o600)
    inode = target.stat().st_ino
    assert guard.write_bytes(target, b"two") is False
    assert target.read_bytes() == b"two"
    assert target.stat().st_ino != inode  # replaced, not rewritten in place
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in target.parent.iterdir()] == ["file.txt"]  # no temp file left
    with pytest.raises(ToolError, match="more than the limit of 2 bytes"):
        guard.read_bytes(target, max_bytes=2)
    with pytest.raises(ToolError, match="is a folder"):
        guard.read_bytes(guard.check("docs"), max_bytes=10)
    with pytest.raises(ToolError, match="does not exist"):
        guard.read_bytes(guard.check("nothing.txt"), max_bytes=10)


def test_io_helpers_take_only_checked_paths(tree: Tree) -> None:
    with pytest.raises(ToolError, match="not a checked path"):
        tree.guard.read_bytes(Path("docs/a.txt"), max_bytes=100)
    with pytest.raises(ToolError, match="not a checked path"):
        tree.guard.read_bytes(tree.workspace / "docs" / ".." / "docs" / "a.txt", max_bytes=100)
    with pytest.raises(PathRefused, match="outside"):
        tree.guard.read_bytes(tree.outside / "secret.txt", max_bytes=100)
    with pytest.raises(PathRefused, match="forbidden"):
        tree.guard.write_bytes(tree.workspace / "secrets" / "x", b"x")


def test_a_link_in_an_unchecked_path_is_not_followed(tree: Tree) -> None:
    # Even a link that stays inside is refused when handed over unresolved.
    with pytest.raises(PathRefused, match="symbolic link"):
        tree.guard.read_bytes(tree.workspace / "to_docs" / "a.txt", max_bytes=100)


def test_a_pipe_is_not_read(tree: Tree) -> None:
    os.mkfifo(tree.workspace / "pipe")
    with pytest.raises(ToolError, match="not an ordinary file"):
        tree.guard.read_bytes(tree.guard.check("pipe"), max_bytes=100)


def test_listing_and_walking_skip_forbidden_places_and_never_follow_links(tree: Tree) -> None:
    guard = tree.guard
    listed = {e.path.name: e.kind for e in guard.list_dir(guard.check("."))}
    assert "secrets" not in listed
    assert listed["to_outside_dir"] == "link"
    assert listed["docs"] == "dir"
    walked = [e.path for e in guard.walk(guard.check("."))]
    assert all(p.is_relative_to(tree.workspace) for p in walked)
    assert tree.workspace / "deep" / "linkdir" in walked
    assert not any("secret.txt" in p.name or "token" in p.name for p in walked)
    assert guard.stat(guard.check("docs/a.txt")).size == len("inside\n")


# --- races: the path changes between the check and the use -------------------------------


def _swap_for_link(path: Path, target: Path) -> None:
    """Move the real folder ``path`` aside and put a link to ``target`` in its place."""
    path.rename(path.with_name(path.name + ".moved"))
    os.symlink(target, path)


def test_race_a_folder_swapped_for_a_link_before_reading(tree: Tree) -> None:
    (tree.workspace / "inner").mkdir()
    (tree.workspace / "inner" / "secret.txt").write_text("harmless\n")
    checked = tree.guard.check("inner/secret.txt", must_exist=True)
    _swap_for_link(tree.workspace / "inner", tree.outside / "inner")
    with pytest.raises(PathRefused, match="changed while in use"):
        tree.guard.read_bytes(checked, max_bytes=100)


def test_race_a_folder_swapped_for_a_link_before_writing(tree: Tree) -> None:
    (tree.workspace / "inner").mkdir()
    checked = tree.guard.check("inner/planted.txt")
    _swap_for_link(tree.workspace / "inner", tree.outside / "inner")
    with pytest.raises(PathRefused, match="changed while in use"):
        tree.guard.write_bytes(checked, b"planted")
    assert not (tree.outside / "inner" / "planted.txt").exists()


def test_race_a_missing_parent_created_as_a_link_before_writing(tree: Tree) -> None:
    checked = tree.guard.check("fresh/sub/planted.txt")
    os.symlink(tree.outside, tree.workspace / "fresh")
    with pytest.raises(PathRefused, match="changed while in use"):
        tree.guard.write_bytes(checked, b"planted")
    assert not (tree.outside / "sub").exists()


def test_race_the_file_itself_swapped_for_a_link(tree: Tree) -> None:
    victim = tree.workspace / "docs" / "a.txt"
    checked = tree.guard.check("docs/a.txt", must_exist=True)
    victim.unlink()
    os.symlink(tree.outside / "secret.txt", victim)
    with pytest.raises(PathRefused, match="changed while in use"):
        tree.guard.read_bytes(checked, max_bytes=100)
    # Writing replaces the link itself: the file it pointed to is untouched.
    tree.guard.write_bytes(checked, b"new")
    assert (tree.outside / "secret.txt").read_text() == "SECRET\n"
    assert not victim.is_symlink()
    assert victim.read_bytes() == b"new"


def test_race_an_ancestor_of_the_workspace_swapped_for_a_link(tmp_path: Path) -> None:
    base = tmp_path / "base"
    (base / "ws").mkdir(parents=True)
    (base / "ws" / "f.txt").write_text("mine\n")
    evil = tmp_path / "evil"
    (evil / "ws").mkdir(parents=True)
    (evil / "ws" / "f.txt").write_text("SECRET\n")
    guard = PathGuard(base / "ws", home=tmp_path / "home")
    checked = guard.check("f.txt", must_exist=True)
    _swap_for_link(base, evil)
    with pytest.raises(PathRefused, match="changed while in use"):
        guard.read_bytes(checked, max_bytes=100)


def test_race_a_folder_swapped_for_a_link_during_a_walk(tree: Tree) -> None:
    (tree.workspace / "docs" / "sub").mkdir()
    seen = []
    walk = tree.guard.walk(tree.guard.check("docs"))
    for entry in walk:
        seen.append(entry.path)
        if entry.path.name == "sub":
            _swap_for_link(entry.path, tree.outside / "inner")
    assert seen == [tree.workspace / "docs" / "a.txt", tree.workspace / "docs" / "sub"]
