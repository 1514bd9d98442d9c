"""Skills: procedures in folders with a ``SKILL.md``, loaded by the agent when it needs one.

Only each skill's name and a short description go into the system prompt; the
``skill`` tool (``tools/skill.py``) returns the instructions when the model asks.
"""

from __future__ import annotations

import functools

from bot.config import LoadedConfig
from bot.skills.catalog import BUNDLED_DIR, Location, Problem, Scan, Skill, SkillCatalog
from bot.skills.files import read_skill_file

__all__ = [
    "Location",
    "Problem",
    "Scan",
    "Skill",
    "SkillCatalog",
    "open_catalog",
    "read_skill_file",
    "skill_locations",
]


def skill_locations(loaded: LoadedConfig) -> list[Location]:
    """Where skills are looked for, highest priority first."""
    settings = loaded.config.skills
    locations = [
        Location("workspace", loaded.workspace / "skills"),
        Location("data dir", loaded.data_dir / "skills"),
    ]
    for extra in settings.extra_dirs:
        path = loaded.data_dir / extra  # an absolute path stays absolute
        locations.append(Location(f"extra dir {path}", path.expanduser()))
    if settings.bundled:
        locations.append(Location("bundled", BUNDLED_DIR))
    return locations


def open_catalog(loaded: LoadedConfig) -> SkillCatalog | None:
    """The skill catalog for this config, or None when skills are turned off.

    The prompt and the ``skill`` tool get the same catalog, so a broken skill is
    logged once and both always agree on what is installed.
    """
    if not loaded.config.skills.enabled:
        return None
    return _shared(tuple(skill_locations(loaded)))


@functools.cache
def _shared(locations: tuple[Location, ...]) -> SkillCatalog:
    return SkillCatalog(locations)
