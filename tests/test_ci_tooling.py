"""The tools README's test line and CI run: scripts/test-setup and .ci/runtime_requirements.py.

``scripts/test-setup`` runs for real, with the system boundary faked on its PATH:
``dpkg-query`` reports what is installed, ``apt-get`` and ``sudo`` record their
arguments, ``id`` says who runs it; nothing is installed. The requirement
printer runs on pyproject files of our own making, markers included.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT / "scripts" / "test-setup"
REQUIREMENTS = ROOT / ".ci" / "runtime_requirements.py"

FAKE_DPKG_QUERY = """#!/bin/sh
# dpkg-query -W -f='${db:Status-Status}' PACKAGE: "installed" unless listed in $MISSING
for asked; do :; done  # the last argument
for package in $MISSING; do [ "$package" = "$asked" ] && { echo not-installed; exit 0; }; done
echo installed
"""
FAKE_APT_GET = """#!/bin/sh
echo "apt-get $*" >>"$CALLS"
case " $* " in *" install "*) [ -e "$FAIL_ONCE" ] && { /bin/rm "$FAIL_ONCE"; exit 100; } ;; esac
exit 0
"""
FAKE_SUDO = """#!/bin/sh
echo "sudo $1 $2" >>"$CALLS"
exec "$@"
"""


def fake_system(tmp_path: Path, *, uid: int, sudo: bool) -> Path:
    """A PATH folder with the fakes, ``env`` and ``ls``, and nothing else."""
    folder = tmp_path / "bin"
    folder.mkdir()
    scripts = {
        "dpkg-query": FAKE_DPKG_QUERY,
        "apt-get": FAKE_APT_GET,
        "id": f"#!/bin/sh\necho {uid}\n",
    }
    if sudo:
        scripts["sudo"] = FAKE_SUDO
    for name, body in scripts.items():
        (folder / name).write_text(body)
        (folder / name).chmod(0o755)
    for name in ("env", "ls"):
        (folder / name).symlink_to(f"/usr/bin/{name}")
    return folder


def setup(
    tmp_path: Path,
    *,
    uid: int = 1000,
    sudo: bool = True,
    missing: str = "",
    fail_once: bool = False,
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run scripts/test-setup on the fake system; its result and the recorded calls."""
    folder = fake_system(tmp_path, uid=uid, sudo=sudo)
    calls = tmp_path / "calls"
    flag = tmp_path / "fail-once"
    if fail_once:
        flag.touch()
    environ = {
        "PATH": str(folder),
        "MISSING": missing,
        "CALLS": str(calls),
        "FAIL_ONCE": str(flag),
    }
    done = subprocess.run(
        ["/bin/sh", str(SETUP)],
        capture_output=True,
        text=True,
        env=environ,
        timeout=30,
        check=False,
    )
    return done, calls.read_text().splitlines() if calls.exists() else []


def installs(calls: list[str]) -> list[str]:
    """The apt-get install calls' package lists."""
    return [call.split(" install ", 1)[1] for call in calls if " install " in call]


def test_the_script_is_executable_and_readme_runs_it_before_the_tests() -> None:
    assert os.access(SETUP, os.X_OK)
    readme = (ROOT / "README.md").read_text().splitlines()
    line = next(line for line in readme if "python -m pytest -q" in line)
    assert line.startswith("scripts/test-setup && "), line


def test_with_everything_installed_it_changes_nothing_and_asks_for_nothing(tmp_path: Path) -> None:
    done, calls = setup(tmp_path)
    assert done.returncode == 0, done.stderr
    assert calls == []
    assert done.stdout == "test-setup: the test packages are installed\n"


