"""Benchmark: what the subreaper (``tools/shell_reaper.py``) adds to every shell command.

Run from the repository root, with PinClaw installed:

    python bench/shell_start.py [--rounds 5] [--runs 40]

Times ``run_command(["/bin/sh", "-c", "true"])`` from ``tools.shell_process``
end to end (started, finished, every process gone), two ways in each round,
alternating which goes first: under the supervisor, as commands run without
the sandbox, and without it (the command in a process group of its own, as
under the sandbox, where bubblewrap's PID namespace does the supervisor's
job), the floor. It also times ``python3 -I -S -c pass``, the share of the
supervisor that is the interpreter starting. Figures go to stdout as a
Markdown table; the last line is ``key=value`` pairs, times in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchkit import final_line, machine_line, median, percentile, shown

from tools.shell_process import run_command

ENV = {"PATH": "/usr/bin:/bin"}


async def one(folder: Path, supervised: bool) -> float:
    """Seconds for one command, start to every process gone."""
    started = time.perf_counter()
    outcome = await run_command(
        ["/bin/sh", "-c", "true"],
        cwd=folder,
        env=ENV,
        limit_s=30,
        max_bytes=1000,
        contained=not supervised,
    )
    assert outcome.returncode == 0, outcome.render()
    return time.perf_counter() - started


def python_start() -> float:
    """Seconds for the supervisor's interpreter to start and exit, doing nothing."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True)
    return time.perf_counter() - started


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    group: list[float] = []
    supervised: list[float] = []
    python: list[float] = []
    added: list[float] = []  # the median difference of each round
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(3):  # warm the caches
            await one(Path(folder), True)
            await one(Path(folder), False)
        for round_ in range(args.rounds):
            times: dict[bool, list[float]] = {True: [], False: []}
            order = (True, False) if round_ % 2 == 0 else (False, True)
            for _ in range(args.runs):
                for way in order:
                    times[way].append(await one(Path(folder), way))
                python.append(await asyncio.to_thread(python_start))
            group += times[False]
            supervised += times[True]
            added.append(median(times[True]) - median(times[False]))
    ms = {
        "group": [t * 1000 for t in group],
        "supervised": [t * 1000 for t in supervised],
        "python": [t * 1000 for t in python],
    }
    print(machine_line())
    print()
    print("| way | median | p90 |")
    print("|---|---|---|")
    rows = (
        ("process group only (the floor)", "group"),
        ("under the subreaper", "supervised"),
        ("`python3 -I -S -c pass`", "python"),
    )
    for label, key in rows:
        values = ms[key]
        p90 = shown(percentile(values, 90), " ms", pct=90, n=len(values))
        print(f"| {label} | {shown(median(values), ' ms')} | {p90} |")
    print(f"\nadded by the subreaper, median of the rounds: {median(added) * 1000:.1f} ms")
    figures: dict[str, float | int] = {
        "rounds": args.rounds,
        "runs": args.runs,
        "group_median_ms": median(ms["group"]),
        "supervised_median_ms": median(ms["supervised"]),
        "supervised_p90_ms": percentile(ms["supervised"], 90),
        "added_median_ms": median(added) * 1000,
        "python_start_median_ms": median(ms["python"]),
    }
    print(final_line(figures))


if __name__ == "__main__":
    asyncio.run(main())
