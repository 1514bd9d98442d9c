"""The skill catalog: skill folders found in the workspace, the data dir and the package.

A skill is a folder holding a ``SKILL.md`` whose front matter names it and says
in one line what it is for. Locations are searched in priority order; a name
found in a higher location hides the same name below it. A broken ``SKILL.md`` is
skipped with one log line and kept as a problem for ``pinclaw skills list``. The
catalog re-reads the folders only when a ``SKILL.md`` appears, disappears or
changes, so it can be asked on every turn.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.skills.front_matter import FrontMatterError, split

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
MAX_LISTED_FILES = 50
PROMPT_HEADER = "Skills:"
LINE_BYTES = 47
"""A skill's prompt line at most, JSON-encoded as it is sent.

With the line break (2 bytes encoded) a skill costs at most 49 bytes, and the
header with its section break 11: a request grows by at most 60 bytes per skill,
as the issue asks. How to use the list is said once, in the ``skill`` tool's
description, which is offered with or without skills.
"""

BUNDLED_DIR = Path(__file__).parent / "bundled"


@dataclass(frozen=True, slots=True)
class Location:
    """One folder of skill folders, and what to call it for the person."""

    source: str
    path: Path


@dataclass(frozen=True, slots=True)
class Skill:
    """One valid skill."""

    name: str
    description: str
    requires: tuple[str, ...]
    folder: Path
    source: str
    body: str

    def files(self) -> list[str]:
        """The skill's other files, as paths relative to its folder."""
        found = sorted(
            p.relative_to(self.folder).as_posix()
            for p in self.folder.rglob("*")
            if p.is_file() and p.name != SKILL_FILE and not _hidden(p, self.folder)
        )
        return found[:MAX_LISTED_FILES]


@dataclass(frozen=True, slots=True)
class Problem:
    """A ``SKILL.md`` that could not be used, and why, in words for the owner."""

    path: Path
    source: str
    reason: str


@dataclass(frozen=True, slots=True)
class Scan:
    """What one look at the locations found."""

    skills: dict[str, Skill] = field(default_factory=dict)
    hidden: tuple[Skill, ...] = ()  # same name as a skill in a higher location
    problems: tuple[Problem, ...] = ()


class SkillCatalog:
    """The installed skills, re-read when their files change."""

    def __init__(self, locations: Sequence[Location]) -> None:
        self.locations = tuple(locations)
        self._signature: tuple[tuple[str, int, int], ...] | None = None
        self._scan = Scan()

    def scan(self) -> Scan:
        """The current skills; reads the folders again only if a ``SKILL.md`` changed."""
        signature = self._fingerprint()
        if signature != self._signature:
            self._scan = self._read()
            self._signature = signature
        return self._scan

    def get(self, name: str) -> Skill | None:
        """The skill called ``name``, if one is installed."""
        return self.scan().skills.get(name)

    def prompt_section(self) -> str:
        """Names and short descriptions for the system prompt ("" with no skills)."""
        skills = self.scan().skills
        if not skills:
            return ""
        lines = [PROMPT_HEADER, *(prompt_line(s) for s in skills.values())]
        return "\n".join(lines)

    def _candidates(self) -> list[tuple[Location, Path]]:
        found: list[tuple[Location, Path]] = []
        for location in self.locations:
            try:
                folders = sorted(p for p in location.path.iterdir() if p.is_dir())
            except OSError:
                continue
            found.extend((location, f / SKILL_FILE) for f in folders if (f / SKILL_FILE).is_file())
        return found

    def _fingerprint(self) -> tuple[tuple[str, int, int], ...]:
        marks: list[tuple[str, int, int]] = []
        for _, path in self._candidates():
            try:
                stat = path.stat()
            except OSError:
                continue
            marks.append((str(path), stat.st_mtime_ns, stat.st_size))
        return tuple(marks)

    def _read(self) -> Scan:
        skills: dict[str, Skill] = {}
        hidden: list[Skill] = []
        problems: list[Problem] = []
        seen_here: dict[tuple[str, str], Path] = {}
        for location, path in self._candidates():
            try:
                skill = load_skill(path, location.source)
            except SkillError as exc:
                log.warning("skipped the skill in %s: %s", path, exc)
                problems.append(Problem(path, location.source, str(exc)))
                continue
            earlier = seen_here.get((location.source, skill.name))
            if earlier is not None:
                reason = f"the name {skill.name!r} is already used by {earlier}"
                log.warning("skipped the skill in %s: %s", path, reason)
                problems.append(Problem(path, location.source, reason))
                continue
            seen_here[(location.source, skill.name)] = path
            if skill.name in skills:
                hidden.append(skill)
            else:
                skills[skill.name] = skill
        return Scan(skills, tuple(hidden), tuple(problems))


class SkillError(ValueError):
    """A ``SKILL.md`` that cannot be used; the message says why."""


def load_skill(path: Path, source: str) -> Skill:
    """Read and check one ``SKILL.md``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"the file cannot be read ({exc.__class__.__name__})") from None
    try:
        document = split(text)
    except FrontMatterError as exc:
        raise SkillError(str(exc)) from None
    fields = document.fields
    name = fields.get("name")
    description = fields.get("description")
    requires = fields.get("requires", [])
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise SkillError(
            "'name' must be 1 to 32 lowercase letters, digits or dashes, such as 'plant-watering'"
        )
    if not isinstance(description, str) or not description.strip():
        raise SkillError("'description' is missing: say in one line what the skill is for")
    if isinstance(requires, str):
        requires = [requires]
    if not document.body:
        raise SkillError("the file has no instructions after the front matter")
    return Skill(name, description.strip(), tuple(requires), path.parent, source, document.body)


def prompt_line(skill: Skill) -> str:
    """``name: description``, the description cut so the line fits ``LINE_BYTES``."""
    line = f"{skill.name}: {skill.description}"
    if _encoded(line) <= LINE_BYTES:
        return line
    while line and _encoded(line + "...") > LINE_BYTES:
        line = line[:-1]
    return line.rstrip() + "..."


def _encoded(text: str) -> int:
    # The size the line adds to a request body: JSON-escaped, without the quotes.
    return len(json.dumps(text)) - 2


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)
