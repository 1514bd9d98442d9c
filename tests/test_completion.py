"""Shell completion: the scripts print, and the real command answers the shell's questions."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.cli_helpers import PINCLAW, run


def complete(line: str, home: Path) -> list[str]:
    """What ``pinclaw`` offers for ``line``, asked the way the shell script asks."""
    answer = home / "completions"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_IFS": "\n",
        "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
    }
    done = subprocess.run(
        [str(PINCLAW)], env=env, capture_output=True, timeout=30, check=False, text=True
    )
    assert done.returncode == 0, done.stderr
    return [word.strip() for word in answer.read_text().split("\n") if word.strip()]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_shell_gets_a_script(tmp_path: Path, shell: str) -> None:
    printed = run(tmp_path, "completion", shell)
    assert printed.returncode == 0, printed.stderr
    assert "pinclaw" in printed.stdout and "_ARGCOMPLETE" in printed.stdout


def test_commands_and_options_are_completed(tmp_path: Path) -> None:
    assert complete("pinclaw sta", tmp_path) == ["status"]
    assert "--json" in complete("pinclaw status --", tmp_path)
    assert set(complete("pinclaw cron ", tmp_path)) >= {"list", "add", "history"}
    assert complete("pinclaw completion f", tmp_path) == ["fish"]
