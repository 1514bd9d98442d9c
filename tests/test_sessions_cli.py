"""``pinclaw sessions list | show | clear``, run as a person runs them, against the fake LLM."""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path

from tests.cli_helpers import local_config, one_line, run, write_config
from tests.fake_llm import FakeLLM

LISTED = re.compile(
    r"^#(\d+)\s+(\S+)\s+(\d+) messages?\s+\d{4}-\d\d-\d\d \d\d:\d\d(  \(current\))?$"
)
SHOWN = re.compile(r"^\d\d:\d\d (.+)$")


def listed(home: Path, *args: str) -> list[tuple[int, str, int, bool]]:
    """``pinclaw sessions list`` read back as (id, key, messages, current) rows."""
    done = run(home, "sessions", "list", *args)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    rows = []
    for line in done.stdout.splitlines():
        match = LISTED.match(line)
        assert match, line
        rows.append((int(match[1]), match[2], int(match[3]), bool(match[4])))
    return rows


def shown(home: Path, target: str, *args: str) -> list[str]:
    """The message lines of ``pinclaw sessions show``, without their times."""
    done = run(home, "sessions", "show", target, *args)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return [m[1] for line in done.stdout.splitlines() if (m := SHOWN.match(line))]


def usage_of(home: Path, key: str) -> tuple[int, int, int]:
    """(sessions, turns, tokens) stored for ``key``, read straight from the file."""
    with closing(sqlite3.connect(home / ".pinclaw" / "pinclaw.db")) as db:
        row = db.execute(
            "SELECT COUNT(DISTINCT s.id), COUNT(t.id), "
            "COALESCE(SUM(t.input_tokens + t.output_tokens), 0) "
            "FROM sessions s LEFT JOIN turns t ON t.session_id = s.id WHERE s.key = ?",
            (key,),
        ).fetchone()
    return int(row[0]), int(row[1]), int(row[2])


def test_list_show_and_clear_a_conversation(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url))
    for text in ("my locker code is 4521", "what is 6*7?"):
        assert run(home, "agent", "-m", text, "--session", "work").returncode == 0
    assert run(home, "agent", "-m", "buy oat milk", "--session", "errands").returncode == 0
    first_request = llm.requests[0].view.message_count

    rows = listed(home)
    assert [(key, count, current) for _, key, count, current in rows] == [
        ("terminal:errands", 2, True),  # the most recent activity comes first
        ("terminal:work", 6, True),  # two turns; the second called the calculator
    ]
    work_id = rows[1][0]
    assert listed(home, "--channel", "terminal") == rows
    elsewhere = run(home, "sessions", "list", "--channel", "telegram")
    assert elsewhere.stdout == "No conversations on telegram yet.\n"
    limited = run(home, "sessions", "list", "--limit", "1").stdout.splitlines()
    assert len(limited) == 2 and "terminal:errands" in limited[0]
    assert limited[1] == "(1 of 2 conversations; --limit N shows more)"

    expected = [
        "user: my locker code is 4521",
        "assistant: You said: my locker code is 4521",
        "user: what is 6*7?",
        'assistant → calculator(expression="6*7")',
        "tool calculator: 6*7 = 42",
        "assistant: The tool said: 6*7 = 42",
    ]
    assert shown(home, "work") == expected
    assert shown(home, "terminal:work") == expected
    assert shown(home, f"#{work_id}") == expected
    assert shown(home, str(work_id), "--limit", "2") == expected[-2:]
    before = sessions, turns, tokens = usage_of(home, "terminal:work")
    assert (sessions, turns) == (1, 2) and tokens > 0

    done = run(home, "sessions", "clear", "work")
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        "Cleared 6 messages of terminal:work.\n",
        "",
    )
    assert [(key, count) for _, key, count, _ in listed(home)] == [
        ("terminal:errands", 2),
        ("terminal:work", 0),
    ]
    assert shown(home, "work") == []
    assert usage_of(home, "terminal:work") == before  # the daily budget still counts them

    assert run(home, "agent", "-m", "what did I tell you?", "--session", "work").returncode == 0
    after = llm.requests[-1]
    assert after.view.message_count == first_request
    assert "4521" not in json.dumps(after.body)
    assert shown(home, "work") == [
        "user: what did I tell you?",
        "assistant: You said: what did I tell you?",
    ]
    assert shown(home, "errands")[0] == "user: buy oat milk"


def test_a_key_means_its_current_conversation(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url))
    chat = run(home, "chat", "--session", "work", stdin="old words\n/new\nnew words\n")
    assert chat.returncode == 0, chat.stderr
    rows = listed(home)
    assert [(key, count, current) for _, key, count, current in rows] == [
        ("terminal:work", 2, True),
        ("terminal:work", 2, False),
    ]
    older = rows[1][0]
    assert shown(home, "work")[0] == "user: new words"
    assert shown(home, f"#{older}")[0] == "user: old words"

    done = run(home, "sessions", "clear", "work")
    assert done.stdout == "Cleared 2 messages of terminal:work.\n"
    assert shown(home, f"#{older}")[0] == "user: old words"
    done = run(home, "sessions", "clear", "work", "--all-sessions")
    assert done.stdout == "Cleared 2 messages of terminal:work (2 sessions).\n"
    assert [count for _, _, count, _ in listed(home)] == [0, 0]
    assert usage_of(home, "terminal:work")[:2] == (2, 2)


def test_unknown_targets_are_one_line_and_exit_2(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url))
    assert run(home, "agent", "-m", "hello there", "--session", "work").returncode == 0
    for args, named in (
        (["show", "nope"], "'nope' (terminal:nope)"),
        (["clear", "telegram:7001"], "'telegram:7001'"),
        (["clear", "#99"], "#99"),
    ):
        done = run(home, "sessions", *args)
        assert (done.returncode, done.stdout) == (2, ""), args
        line = one_line(done.stderr)
        assert line.startswith("pinclaw: there is no ") and named in line, line
        assert "`pinclaw sessions list`" in line
    assert [count for _, _, count, _ in listed(home)] == [2]  # nothing was cleared


def test_an_empty_database_has_no_conversations(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url))
    done = run(home, "sessions", "list")
    assert (done.returncode, done.stdout, done.stderr) == (0, "No conversations yet.\n", "")
    assert llm.requests == []
