"""Print pyproject's runtime requirements that apply on one platform, one a line.

CI passes them to ``pip download --only-binary=:all: --platform ...`` to check that
64-bit Raspberry Pi OS gets every dependency as a binary wheel. pip evaluates
environment markers against the machine it runs on, not against ``--platform``, so
the markers are evaluated here, for the target, and only what applies is printed,
without its marker.

    python .ci/runtime_requirements.py [--pyproject PATH] [--machine aarch64] [--extra NAME]...
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

# Raspberry Pi OS Bookworm: Debian's CPython 3.11 on Linux.
PYTHON = "3.11.2"


def environment(machine: str, extra: str) -> dict[str, str]:
    """The marker environment of CPython 3.11 on Linux on ``machine``."""
    return {
        "implementation_name": "cpython",
        "implementation_version": PYTHON,
        "os_name": "posix",
        "platform_machine": machine,
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": "Linux",
        "platform_version": "",
        "python_full_version": PYTHON,
        "python_version": PYTHON.rsplit(".", 1)[0],
        "sys_platform": "linux",
        "extra": extra,
    }


def requirements(pyproject: Path, machine: str, extras: list[str]) -> list[str]:
    """The runtime (and ``extras``) requirements that apply on ``machine``, markers dropped."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    wanted: list[tuple[str, str]] = [(line, "") for line in project.get("dependencies", [])]
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        if extra not in optional:
            raise SystemExit(f"runtime_requirements: {pyproject} has no extra {extra!r}")
        wanted += [(line, extra) for line in optional[extra]]
    chosen: list[str] = []
    for line, extra in wanted:
        requirement = Requirement(line)
        marker = requirement.marker
        if marker is not None and not marker.evaluate(environment(machine, extra)):
            continue
        requirement.marker = None
        if str(requirement) not in chosen:
            chosen.append(str(requirement))
    return chosen


def main(argv: list[str]) -> int:
    """Print the requirements, one a line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pyproject", type=Path, default=Path("pyproject.toml"))
    parser.add_argument("--machine", default="aarch64", help="platform_machine (uname -m)")
    parser.add_argument("--extra", action="append", default=[], help="add an extra's list")
    args = parser.parse_args(argv)
    for line in requirements(args.pyproject, args.machine, args.extra):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
