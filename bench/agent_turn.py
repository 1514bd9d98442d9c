"""Benchmark: wall time and peak RSS of ``pinclaw agent -m hi`` against a local fake model.

Run from the repository root, with PinClaw and its test extras installed:

    python bench/agent_turn.py [--rounds 5] [--runs 20] [--floor-runs 3]

It starts the fake LLM server (tests/fake_llm) on 127.0.0.1 and runs the real
``pinclaw`` console script as a new user would. Each of ``--rounds`` rounds
writes a config in a fresh throw-away HOME, times ``python -c pass``
``--floor-runs`` times (Python's own start-up, measured in the same run), runs
``pinclaw agent -m hi`` once first (creating the database and workspace;
reported apart) and then ``--runs`` more times, each followed by one run of the
floor, ``bench/agent_floor.py`` (the same config, a SQLite file and one model
request with PinClaw's libraries and nothing else), so both meet the same
moment of the machine. Each child's peak RSS
comes from ``os.wait4``. Wall percentiles are nearest-rank over every counted
run of every round (p99 only from 100 runs up); peak RSS and the floor are
medians. It also reports the size of the first model request with the default
tool set. Figures go to stdout as a Markdown table; the last line is
``key=value`` pairs, times in seconds.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchkit import final_line, machine_line, median, percentile, shown

from tests.fake_llm import FakeLLM, Recorded

PINCLAW = Path(sys.executable).parent / "pinclaw"
AGENT_FLOOR = Path(__file__).with_name("agent_floor.py")
PACKAGES = ("httpx", "pydantic", "aiosqlite")


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


@dataclass
class Samples:
    """Every run's wall time (s) and peak RSS (MiB), by kind."""

    walls: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    first_walls: list[float] = field(default_factory=list)
    first_rss: list[float] = field(default_factory=list)
    floor_walls: list[float] = field(default_factory=list)
    floor_rss: list[float] = field(default_factory=list)
    agent_floor_walls: list[float] = field(default_factory=list)
    agent_floor_rss: list[float] = field(default_factory=list)
    reply: str = ""


def one_round(llm: FakeLLM, options: argparse.Namespace, samples: Samples) -> None:
    """A fresh HOME: the floor, a first run, then the counted runs."""
    command = [str(PINCLAW), "agent", "-m", "hi"]
    with tempfile.TemporaryDirectory() as home:
        floor = [sys.executable, str(AGENT_FLOOR), f"{home}/.pinclaw/config.toml"]
        floor += [f"{home}/floor.sqlite3", "hi"]
        config = Path(home) / ".pinclaw" / "config.toml"
        config.parent.mkdir()
        config.write_text(
            f'[provider]\nkind = "openai"\nmodel = "bench"\nbase_url = "{llm.url}/v1"\n'
        )
        env = {"PATH": os.environ.get("PATH", ""), "HOME": home, "LANG": "C.UTF-8"}
        if "PYTHONPATH" in os.environ:  # another tree measured with this one (side by side)
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        for _ in range(options.floor_runs):
            wall, peak, _ = run_once([sys.executable, "-c", "pass"], env)
            samples.floor_walls.append(wall)
            samples.floor_rss.append(peak)
        wall, peak, samples.reply = run_once(command, env)  # creates the database
        samples.first_walls.append(wall)
        samples.first_rss.append(peak)
        run_once(floor, env)  # creates its database
        for _ in range(options.runs):
            wall, peak, _ = run_once(command, env)
            samples.walls.append(wall)
            samples.rss.append(peak)
            wall, peak, _ = run_once(floor, env)
            samples.agent_floor_walls.append(wall)
            samples.agent_floor_rss.append(peak)


def report(samples: Samples, first: Recorded, options: argparse.Namespace) -> None:
    """The table for bench/README.md and the final line."""
    walls, n = samples.walls, len(samples.walls)
    figures: dict[str, float | int] = {
        "agent_wall_median_s": median(walls),
        "agent_wall_p90_s": percentile(walls, 90),
        "agent_wall_p99_s": percentile(walls, 99),
        "agent_peak_rss_mib": median(samples.rss),
        "agent_first_run_s": median(samples.first_walls),
        "agent_floor_median_s": median(samples.agent_floor_walls),
        "agent_floor_rss_mib": median(samples.agent_floor_rss),
        "agent_over_floor": median(walls) / median(samples.agent_floor_walls),
        "python_floor_s": median(samples.floor_walls),
        "python_floor_rss_mib": median(samples.floor_rss),
        "request_bytes": first.size,
        "tools": len(first.body.get("tools", [])),
        "runs": n,
    }
    print(f"reply: {samples.reply.strip()!r}")
    print()
    print(machine_line(PACKAGES))
    print()
    print("| measure | value |")
    print("|---|---|")
    print(f"| runs ({options.rounds} rounds of {options.runs}, each after a first run) | {n} |")
    print(f"| wall, median | {median(walls):.3f} s |")
    print(f"| wall, p90 (nearest rank) | {shown(percentile(walls, 90), ' s', 3, 90, n)} |")
    print(f"| wall, p99 (nearest rank) | {shown(percentile(walls, 99), ' s', 3, 99, n)} |")
    print(f"| wall, max | {max(walls):.3f} s |")
    print(
        f"| wall, first run in a fresh HOME (creates the database), median of "
        f"{len(samples.first_walls)} | {median(samples.first_walls):.3f} s |"
    )
    print(f"| peak RSS, median | {median(samples.rss):.1f} MiB |")
    print(f"| peak RSS, max | {max(*samples.rss, *samples.first_rss):.1f} MiB |")
    print(f"| first model request body | {first.size} bytes |")
    print(f"| tools in the first request | {len(first.body.get('tools', []))} |")
    print(f"| system prompt | {len(first.view.system)} characters |")
    print(
        f"| floor: `python -c pass`, median of {len(samples.floor_walls)} | "
        f"{median(samples.floor_walls):.3f} s, {median(samples.floor_rss):.1f} MiB |"
    )
    floor_walls = samples.agent_floor_walls
    print(
        f"| floor: `bench/agent_floor.py` (config, SQLite, one model request), median of "
        f"{len(floor_walls)} | {median(floor_walls):.3f} s, "
        f"{median(samples.agent_floor_rss):.1f} MiB |"
    )
    print(f"| **PinClaw median / agent floor median** | **{figures['agent_over_floor']:.2f}x** |")
    print()
    print(final_line(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20, help="counted runs per round")
    parser.add_argument("--floor-runs", type=int, default=3, help="`python -c pass` per round")
    options = parser.parse_args()
    if not PINCLAW.exists():
        raise SystemExit(f"{PINCLAW} not found: install PinClaw into this environment first")
    samples = Samples()
    with FakeLLM.running() as llm:
        for number in range(1, options.rounds + 1):
            one_round(llm, options, samples)
            print(
                f"round {number}: median {median(samples.walls[-options.runs :]):.3f} s, "
                f"agent floor {median(samples.agent_floor_walls[-options.runs :]):.3f} s, "
                f"python -c pass {median(samples.floor_walls[-options.floor_runs :]):.3f} s",
                file=sys.stderr,
                flush=True,
            )
        first = llm.requests[0]
    report(samples, first, options)


if __name__ == "__main__":
    main()
