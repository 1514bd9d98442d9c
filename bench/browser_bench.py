"""Benchmark: the memory Chromium takes for one ``browser_open`` of a small page.

Run from the repository root, with PinClaw installed with its test extras and
Debian's chromium (``/usr/bin/chromium``, as for the tests):

    python bench/browser_bench.py [--rounds 5]

Each round starts with no browser running: ``browser_open`` of a small page
that builds its text with JavaScript (``tests/browser_site.py``'s ``/js``,
served by a process of its own on 127.0.0.1) launches Chromium the way the
tool does, through PinClaw's egress proxy, then the browser is closed. While
the call runs, Chromium's process tree (``bot/browser/processes.py``) is
sampled every 20 ms. Per round:

- ``peak RSS``: the highest resident memory of the whole tree in one sample,
  summed over its processes (a page shared by several, such as Chromium's
  code, counts once for each);
- ``hwm sum``: each process's own peak (``VmHWM``) added up, an upper bound
  that also catches a spike between two samples;
- ``peak PSS``: the highest proportional set size of the tree in one sample
  (a shared page split between the processes sharing it): what the tree
  really takes from the machine, and what ``[browser] max_memory_mib`` caps;
- ``driver``: the Playwright driver (Node.js) beside Chromium, resident.

Figures go to stdout as a Markdown table; the last line is ``key=value`` pairs,
memory in MiB (medians of the rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchkit import final_line, machine_line, median

from bot.browser import processes
from bot.browser.service import BrowserService
from bot.config import LoadedConfig, parse_config
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext
from bot.security.kit import build_security
from tests.browser_site import BrowserSite
from tools.browser import browser_tools

MIB = 1024 * 1024
SAMPLE_S = 0.02


def _status_kib(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name == key:
                return int(value.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _parent(pid: int) -> int:
    return _status_kib(pid, "PPid")


async def one_round(site: BrowserSite, folder: Path, executable: str) -> dict[str, float]:
    """One cold ``browser_open``, sampled; its figures in MiB."""
    raw = {
        "provider": {"kind": "ollama", "model": "m"},
        "security": {"allowed_hosts": ["127.0.0.1"]},
    }
    loaded = LoadedConfig(parse_config(raw, {}), folder / "c.toml", folder)
    loaded.workspace.mkdir(parents=True, exist_ok=True)
    kit = build_security(loaded)
    service = BrowserService(
        loaded.config.browser,
        executable,
        egress=lambda: kit.egress,
        check_url=kit.net.check_url,
        profiles=folder / "browser",
    )
    kit.close_with(service.aclose)
    (browser_open, _) = browser_tools(service, kit, kit.paths)
    ctx = ToolContext(SessionKey("bench", "1"), loaded.workspace, ZoneInfo("UTC"))
    peak = peak_pss = 0
    seen: dict[int, int] = {}  # pid -> its VmHWM, last read
    done = asyncio.Event()

    def sample() -> tuple[int, int, dict[int, int]]:
        pids = service.pids()
        hwm = {pid: _status_kib(pid, "VmHWM") for pid in pids}
        return processes.resident_bytes(pids), processes.proportional_bytes(pids), hwm

    async def sampler() -> None:
        nonlocal peak, peak_pss
        while not done.is_set():
            used, proportional, hwm = await asyncio.to_thread(sample)
            peak = max(peak, used)
            peak_pss = max(peak_pss, proportional)
            for pid, kib in hwm.items():
                seen[pid] = max(seen.get(pid, 0), kib)
            await asyncio.sleep(SAMPLE_S)

    task = asyncio.create_task(sampler())
    result = await browser_open.invoke(ctx, {"url": f"{site.url}/js"})
    assert result.ok and "Hello from JavaScript" in result.output, result
    pids = service.pids()
    parents = {_parent(pid) for pid in pids} - pids - {0}
    driver = max((_status_kib(pid, "VmRSS") for pid in parents), default=0) * 1024
    done.set()
    await task
    await kit.aclose()
    return {
        "peak": peak / MIB,
        "hwm_sum": sum(seen.values()) / 1024,
        "pss": peak_pss / MIB,
        "driver": driver / MIB,
        "processes": float(len(pids)),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--executable", default="/usr/bin/chromium")
    args = parser.parse_args()
    site = BrowserSite()
    rounds: list[dict[str, float]] = []
    try:
        with tempfile.TemporaryDirectory() as folder:
            for _ in range(args.rounds):
                rounds.append(await one_round(site, Path(folder), args.executable))
    finally:
        site.close()
    print(machine_line(("playwright",)))
    print()
    print("| round | processes | peak RSS (sum) | sum of VmHWM | peak PSS | driver RSS |")
    print("|---|---|---|---|---|---|")
    for n, figures in enumerate(rounds, 1):
        print(
            f"| {n} | {figures['processes']:.0f} | {figures['peak']:.1f} MiB "
            f"| {figures['hwm_sum']:.1f} MiB | {figures['pss']:.1f} MiB "
            f"| {figures['driver']:.1f} MiB |"
        )
    keys = ("peak", "hwm_sum", "pss", "driver")
    medians = {f"{key}_mib": median([r[key] for r in rounds]) for key in keys}
    print(final_line({"rounds": args.rounds, **medians}))


if __name__ == "__main__":
    asyncio.run(main())
