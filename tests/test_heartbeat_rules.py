"""The heartbeat's rules as fast tables: what counts as a task, as quiet, as active hours."""

from __future__ import annotations

from datetime import datetime

import pytest

from bot.core.errors import UserError
from bot.cron.heartbeat import TEMPLATE, in_active_hours, is_quiet, tasks_in
from bot.cron.jobs import parse_target
from bot.cron.store import Target


@pytest.mark.parametrize(
    ("text", "tasks"),
    [
        (TEMPLATE, ""),
        ("", ""),
        ("# Heartbeat\n\n<!-- - not a task -->\n", ""),
        ("- \n* \n- [ ]\n", ""),
        ("# Tasks\n- Check the greenhouse.\n", "- Check the greenhouse."),
        ("<!--\nnotes\n-->\nWater the plants if dry\n", "Water the plants if dry"),
        (TEMPLATE + "- Look at todo.md\n", "- Look at todo.md"),
    ],
)
def test_tasks_are_what_is_left_without_comments_headings_and_blanks(text: str, tasks: str) -> None:
    assert tasks_in(text) == tasks


@pytest.mark.parametrize(
    ("reply", "quiet"),
    [
        ("HEARTBEAT_OK", True),
        ("  HEARTBEAT_OK.  ", True),
        ("**HEARTBEAT_OK**", True),
        ("Nothing to report. HEARTBEAT_OK", True),
        ("HEARTBEAT_OK - all tasks checked", True),
        ("", True),
        ("NO_REPLY", True),
        ("The greenhouse is at 3 °C.", False),
        ("Heartbeat: HEARTBEAT_OK was not possible, the sensor is offline.", False),
    ],
)
def test_only_ok_replies_are_quiet(reply: str, quiet: bool) -> None:
    assert is_quiet(reply) is quiet


@pytest.mark.parametrize(
    ("spec", "clock", "active"),
    [
        ("", "03:00", True),
        ("08:00-22:00", "07:59", False),
        ("08:00-22:00", "08:00", True),
        ("08:00-22:00", "21:59", True),
        ("08:00-22:00", "22:00", False),
        ("22:00-06:00", "23:30", True),
        ("22:00-06:00", "05:59", True),
        ("22:00-06:00", "06:00", False),
        ("22:00-06:00", "12:00", False),
        ("00:00-24:00", "23:59", True),
    ],
)
def test_active_hours_may_cross_midnight(spec: str, clock: str, active: bool) -> None:
    now = datetime.fromisoformat(f"2026-11-21T{clock}:00")
    assert in_active_hours(spec, now) is active


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("owner", Target("owner")),
        ("none", Target("none")),
        ("telegram:123", Target("chat", "telegram", "123", None, True)),
        ("telegram:-100123:7", Target("chat", "telegram", "-100123", "7", False)),
        ("slack:C0123", Target("chat", "slack", "C0123", None, True)),
        ("log", Target("log")),
        ("terminal:owner", Target("terminal")),
        ("file:notes/plants.md", Target("file", path="notes/plants.md")),
    ],
)
def test_targets_are_read_from_text(text: str, target: Target) -> None:
    assert parse_target(text) == target
    assert str(target) == text


@pytest.mark.parametrize("text", ["", "telegram", ":123", "telegram:"])
def test_an_unreadable_target_says_how_to_write_one(text: str) -> None:
    with pytest.raises(UserError, match="use 'owner', 'terminal:owner', 'log', 'file:PATH', "):
        parse_target(text)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("terminal:ada", "the terminal target is 'terminal:owner'"),
        ("file:", "a file target needs a path"),
        ("file:  ", "a file target needs a path"),
    ],
)
def test_terminal_and_file_targets_say_how_to_write_them(text: str, said: str) -> None:
    with pytest.raises(UserError, match=said):
        parse_target(text)