def test_as_a_user_it_installs_only_what_is_missing_through_sudo(tmp_path: Path) -> None:
    done, calls = setup(tmp_path, missing="chromium bubblewrap")
    assert done.returncode == 0, done.stderr
    assert calls, done.stdout
    # Each apt-get ran through sudo (the fake sudo logs itself, then runs the command).
    assert calls[0::2] == ["sudo env DEBIAN_FRONTEND=noninteractive"] * (len(calls) // 2)
    assert all(call.startswith("apt-get ") for call in calls[1::2])
    assert installs(calls) == ["bubblewrap chromium"]
    assert "installing bubblewrap chromium" in done.stdout


def test_as_root_it_runs_apt_get_itself(tmp_path: Path) -> None:
    done, calls = setup(tmp_path, uid=0, sudo=False, missing="git")
    assert done.returncode == 0, done.stderr
    assert not any(call.startswith("sudo") for call in calls)
    assert installs(calls) == ["git"]


def test_a_failed_install_updates_the_package_lists_and_tries_again(tmp_path: Path) -> None:
    done, calls = setup(tmp_path, uid=0, missing="curl", fail_once=True)
    assert done.returncode == 0, done.stderr
    commands = [call.split()[-1] if " install " not in call else "install" for call in calls]
    assert commands[-3:] == ["install", "update", "install"]
    assert installs(calls) == ["curl", "curl"]


def test_without_root_or_sudo_it_says_so_in_one_line(tmp_path: Path) -> None:
    done, calls = setup(tmp_path, sudo=False, missing="chromium")
    assert done.returncode == 1
    assert calls == []
    assert done.stderr == (
        "test-setup: installing chromium needs root: run this as root, or install sudo\n"
    )


def requirements(tmp_path: Path, dependencies: list[str], *args: str) -> list[str]:
    """What .ci/runtime_requirements.py prints for a pyproject with ``dependencies``."""
    pyproject = tmp_path / "pyproject.toml"
    listed = ", ".join(f"'{line}'" for line in dependencies)
    pyproject.write_text(
        f"[project]\nname = 'x'\ndependencies = [{listed}]\n"
        "[project.optional-dependencies]\ncharts = ['matplotlib>=3.6']\n"
    )
    done = subprocess.run(
        [sys.executable, str(REQUIREMENTS), "--pyproject", str(pyproject), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


MARKED = [
    "httpx>=0.28,<0.29",
    'lgpio>=0.2; platform_machine == "aarch64" and sys_platform == "linux"',
    'pywin32>=300; sys_platform == "win32"',
    'tomli>=2; python_version < "3.11"',
    'rpi-only; platform_machine == "armv7l"',
]


def test_markers_are_evaluated_for_64_bit_arm_linux_and_dropped(tmp_path: Path) -> None:
    printed = requirements(tmp_path, MARKED, "--machine", "aarch64")
    assert printed == ["httpx<0.29,>=0.28", "lgpio>=0.2"]


def test_another_machine_gets_its_own_list(tmp_path: Path) -> None:
    armv7l = requirements(tmp_path, MARKED, "--machine", "armv7l")
    assert armv7l == ["httpx<0.29,>=0.28", "rpi-only"]
    assert requirements(tmp_path, MARKED, "--machine", "x86_64") == ["httpx<0.29,>=0.28"]


def test_an_extra_adds_its_list(tmp_path: Path) -> None:
    assert requirements(tmp_path, ["numpy>=1.26"], "--extra", "charts") == [
        "numpy>=1.26",
        "matplotlib>=3.6",
    ]


def test_the_projects_own_list_is_read_from_pyproject() -> None:
    done = subprocess.run(
        [sys.executable, str(REQUIREMENTS), "--pyproject", str(ROOT / "pyproject.toml")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    names = [line.split("<")[0].split(">")[0].split("=")[0] for line in done.stdout.splitlines()]
    assert {"httpx", "pydantic", "numpy", "aiohttp"} <= set(names)
    assert not any(";" in line for line in done.stdout.splitlines())


def test_an_unknown_extra_is_named(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[project]\nname = 'x'\ndependencies = []\n")
    done = subprocess.run(
        [sys.executable, str(REQUIREMENTS), "--pyproject", str(pyproject), "--extra", "nope"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr == f"runtime_requirements: {pyproject} has no extra 'nope'\n"
