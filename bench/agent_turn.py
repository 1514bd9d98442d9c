"""Benchmark: wall time and peak RSS of ``pinclaw agent -m hi`` against a local fake model.

Run from the repository root, with PinClaw and its test extras installed:

    python bench/agent_turn.py [--runs 20]

It starts the fake LLM server (tests/fake_llm) on 127.0.0.1, writes a config in a
throw-away HOME, runs the real ``pinclaw`` console script once cold (creating the
database and workspace) and then ``--runs`` more times, and reads each child's
peak RSS from ``os.wait4``. It also reports the size of the first model request
with the default tool set. Figures go to stdout as a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fake_llm import FakeLLM

PINCLAW = Path(sys.executable).parent / "pinclaw"


# The peak RSS a kernel reports for a child survives execve and starts from the
# parent's size at fork, so a child forked from this (large) process would report
# at least this process's size. A minimal launcher forks the measured command
# from a small process, times it and reports its own child's peak RSS.
LAUNCHER = """
import os, sys, time
started = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - started
sys.stderr.write(f"\\nBENCH {os.waitstatus_to_exitcode(status)} {wall} {usage.ru_maxrss}\\n")
"""


def run_once(args: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run a command; return (wall seconds, peak RSS in MiB, stdout)."""
    done = subprocess.run(
        [sys.executable, "-S", "-c", LAUNCHER, *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    marker = done.stderr.rsplit("BENCH ", 1)
    if len(marker) != 2:
        raise SystemExit(f"{args} did not run: {done.stderr}")
    code, wall, rss_kib = marker[1].split()
    if code != "0":
        raise SystemExit(f"{args} failed ({code}): {marker[0]}")
    return float(wall), int(rss_kib) / 1024, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    options = parser.parse_args()
    if not PINCLAW.exists():
        raise SystemExit(f"{PINCLAW} not found: install PinClaw into this environment first")
    with FakeLLM.running() as llm, tempfile.TemporaryDirectory() as home:
        config = Path(home) / ".pinclaw" / "config.toml"
        config.parent.mkdir()
        config.write_text(
            f'[provider]\nkind = "openai"\nmodel = "bench"\nbase_url = "{llm.url}/v1"\n'
        )
        env = {"PATH": os.environ.get("PATH", ""), "HOME": home, "LANG": "C.UTF-8"}
        command = [str(PINCLAW), "agent", "-m", "hi"]
        cold_wall, cold_rss, reply = run_once(command, env)
        first = llm.requests[0]
        walls, rss = [], []
        for _ in range(options.runs):
            wall, peak, _ = run_once(command, env)
            walls.append(wall)
            rss.append(peak)
        python_wall, python_rss, _ = run_once([sys.executable, "-c", "pass"], env)

    walls.sort()
    p90 = walls[max(0, int(len(walls) * 0.9) - 1)]
    print(f"reply: {reply.strip()!r}")
    print()
    print("| measure | value |")
    print("|---|---|")
    print(f"| runs (after one cold run) | {options.runs} |")
    print(f"| wall, median | {statistics.median(walls):.3f} s |")
    print(f"| wall, p90 | {p90:.3f} s |")
    print(f"| wall, max | {max(walls):.3f} s |")
    print(f"| wall, cold first run | {cold_wall:.3f} s |")
    print(f"| peak RSS, median | {statistics.median(rss):.1f} MiB |")
    print(f"| peak RSS, max | {max(*rss, cold_rss):.1f} MiB |")
    print(f"| first model request body | {first.size} bytes |")
    print(f"| tools in the first request | {len(first.body.get('tools', []))} |")
    print(f"| system prompt | {len(first.view.system)} characters |")
    print(f"| baseline `python -c pass` | {python_wall:.3f} s, {python_rss:.1f} MiB |")


if __name__ == "__main__":
    main()
