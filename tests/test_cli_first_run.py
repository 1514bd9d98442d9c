"""A first run with no surprises: what a new user meets in their first few commands.

Each case runs the installed ``pinclaw`` as a person would (``service status``
agreeing with ``doctor`` is in test_systemd.py, beside the other service tests).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.cli_helpers import PINCLAW, local_config, one_line, run, write_config
from tests.fake_llm import FakeLLM

EXAMPLE = Path(__file__).resolve().parent.parent / "pinclaw.example.toml"


def test_the_example_config_checks_with_a_note_on_unset_variables(home: Path) -> None:
    done = run(home, "config", "check", str(EXAMPLE))
    assert (done.returncode, done.stderr) == (0, "")
    ok, note = done.stdout.splitlines()
    assert ok.startswith(f"{EXAMPLE}: OK (provider openai:gpt-4o-mini")
    assert note == (
        "Note: not set here: OPENAI_API_KEY (provider.api_key). `pinclaw run` reads it from "
        f"its environment; the service (`pinclaw service install`) from {EXAMPLE.parent}"
        "/pinclaw.env. `pinclaw config check --strict` fails on this."
    )
    strict = run(home, "config", "check", "--strict", str(EXAMPLE))
    assert (strict.returncode, strict.stdout) == (2, "")
    assert one_line(strict.stderr) == (
        f"pinclaw: {EXAMPLE}: provider.api_key: environment variable OPENAI_API_KEY is not "
        "set (the config refers to ${OPENAI_API_KEY})"
    )
    set_here = run(home, "config", "check", "--strict", str(EXAMPLE), env={"OPENAI_API_KEY": "k"})
    assert set_here.returncode == 0 and "Note" not in set_here.stdout


def test_a_config_with_several_mistakes_names_each_on_its_own_line(home: Path) -> None:
    path = write_config(
        home,
        local_config("http://127.0.0.1:9", "timeout = 5\n")
        + '[general]\ntimezone = "Mars/Olympus"\n[channels.telegram]\ntoken = "${TG}"\n',
    )
    unset = (
        f"pinclaw: {path}: channels.telegram.token: environment variable TG is not set "
        "(the config refers to ${TG})"
    )
    mistakes = [
        f"pinclaw: {path}: provider.timeout: unknown key; did you mean 'timeout_s'?",
        f"pinclaw: {path}: general.timezone: expected an IANA timezone name like "
        "'Europe/Lisbon', got 'Mars/Olympus'",
    ]
    started = run(home, "agent", "-m", "hi")
    assert (started.returncode, started.stdout) == (2, "")
    assert "Traceback" not in started.stderr and "more problem" not in started.stderr
    assert started.stderr.splitlines() == [unset, *mistakes]
    checked = run(home, "config", "check")  # the variable is a note there, as ever
    assert checked.returncode == 2
    assert checked.stderr.splitlines() == mistakes
    assert one_line(checked.stdout).startswith("Note: not set here: TG (channels.telegram.token).")


def test_onboard_without_a_terminal_ends_the_question_line_before_the_error(home: Path) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PINCLAW_", "OPENAI_"))}
    environ["HOME"] = str(home)
    done = subprocess.run(
        [str(PINCLAW), "onboard"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # as a terminal shows both
        text=True,
        env=environ,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    *_, question, error = done.stdout.splitlines()
    assert question == "Provider kind (openai | anthropic | gemini | ollama) [openai]: "
    assert error == (
        "pinclaw: onboarding asks its questions on standard input, which ended before an "
        "answer: run it in a terminal, or pass the answers as flags with --non-interactive"
    )
    assert not (home / ".pinclaw" / "config.toml").exists()


def test_the_first_web_token_replaces_nothing(home: Path) -> None:
    write_config(home, local_config("http://127.0.0.1:9"))
    first = run(home, "web", "token")
    assert first.returncode == 0, first.stderr
    assert first.stderr.splitlines() == [
        "Open http://127.0.0.1:8765/login and paste the token above."
    ]
    second = run(home, "web", "token")
    assert second.stderr.splitlines()[-1] == "The previous token no longer works."
    assert second.stdout != first.stdout


def test_the_terminal_help_lists_quit(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url))
    done = run(home, "chat", stdin="/help\n/quit\nnever sent\n")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Commands:"
    assert "/help - List the commands" in lines
    assert lines[-1] == "/quit - Leave the chat (also /exit, or Ctrl-D)"
    assert llm.requests == []  # neither /help nor what followed /quit went to the model
