"""Reading one of a skill's own files, kept inside the skill's folder and size-capped.

Skills in the data dir or the package are outside the workspace, where
``file_read`` cannot go; the ``skill`` tool reads their files through this instead.
"""

from __future__ import annotations

from bot.core.errors import ToolError
from bot.skills.catalog import Skill

MAX_FILE_BYTES = 32 * 1024


def read_skill_file(skill: Skill, relative: str) -> str:
    """The text of ``relative`` inside ``skill``'s folder; a ``ToolError`` says what is wrong."""
    root = skill.folder.resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root) or target == root:
        raise ToolError(f"{relative!r} is not a file of the skill {skill.name!r}")
    if not target.is_file():
        known = ", ".join(skill.files()) or "none"
        raise ToolError(f"the skill {skill.name!r} has no file {relative!r}; its files: {known}")
    size = target.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ToolError(
            f"{relative!r} is {size} bytes; the skill tool reads files up to {MAX_FILE_BYTES}"
        )
    try:
        return target.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{relative!r} is not a text file") from None
