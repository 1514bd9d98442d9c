"""``pinclaw config explain KEY``: one entry of the configuration reference in the terminal.

Whatever is typed, the answer is the entry, the table, or one short printable line
naming the nearest key (exit code 2); never a traceback, never typed control
characters echoed raw. The reference itself is tested in ``tests/test_config_reference.py``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bot.cli.config_reference import explain, explain_all
from bot.config.reference import Entry, Table, find, tables
from bot.core.channel_registry import CHANNELS
from bot.core.errors import UsageError
from tests.cli_helpers import PINCLAW, run
from tests.test_config_reference import PAGE


@pytest.fixture(scope="module")
def every() -> list[Table]:
    return tables()


# -- pinclaw config explain --------------------------------------------------------------


def test_explain_prints_a_keys_type_default_and_description(home: Path, every: list[Table]) -> None:
    nowhere = {"PINCLAW_CONFIG": str(home / "no-such-config.toml")}  # needs no config file
    done = run(home, "config", "explain", "home_assistant.allow", env=nowhere)
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert lines[:3] == ["[home_assistant] allow", "Type:     list of strings", "Default:  []"]
    entry = find("home_assistant.allow", every)
    assert isinstance(entry, Entry) and entry.description
    assert entry.description.replace("`", "") in " ".join(done.stdout.split())
    assert all(len(line) <= 80 for line in lines)
    assert lines[-1] == "More: docs/reference/configuration.md#home_assistant-allow"
    assert "{#home_assistant-allow}" in PAGE.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("key", "first"),
    [
        (["[channels.telegram] allowed_users"], "[channels.telegram] allowed_users"),
        (["channels", "telegram", "allowed_users"], "[channels.telegram] allowed_users"),
        (["browser.profiles.work.hosts"], "[browser.profiles.NAME] hosts"),
        (["TRIGGERS.ON"], "[[triggers]] on"),
        (['usage.prices."llama3.2".input_per_million'], "[usage.prices.NAME] input_per_million"),
    ],
)
def test_explain_takes_a_key_written_any_way(
    key: list[str], first: str, every: list[Table]
) -> None:
    assert explain(" ".join(key), every).splitlines()[0] == first


def test_explain_of_a_table_lists_its_keys_and_the_cli_says_the_same(
    home: Path, every: list[Table]
) -> None:
    done = run(home, "config", "explain", "[home_assistant]")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == explain("home_assistant", every) + "\n"
    keys = done.stdout.split("Keys:\n")[1].split("\n\n")[0].splitlines()
    assert [line.split()[0] for line in keys] == ["url", "token", "allow", "timeout_s"]
    assert "allow      list of strings; default []" in done.stdout
    slack = explain("[channels.slack]", every)
    assert "  bot_token " in slack and "secret string; required" in slack
    channels = explain("channels", every).splitlines()
    assert channels[0] == "Tables under channels:"
    assert [line.split()[0] for line in channels[1:] if line.startswith("  [")] == [
        f"[channels.{n}]" for n in CHANNELS
    ]
    assert explain("browser.profiles", every).startswith("[browser.profiles.NAME]\n")


def test_an_unknown_key_is_one_line_with_the_nearest_key_and_exit_code_2(home: Path) -> None:
    done = run(home, "config", "explain", "home_assistant.alow")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "pinclaw: no config key 'home_assistant.alow'; did you mean [home_assistant] allow?\n"
    )
    with pytest.raises(UsageError, match="lists them"):
        explain("zzzz.qqqq")


# -- pinclaw config explain, given what a hostile or hurried person types -----------------


@pytest.mark.parametrize("text", ["", "   ", "[", "]]]", "..", ".", '""', "[[ ]]"])
def test_no_key_at_all_asks_for_one(text: str, every: list[Table]) -> None:
    with pytest.raises(UsageError, match=r"^name a config key, like home_assistant\.allow"):
        explain(text, every)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("\x1b[31mred", "no config key '\\x1b[31mred'; "),
        ("foo\rbar", "no config key 'foo\\rbar'; "),
        ("\u202eevil", "no config key '\\u202eevil'; "),
        ("a" * 10_000, "no config key '" + "a" * 59 + "…'; "),
        ("home", "no config key 'home'; did you mean [home_assistant]?"),
        ("brow", "did you mean [browser]?"),
        ("home_assistant.alow", "did you mean [home_assistant] allow?"),
        (
            'home_assistant.allow=["x"]',
            "name the key without a value, as in `pinclaw config explain home_assistant.allow`",
        ),
        ("[channels.telegram] mode = polling", "explain channels.telegram.mode`"),
        ("channels.NAME.nope", "no config key 'channels.NAME.nope'; "),
    ],
)
def test_an_unknown_key_is_one_short_printable_line(
    text: str, said: str, every: list[Table]
) -> None:
    with pytest.raises(UsageError) as raised:
        explain(text, every)
    line = str(raised.value)
    assert said in line
    assert "\n" not in line and line.isprintable() and len(line) < 160


def test_several_keys_print_one_entry_after_the_other(every: list[Table]) -> None:
    both = explain_all(["home_assistant.allow", "provider.kind"], every)
    first, second = both.split("\n\n[provider] kind\n")
    assert first == explain("home_assistant.allow", every)
    assert "[provider] kind\n" + second == explain("provider.kind", every)
    # the words of one key stay one key; one unknown among several names them all
    assert explain_all(["channels", "telegram", "token"], every).startswith(
        "[channels.telegram] token\n"
    )
    with pytest.raises(UsageError, match=r"'home_assistant\.allow provider\.knd'"):
        explain_all(["home_assistant.allow", "provider.knd"], every)


def test_name_for_a_channel_means_each_channel(every: list[Table]) -> None:
    shared = explain("[channels.NAME] allowed_users", every).splitlines()
    assert shared[:3] == [
        "[channels.NAME] allowed_users",
        "Type:     list of strings",
        "Default:  []",
    ]
    assert "The same key in [channels.telegram], [channels.discord], [channels.slack]." in shared
    assert shared[-1] == "More: docs/reference/configuration.md#channels-telegram-allowed_users"
    token = explain("channels.NAME.token", every).splitlines()
    assert token[0] == "[channels.NAME] token is one of:"
    assert [line.split()[0] for line in token[1:]] == ["[channels.telegram]", "[channels.discord]"]
    tables_ = explain("[channels.NAME]", every).splitlines()
    assert [line.split()[0] for line in tables_[1:] if line.startswith("  [")] == [
        f"[channels.{n}]" for n in CHANNELS
    ]
    # NAME stands for a table's name, never a key's: [[triggers]] has a key called name
    assert explain("triggers.NAME", every).startswith("[[triggers]] name\n")


@pytest.mark.parametrize(
    "text",
    [
        "channels.NAME\x1ftoken",  # a separator that is a control character
        "channels\x1c\x1dNAME",
        "agents.\x1bwork",  # a name typed for NAME
        "agents\x1c",
        "browser.profiles.\x1bwork.hosts=1",
        "[channels.NAME]\x85allowed_users",
    ],
)
def test_what_is_typed_never_reaches_the_terminal_raw(text: str, every: list[Table]) -> None:
    try:
        said = explain(text, every)
    except UsageError as exc:
        said = str(exc)
    assert all(line.isprintable() for line in said.splitlines()), said


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("agents", "Tables under agents:"),
        ("browser.profiles", "[browser.profiles.NAME]"),
        ("triggers", "[[triggers]]"),
        ("[[triggers]]", "[[triggers]]"),
        ("mcp.servers", "[[mcp.servers]]"),
        ("hardware.gpio", "[hardware.gpio.NAME]"),
    ],
)
def test_tables_of_tables_and_arrays_of_tables_are_explained(
    text: str, first: str, every: list[Table]
) -> None:
    assert explain(text, every).splitlines()[0] == first


def _shell(command: str, home: Path, **env: str) -> subprocess.CompletedProcess[bytes]:
    """``command`` in sh, with ``$PINCLAW`` the installed command: for closed streams."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PINCLAW_")}
    environ |= {"HOME": str(home), "PINCLAW": str(PINCLAW), **env}
    return subprocess.run(
        ["sh", "-c", command], env=environ, capture_output=True, timeout=60, check=False
    )


