"""The ``skill`` tool: the instructions of one installed skill, or one of its files.

The system prompt lists only each skill's name and a short description; the
model calls this tool to load the whole procedure when a request fits one.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from pydantic import Field

from bot.config import LoadedConfig
from bot.core.errors import ToolError
from bot.core.tool_api import Tool, ToolContext, tool
from bot.security.kit import SecurityKit
from bot.skills import SkillCatalog, open_catalog, read_skill_file


def skill_tool(catalog: SkillCatalog) -> Tool:
    """The ``skill`` tool over ``catalog``."""

    @tool(risk="low", effect="read")
    async def skill(
        ctx: ToolContext,
        name: Annotated[str, Field(description="the skill's name as listed under Skills")],
        file: Annotated[
            str | None,
            Field(description="one of the skill's other files to read; omit for its instructions"),
        ] = None,
    ) -> str:
        """Load a skill listed under Skills in the system prompt: its step-by-step
        instructions and the names of its other files. Follow the instructions it returns."""
        found = await asyncio.to_thread(catalog.get, name.strip())
        if found is None:
            names = ", ".join(catalog.scan().skills) or "none are installed"
            raise ToolError(f"there is no skill named {name!r}; skills: {names}")
        if file:
            return await asyncio.to_thread(read_skill_file, found, file)
        parts = [f"Skill {found.name}: {found.description}"]
        if found.requires:
            parts.append("Needs: " + ", ".join(found.requires))
        parts.append(found.body)
        files = await asyncio.to_thread(found.files)
        if files:
            parts.append("Other files (read one with skill(name, file=...)): " + ", ".join(files))
        return "\n\n".join(parts)

    return skill


def build(config: LoadedConfig, security: SecurityKit) -> list[Tool]:
    """The skill tool, unless ``[skills] enabled`` is false."""
    catalog = open_catalog(config)
    return [] if catalog is None else [skill_tool(catalog)]
