"""``[skills]``: where the agent finds skills (folders with a ``SKILL.md``)."""

from __future__ import annotations

from pydantic import Field

from bot.config.base import Section


class SkillsConfig(Section):
    """Skills: folders with a `SKILL.md` that teach the agent a procedure, which the `skill`
    tool loads when a request needs one."""

    enabled: bool = Field(
        default=True,
        description="Use skills: each one's name and description in the prompt, and the `skill` "
        "tool that loads the rest. `false`: neither.",
    )
    bundled: bool = Field(
        default=True,
        description="Offer the skills that ship with PinClaw (`morning-briefing`, "
        "`plant-watering`, `ha-scenes`), at the lowest priority: a skill of the same name "
        "elsewhere wins.",
    )
    extra_dirs: list[str] = Field(
        default_factory=list,
        description="More folders holding skill folders, relative to the data folder (or "
        'absolute), e.g. `["/home/pi/skills"]`; searched after `workspace/skills/` and '
        "`DATA_DIR/skills/`, before the shipped ones.",
    )
