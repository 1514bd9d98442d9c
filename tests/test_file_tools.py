"""The file tools through the registry: slices, limits, edits, bounds, and plain refusals."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.agent.tool_registry import ToolRegistry
from bot.config.security import SecurityConfig
from bot.core.conversation import ToolCall
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext, ToolResult
from bot.security.files.paths import PathGuard, PathRefused
from tools.file_search import MAX_GLOB_RESULTS, MAX_LISTED
from tools.files import file_tools

MAX_BYTES = 2048


@dataclass(frozen=True)
class Setup:
    """A registry of the file tools over a workspace, with a context for calls."""

    workspace: Path
    outside: Path
    registry: ToolRegistry
    ctx: ToolContext

    async def call(self, name: str, **arguments: Any) -> ToolResult:
        """Run one call through the registry."""
        return await self.registry.execute(ToolCall("1", name, arguments), self.ctx)

    async def ok(self, name: str, **arguments: Any) -> str:
        """Run one call that must succeed; its output."""
        result = await self.call(name, **arguments)
        assert result.ok, result.error
        return result.output

    async def error(self, name: str, **arguments: Any) -> str:
        """Run one call that must fail; its error."""
        result = await self.call(name, **arguments)
        assert not result.ok, result.output
        assert result.error is not None
        return result.error


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    workspace, outside, home = tmp_path / "ws", tmp_path / "outside", tmp_path / "home"
    for folder in (workspace, outside, home / ".ssh"):
        folder.mkdir(parents=True)
    (outside / "secret.txt").write_text("SECRET\n")
    os.symlink(outside / "secret.txt", workspace / "link")
    guard = PathGuard(workspace, forbidden=["~/.ssh", str(workspace / "private")], home=home)
    tools = file_tools(guard, SecurityConfig(file_max_bytes=MAX_BYTES))
    ctx = ToolContext(SessionKey("test", "1"), workspace, ZoneInfo("UTC"))
    return Setup(workspace, outside, ToolRegistry(tools), ctx)


def test_the_tools_declare_their_effect_and_risk(setup: Setup) -> None:
    declared = {
        name: (t.risk, t.effect, t.untrusted_output)
        for name in setup.registry.names()
        if (t := setup.registry.get(name)) is not None
    }
    assert declared == {
        "file_read": ("low", "read", True),
        "file_write": ("medium", "write", False),
        "file_edit": ("medium", "write", False),
        "file_list": ("low", "read", True),
        "glob_search": ("low", "read", True),
        "content_search": ("low", "read", True),
    }


async def test_read_with_offset_and_limit(setup: Setup) -> None:
    (setup.workspace / "notes.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    out = await setup.ok("file_read", path="notes.txt", offset=2, limit=3)
    assert out.splitlines() == [
        "notes.txt: lines 3-5 of 10 (5 more: call again with offset=5)",
        "3\tline 3",
        "4\tline 4",
        "5\tline 5",
    ]
    whole = await setup.ok("file_read", path="notes.txt")
    assert whole.splitlines()[0] == "notes.txt: lines 1-10 of 10"
    error = await setup.error("file_read", path="notes.txt", offset=10)
    assert "offset 10 is past the end: 'notes.txt' has 10 lines" in error
    (setup.workspace / "empty.txt").write_text("")
    assert await setup.ok("file_read", path="empty.txt") == "empty.txt: empty file"


async def test_read_refuses_binary_and_oversized_files(setup: Setup) -> None:
    (setup.workspace / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    assert "'image.png' is a binary file" in await setup.error("file_read", path="image.png")
    (setup.workspace / "latin1.txt").write_bytes("café".encode("latin-1"))
    assert "is not UTF-8 text" in await setup.error("file_read", path="latin1.txt")
    (setup.workspace / "big.txt").write_text("x" * (MAX_BYTES + 1))
    error = await setup.error("file_read", path="big.txt")
    assert f"'big.txt' is {MAX_BYTES + 1} bytes, more than the limit of {MAX_BYTES}" in error
    assert "does not exist" in await setup.error("file_read", path="missing.txt")


async def test_write_creates_parents_and_replaces_atomically(setup: Setup) -> None:
    out = await setup.ok("file_write", path="a/b/c.txt", content="héllo\n")
    assert out == "wrote 7 bytes to 'a/b/c.txt' (created the file)"
    target = setup.workspace / "a" / "b" / "c.txt"
    assert target.read_text() == "héllo\n"
    inode = target.stat().st_ino
    out = await setup.ok("file_write", path="a/b/c.txt", content="bye\n")
    assert "(replaced its previous content)" in out
    assert target.read_text() == "bye\n"
    assert target.stat().st_ino != inode
    assert sorted(p.name for p in target.parent.iterdir()) == ["c.txt"]
    error = await setup.error("file_write", path="big.txt", content="x" * (MAX_BYTES + 1))
    assert "more than the limit" in error
    assert "is a folder" in await setup.error("file_write", path="a", content="x")


async def test_edit_replaces_exactly_one_match(setup: Setup) -> None:
    target = setup.workspace / "code.py"
    target.write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    out = await setup.ok("file_edit", path="code.py", old_text="return 2", new_text="return 3")
    assert out == "replaced 1 occurrence in 'code.py' at line 6"
    assert target.read_text().endswith("return 3\n")


async def test_edit_with_no_match_gives_a_hint(setup: Setup) -> None:
    (setup.workspace / "code.py").write_text("def f():\n    return value + 1\n")
    error = await setup.error("file_edit", path="code.py", old_text="retrun value+1", new_text="x")
    assert "old_text was not found in 'code.py'" in error
    assert "the most similar line is line 2: 'return value + 1'" in error
    error = await setup.error(
        "file_edit", path="code.py", old_text="def f():\n  return value + 1", new_text="x"
    )
    assert "matches only if spaces, tabs or line breaks are ignored" in error
    error = await setup.error("file_edit", path="code.py", old_text="zzz qqq", new_text="x")
    assert "read the file with file_read first" in error


async def test_edit_with_several_matches_asks_for_context(setup: Setup) -> None:
    target = setup.workspace / "list.txt"
    target.write_text("item\nitem\nitem\n")
    error = await setup.error("file_edit", path="list.txt", old_text="item", new_text="thing")
    assert "old_text occurs 3 times in 'list.txt'" in error
    assert "include more of the surrounding lines" in error
    assert target.read_text() == "item\nitem\nitem\n"
    error = await setup.error("file_edit", path="list.txt", old_text="", new_text="x")
    assert "old_text is empty" in error


async def test_edit_keeps_windows_line_endings(setup: Setup) -> None:
    target = setup.workspace / "win.txt"
    target.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await setup.ok("file_edit", path="win.txt", old_text="one\ntwo", new_text="1\n2")
    assert target.read_bytes() == b"1\r\n2\r\nthree\r\n"


async def test_list_shows_type_and_size_and_is_bounded(setup: Setup) -> None:
    (setup.workspace / "docs" / "deeper").mkdir(parents=True)
    (setup.workspace / "docs" / "readme.md").write_text("x" * 1500)
    out = await setup.ok("file_list", path="docs")
    assert out.splitlines() == [
        "docs/ (2 entries)",
        "dir              deeper/",
        "file     1.5 KB  readme.md",
    ]
    top = await setup.ok("file_list", depth=2)
    assert "docs/readme.md" in top
    assert "link" in top
    many = setup.workspace / "many"
    many.mkdir()
    for n in range(MAX_LISTED + 50):
        (many / f"f{n:03}").write_text("")
    out = await setup.ok("file_list", path="many")
    assert f"only the first {MAX_LISTED} shown" in out
    assert len(out.splitlines()) == MAX_LISTED + 1


async def test_glob_finds_by_name_or_path_and_is_bounded(setup: Setup) -> None:
    for rel in ("a.py", "src/b.py", "src/pkg/c.py", "docs/x.md", ".git/hook.py"):
        (setup.workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (setup.workspace / rel).write_text("")
    out = await setup.ok("glob_search", pattern="*.py")
    assert out.splitlines() == [
        "3 matches for '*.py' in '.':",
        "a.py",
        "src/b.py",
        "src/pkg/c.py",
    ]
    assert (await setup.ok("glob_search", pattern="src/*.py")).splitlines()[1:] == ["src/b.py"]
    out = await setup.ok("glob_search", pattern="**/*.py", path="src")
    assert out.splitlines()[1:] == ["src/b.py", "src/pkg/c.py"]
    assert "no matches" in await setup.ok("glob_search", pattern="*.rs")
    assert "not a usable glob" in await setup.error("glob_search", pattern="../*")
    many = setup.workspace / "many"
    many.mkdir()
    for n in range(MAX_GLOB_RESULTS + 10):
        (many / f"{n:03}.log").write_text("")
    out = await setup.ok("glob_search", pattern="*.log")
    assert len(out.splitlines()) == MAX_GLOB_RESULTS + 2
    assert "stopped early" in out


async def test_content_search_reports_file_line_text(setup: Setup) -> None:
    (setup.workspace / "src").mkdir()
    (setup.workspace / "src" / "a.py").write_text("import os\nTODO = 1\n")
    (setup.workspace / "src" / "b.txt").write_text("nothing\ntodo later\n")
    (setup.workspace / "blob.bin").write_bytes(b"TODO\0\1\2")
    (setup.workspace / "huge.txt").write_text("TODO\n" * MAX_BYTES)
    out = await setup.ok("content_search", pattern="(?i)todo")
    assert out.splitlines() == [
        "2 matches for /(?i)todo/ in '.':",
        "src/a.py:2: TODO = 1",
        "src/b.txt:2: todo later",
        f"(skipped 1 binary file and 1 file over {MAX_BYTES} bytes)",
    ]
    only_py = await setup.ok("content_search", pattern="(?i)todo", glob="*.py")
    assert only_py.splitlines()[1:] == ["src/a.py:2: TODO = 1"]
    one_file = await setup.ok("content_search", pattern="import", path="src/a.py")
    assert one_file.splitlines()[1:] == ["src/a.py:1: import os"]


async def test_content_search_is_bounded_and_reports_bad_regex(setup: Setup) -> None:
    (setup.workspace / "log.txt").write_text("hit\n" * 100)
    out = await setup.ok("content_search", pattern="hit", max_results=5)
    assert len([line for line in out.splitlines() if line.startswith("log.txt:")]) == 5
    assert "stopped early" in out
    error = await setup.error("content_search", pattern="foo(")
    assert error.startswith("invalid regular expression: missing ), unterminated subpattern")


CALLS = [
    ("file_read", {}),
    ("file_write", {"content": "x"}),
    ("file_edit", {"old_text": "a", "new_text": "b"}),
    ("file_list", {}),
    ("glob_search", {"pattern": "*"}),
    ("content_search", {"pattern": "x"}),
]


@pytest.mark.parametrize(("name", "extra"), CALLS, ids=[c[0] for c in CALLS])
async def test_every_tool_refuses_outside_and_forbidden_paths(
    setup: Setup, name: str, extra: dict[str, Any]
) -> None:
    item = setup.registry.get(name)
    assert item is not None
    outside = str(setup.outside / "secret.txt")
    cases = {
        "../outside/secret.txt": "'../outside/secret.txt' is outside the workspace",
        outside: f"'{outside}' is outside the workspace",
        "link": "'link' points outside the workspace",
        "~/.ssh/id_rsa": "'~/.ssh/id_rsa' is in a forbidden location",
        "private/notes.txt": "'private/notes.txt' is in a forbidden location",
    }
    for path, message in cases.items():
        arguments = {"path": path, **extra}
        # Before running: the gate's assessment refuses or marks it forbidden.
        values = item.validate(arguments)
        if "forbidden" in message:
            assessment = item.assess(setup.ctx, values)
            assert assessment.forbidden
            assert assessment.reason == message
        else:
            with pytest.raises(PathRefused, match=message):
                item.assess(setup.ctx, values)
        # When running anyway: the tool enforces the guard itself.
        assert await setup.error(name, **arguments) == message
    assert (setup.outside / "secret.txt").read_text() == "SECRET\n"
    assert not (setup.workspace / "private").exists()


async def test_assessment_of_an_inside_path_keeps_the_tool_risk(setup: Setup) -> None:
    write = setup.registry.get("file_write")
    assert write is not None
    assessment = write.assess(setup.ctx, write.validate({"path": "a.txt", "content": "x"}))
    assert (assessment.risk, assessment.forbidden) == ("medium", False)
