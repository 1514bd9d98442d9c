"""``pinclaw skills list``: the installed skills, where each comes from, and broken ones.

Only argparse is imported at the top: the parser is built for every ``pinclaw`` command.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.skills import Scan

Subparsers = argparse._SubParsersAction  # the type argparse gives add_subparsers


def add_skills_commands(
    sub: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Register ``pinclaw skills list``."""
    skills = sub.add_parser(
        "skills",
        parents=[common],
        help="procedures the assistant loads when it needs them",
        description="Skills are folders with a SKILL.md, in the workspace's skills/ folder, "
        "the data folder's skills/ folder, or shipped with PinClaw.",
    )
    actions = skills.add_subparsers(dest="skills_command", metavar="ACTION")
    actions.add_parser(
        "list", parents=[common], help="show each skill, where it comes from, and broken ones"
    )
    skills.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    from bot.config import load_config
    from bot.skills import SkillCatalog, skill_locations

    loaded = load_config(getattr(args, "config", None))
    scan = SkillCatalog(skill_locations(loaded)).scan()
    if not loaded.config.skills.enabled:
        print("Skills are turned off ([skills] enabled = false); the assistant sees none.")
    print(render(scan), end="")
    return 1 if scan.problems else 0


def render(scan: Scan) -> str:
    """The listing as text: skills, skills hidden by one of the same name, problems."""
    lines: list[str] = []
    if not scan.skills:
        lines.append("No skills installed. Add a folder with a SKILL.md to workspace/skills/.")
    width = max((len(name) for name in scan.skills), default=0)
    for skill in scan.skills.values():
        lines.append(f"{skill.name:<{width}}  {skill.description}  [{skill.source}]")
        if skill.requires:
            lines.append(f"{'':<{width}}  needs: {', '.join(skill.requires)}")
    for skill in scan.hidden:
        lines.append(f"hidden: {skill.name} [{skill.source}] (a skill of the same name wins)")
    for problem in scan.problems:
        lines.append(f"broken: {problem.path} [{problem.source}]: {problem.reason}")
    return "\n".join(lines) + "\n"
