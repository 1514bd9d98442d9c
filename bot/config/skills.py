"""``[skills]``: where the agent finds skills (folders with a ``SKILL.md``)."""

from __future__ import annotations

from pydantic import Field

from bot.config.base import Section


class SkillsConfig(Section):
    """``[skills]``: the skill catalog and the ``skill`` tool."""

    enabled: bool = True
    bundled: bool = True  # the skills that ship with PinClaw, lowest priority
    extra_dirs: list[str] = Field(default_factory=list)  # relative to the data dir
