"""Running the installed ``pinclaw`` command in tests, with a throw-away HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PINCLAW = Path(sys.executable).parent / "pinclaw"


def run(
    home: Path, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    assert PINCLAW.exists(), "the pinclaw console script is not installed in this environment"
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PINCLAW_", "OPENAI_"))}
    environ.update({"HOME": str(home), "TZ": "UTC", **(env or {})})
    return subprocess.run(
        [str(PINCLAW), *args],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
        check=False,
    )


def write_config(home: Path, body: str) -> Path:
    path = home / ".pinclaw" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    return path


def local_config(url: str, extra: str = "") -> str:
    return f'[provider]\nkind = "openai"\nmodel = "local-model"\nbase_url = "{url}/v1"\n{extra}'


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]
