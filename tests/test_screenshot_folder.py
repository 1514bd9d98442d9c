"""A plain test run leaves the README's screenshots alone; they go to pytest's temporary folder.

One browser test that takes screenshots runs in a pytest of its own, as a person
would run it, with its own ``--basetemp``; ``docs/screenshots`` must not change
(only ``--update-screenshots`` writes there, and no test passes it).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from tests.browser import DOCS_SCREENSHOTS

ROOT = Path(__file__).resolve().parents[1]
TAKES_LOGIN_SCREENSHOTS = "tests/test_panel.py::test_log_in_and_allow_a_pending_request_once"


def contents(folder: Path) -> dict[str, str]:
    """Each PNG's name and content hash, with its modification time."""
    return {
        path.name: f"{hashlib.sha256(path.read_bytes()).hexdigest()} {path.stat().st_mtime_ns}"
        for path in sorted(folder.glob("*.png"))
    }


def test_a_plain_run_writes_screenshots_to_the_temporary_folder(tmp_path: Path) -> None:
    before = contents(DOCS_SCREENSHOTS)
    basetemp = tmp_path / "base"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*command, f"--basetemp={basetemp}", TAKES_LOGIN_SCREENSHOTS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed" in done.stdout, done.stdout[-3000:]
    taken = basetemp / "screenshots"
    for name in ("login", "approvals", "overview"):
        for suffix in ("", "-phone"):
            png = taken / f"{name}{suffix}.png"
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
    assert f"screenshots: {taken}" in done.stdout
    assert contents(DOCS_SCREENSHOTS) == before
