"""Skills: the catalog, the ``skill`` tool, what reaches the model and when, the CLI."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.agent.tool_registry import ToolRegistry
from bot.core.conversation import ToolCall
from bot.core.errors import ToolError
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext
from bot.skills import Location, SkillCatalog, read_skill_file
from bot.skills.catalog import BUNDLED_DIR
from tests.cli_helpers import local_config, run, write_config
from tests.fake_llm import CallTools, FakeLLM, Say
from tools.skill import skill_tool

ROOT = Path(__file__).resolve().parents[1]
BODY_MARKER = "Step 1: greet the owner by the name in memory"
NO_BUNDLED = "[skills]\nbundled = false\n"


def write_skill(folder: Path, name: str, description: str, body: str = BODY_MARKER) -> Path:
    path = folder / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")
    return path


def test_shipped_skills_parse_and_name_real_tools() -> None:
    scan = SkillCatalog([Location("bundled", BUNDLED_DIR)]).scan()
    assert scan.problems == ()
    assert sorted(scan.skills) == ["ha-scenes", "morning-briefing", "plant-watering"]
    defined = set()
    for source in (ROOT / "tools").glob("*.py"):
        defined |= set(re.findall(r"async def (\w+)\(", source.read_text()))
    for skill in scan.skills.values():
        assert skill.requires, skill.name
        assert set(skill.requires) <= defined, skill.name
        for mentioned in re.findall(r"`((?:ha|gpio|memory|sensor|web)_\w+)`", skill.body):
            assert mentioned in defined, (skill.name, mentioned)


def test_body_reaches_the_model_only_after_it_asks(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url, NO_BUNDLED))
    write_skill(home / ".pinclaw" / "workspace" / "skills", "greet-owner", "say hello nicely")
    llm.queue(CallTools([("skill", {"name": "greet-owner"})]), Say("Hello!"))
    done = run(home, "agent", "-m", "say hi to me")
    assert done.returncode == 0, done.stderr
    first, second = llm.requests
    assert "greet-owner: say hello nicely" in first.view.system
    assert "skill" in first.view.tool_names
    assert BODY_MARKER not in str(first.body)
    assert second.view.last_role == "tool"
    assert BODY_MARKER in second.view.last_text
    assert BODY_MARKER not in second.view.system


def test_each_skill_adds_at_most_60_bytes_to_the_first_request(llm: FakeLLM, home: Path) -> None:
    # Memory off: otherwise the earlier runs' messages come back as recalled memory.
    write_config(home, local_config(llm.url, NO_BUNDLED + "[memory]\nenabled = false\n"))
    skills = home / ".pinclaw" / "workspace" / "skills"
    sizes = {}
    long_text = "water the plants on the balcony when the soil is dry, then tell me " * 3
    for count in (0, 1, 3):
        for number in range(count):
            write_skill(skills, f"long-skill-name-{number}", long_text + "é" * 40)
        llm.queue(Say("ok"))
        assert run(home, "agent", "-m", "hi").returncode == 0
        sizes[count] = llm.requests[-1].size
    assert "long-skill-name-2: water the plants" in llm.requests[-1].view.system
    assert "é" not in llm.requests[-1].view.system  # cut to fit
    assert 0 < sizes[1] - sizes[0] <= 60
    assert 0 < sizes[3] - sizes[0] <= 3 * 60


def test_broken_skill_is_skipped_and_listed(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url, NO_BUNDLED))
    skills = home / ".pinclaw" / "workspace" / "skills"
    write_skill(skills, "fine", "a working skill")
    (skills / "broken").mkdir()
    (skills / "broken" / "SKILL.md").write_text("no front matter here\n")
    write_skill(skills, "bad-name", "x").write_text("---\nname: Bad Name\ndescription: x\n---\nb\n")
    listed = run(home, "skills", "list")
    assert listed.returncode == 1
    assert "Traceback" not in listed.stdout + listed.stderr
    assert re.search(r"^fine +a working skill +\[workspace\]$", listed.stdout, re.MULTILINE)
    assert f"broken: {skills / 'broken' / 'SKILL.md'} [workspace]: " in listed.stdout
    assert "'name' must be" in listed.stdout
    llm.queue(Say("ok"))
    run(home, "agent", "-m", "hi")
    system = llm.requests[-1].view.system
    assert "fine: a working skill" in system
    assert "broken" not in system
    assert "Bad Name" not in system


def test_workspace_wins_over_data_dir_and_bundled(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url))
    data = home / ".pinclaw"
    write_skill(data / "skills", "plant-watering", "from the data dir")
    write_skill(data / "workspace" / "skills", "plant-watering", "from the workspace")
    write_skill(data / "skills", "only-here", "data dir skill")
    listed = run(home, "skills", "list")
    assert listed.returncode == 0, listed.stdout
    assert re.search(r"^plant-watering +from the workspace +\[workspace\]$", listed.stdout, re.M)
    assert re.search(r"^only-here +data dir skill +\[data dir\]$", listed.stdout, re.M)
    assert re.search(r"^morning-briefing .*\[bundled\]$", listed.stdout, re.M)
    assert "hidden: plant-watering [data dir]" in listed.stdout
    assert "hidden: plant-watering [bundled]" in listed.stdout
    llm.queue(CallTools([("skill", {"name": "plant-watering"})]), Say("ok"))
    run(home, "agent", "-m", "water the plants")
    first, second = llm.requests
    assert "plant-watering: from the workspace" in first.view.system
    assert "from the data dir" not in first.view.system
    assert "Skill plant-watering: from the workspace" in second.view.last_text


async def test_skill_tool_lists_and_reads_files_inside_the_folder_only(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "chart", "draw a chart")
    (root / "chart" / "notes").mkdir()
    (root / "chart" / "notes" / "colours.txt").write_text("red for hot\n")
    (tmp_path / "secret.txt").write_text("do not show")
    catalog = SkillCatalog([Location("data dir", root)])
    tools = ToolRegistry([skill_tool(catalog)])
    ctx = ToolContext(SessionKey("t", "1"), tmp_path / "workspace", ZoneInfo("UTC"))

    async def call(arguments: dict[str, str]) -> tuple[bool, str]:
        result = await tools.execute(ToolCall("1", "skill", arguments), ctx)
        return result.ok, result.output + (result.error or "")

    ok, text = await call({"name": "chart"})
    assert ok and BODY_MARKER in text and "notes/colours.txt" in text
    assert await call({"name": "chart", "file": "notes/colours.txt"}) == (True, "red for hot\n")
    ok, text = await call({"name": "chart", "file": "../../secret.txt"})
    assert not ok and "is not a file of the skill" in text and "do not show" not in text
    ok, text = await call({"name": "nope"})
    assert not ok and "skills: chart" in text
    skill = catalog.get("chart")
    assert skill is not None
    with pytest.raises(ToolError):
        read_skill_file(skill, str(tmp_path / "secret.txt"))


def test_catalog_rereads_a_changed_skill(tmp_path: Path) -> None:
    path = write_skill(tmp_path, "tidy", "first words")
    catalog = SkillCatalog([Location("workspace", tmp_path)])
    assert "tidy: first words" in catalog.prompt_section()
    path.write_text("---\nname: tidy\ndescription: second words, longer\n---\nbody\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert "tidy: second words, longer" in catalog.prompt_section()
    path.unlink()
    assert catalog.prompt_section() == ""


def test_a_broken_skill_is_logged_once_naming_its_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = write_skill(tmp_path, "torn", "x")
    broken.write_text("---\nname: torn\n")
    catalog = SkillCatalog([Location("workspace", tmp_path)])
    with caplog.at_level(logging.WARNING, logger="bot.skills"):
        for _ in range(3):
            assert catalog.prompt_section() == ""
    assert [r.getMessage() for r in caplog.records] == [
        f"skipped the skill in {broken}: the front matter has no closing '---' line"
    ]
    assert [p.path for p in catalog.scan().problems] == [broken]