def test_explain_from_the_command_line_never_shows_a_traceback(home: Path) -> None:
    broken = home / "broken.toml"
    broken.write_text("this is [not toml\n")
    hostile = run(home, "config", "explain", "\x1b[31mred\x1b]0;title\x07", "\rx")
    assert (hostile.returncode, hostile.stdout) == (2, "")
    assert hostile.stderr.count("\n") == 1 and "\x1b" not in hostile.stderr
    assert "\r" not in hostile.stderr and "\x07" not in hostile.stderr
    assert hostile.stderr.startswith("pinclaw: no config key '\\x1b[31mred")
    no_config = run(home, "--config", str(broken), "config", "explain", "web.listen")
    assert (no_config.returncode, no_config.stderr) == (0, "")
    assert no_config.stdout.startswith("[web] listen\n")
    helped = run(home, "config", "explain", "--help")
    assert helped.returncode == 0 and "KEY" in helped.stdout
    runs = {
        "stdout closed": _shell('"$PINCLAW" config explain web.listen >&-', home),
        "stdout closed, whole page": _shell('"$PINCLAW" config reference >&-', home),
        "stderr closed, unknown key": _shell('"$PINCLAW" config explain nope 2>&-', home),
        "an ASCII terminal": _shell('"$PINCLAW" config explain provider.max_retries', home,
                                    PYTHONIOENCODING="ascii"),
    }  # fmt: skip
    assert {name: done.returncode for name, done in runs.items()} == {
        "stdout closed": 0,
        "stdout closed, whole page": 0,
        "stderr closed, unknown key": 2,
        "an ASCII terminal": 0,
    }
    assert [name for name, done in runs.items() if b"Traceback" in done.stderr] == []
    assert "Limits:   \\u2265 0, \\u2264 10" in runs["an ASCII terminal"].stdout.decode()


def test_the_page_is_utf8_whatever_the_terminal_encoding(home: Path) -> None:
    done = _shell('"$PINCLAW" config reference', home, PYTHONIOENCODING="ascii")
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout == PAGE.read_bytes()
