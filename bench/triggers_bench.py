"""Benchmark: from an event to the trigger's message at Telegram, against a bare hook.

Run from the repository root, with PinClaw and its test extras installed:

    python bench/triggers_bench.py [--rounds 4] [--events 50] [--warm-up 10] [--interval 1.0]

Everything runs on 127.0.0.1. The fake Telegram server and the fake model live
in this process; two processes are measured against that one fake Telegram:

- the daemon (``bench/trigger_daemon.py``: the ``Daemon`` of ``pinclaw run``,
  default settings, in a fresh HOME) with two ``say`` triggers, no cooldown and
  ``rate_limit = "0"``: ``bench-hook`` (``on = "webhook"``, its body as the text, to
  chat 7001) and ``bench-edge`` (``on = "gpio:door"``, a mock input pin under
  ``[hardware] pin_factory = "mock"``, to chat 7002);
- the floor (``bench/trigger_floor.py``): a bare aiohttp handler that sends the
  body with python-telegram-bot's ``Bot.send_message`` (to chat 7003).

Each sample runs from the event to the ``sendMessage`` call arriving at the
fake Telegram (stamped by the fake with ``time.monotonic()``, the clock every
process on the machine shares):

- webhook and floor: taken just before this process POSTs the body
  (``webhook N`` / ``floor N``; the sample ends at the message with that text).
  The HTTP answer is read only after the message arrived, so that reading it
  does not compete with the fake Telegram for this process's GIL meanwhile;
- GPIO: taken by the daemon's process just before a thread there flips the mock
  pin (each ``edge`` line on its stdin), so no pipe is in the sample.

The three kinds take turns one event at a time (the next event waits for the
previous delivery), in an order that rotates each round, so a drift of the
machine meets all three alike. Each kind gets one event per ``--interval``
seconds at most: one message a second per chat is Telegram's pace, which
PinClaw keeps to, so pacing never delays a sample. ``--warm-up`` turns are not
counted. Each round gives its ratios (a kind's median over the floor's median,
that round); ``*_over_floor`` is the median of the rounds' ratios. Percentiles
are nearest-rank over every sample of every round. The last line is
``key=value`` pairs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchkit import NAN, final_line, machine_line, median, percentile, shown
from trigger_subjects import (
    SECRET,
    Deliveries,
    Hook,
    Subjects,
    daemon_config,
    daemon_running,
    floor_running,
    free_port,
)

from tests.fake_llm import FakeLLM
from tests.fake_telegram import FakeTelegram

PACKAGES = ("python-telegram-bot", "httpx", "aiohttp", "aiosqlite", "gpiozero")
KINDS = ("floor", "webhook", "gpio")


@dataclass
class Round:
    """One round's samples, in milliseconds, by kind."""

    number: int
    order: tuple[str, ...]
    samples: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})

    def ratio(self, kind: str) -> float:
        """The kind's median over the floor's median, this round."""
        if not self.samples[kind]:
            return NAN
        return median(self.samples[kind]) / median(self.samples["floor"])


def measure(subjects: Subjects, args: argparse.Namespace) -> list[Round]:
    """Warm up, then ``--rounds`` rounds of ``--events`` turns of every kind."""
    kinds = list(KINDS)
    spacing = args.interval / len(kinds)

    def turn(order: tuple[str, ...]) -> dict[str, float]:
        taken = {}
        for kind in order:
            taken[kind] = subjects.event(kind)
            time.sleep(spacing)
        return taken

    for _ in range(args.warm_up):
        turn(tuple(kinds))
    rounds = []
    for number in range(1, args.rounds + 1):
        shift = (number - 1) % len(kinds)
        done = Round(number, tuple(kinds[shift:] + kinds[:shift]))
        for _ in range(args.events):
            for kind, ms in turn(done.order).items():
                done.samples[kind].append(ms)
        print(
            f"round {number} ({', '.join(done.order)}): "
            + ", ".join(f"{k} {median(done.samples[k]):.1f} ms" for k in kinds),
            file=sys.stderr,
            flush=True,
        )
        rounds.append(done)
    return rounds


def report(rounds: list[Round], args: argparse.Namespace) -> None:
    """The tables for bench/README.md and the final line."""
    pooled = {k: [ms for r in rounds for ms in r.samples[k]] for k in KINDS}
    n = len(pooled["floor"])
    over = {k: median([r.ratio(k) for r in rounds]) if pooled[k] else NAN for k in KINDS}
    print(machine_line(PACKAGES))
    print(
        f"{len(rounds)} rounds of {args.events} events of each kind, taking turns one at a "
        f"time, at most one per kind every {args.interval:g} s; {args.warm_up} warm-up turns"
    )
    print()
    print("| round | order | floor median | webhook median | ratio | GPIO median | ratio |")
    print("|---|---|---|---|---|---|---|")
    for r in rounds:
        print(
            f"| {r.number} | {', '.join(r.order)} | {median(r.samples['floor']):.1f} ms "
            f"| {median(r.samples['webhook']):.1f} ms | {r.ratio('webhook'):.2f}x "
            f"| {median(r.samples['gpio']):.1f} ms | {r.ratio('gpio'):.2f}x |"
        )
    print()
    print("| measure | floor (aiohttp + PTB) | webhook trigger | GPIO trigger |")
    print("|---|---|---|---|")

    def cells(pick: Callable[[list[float]], float], pct: int | None = None) -> str:
        return " | ".join(
            shown(pick(pooled[k]) if pooled[k] else NAN, " ms", pct=pct, n=len(pooled[k]))
            for k in KINDS
        )

    def nearest_rank(pct: int) -> Callable[[list[float]], float]:
        return lambda values: percentile(values, pct)

    print(f"| median ({n} events each) | {cells(median)} |")
    for pct in (90, 99):
        print(f"| p{pct} (nearest rank) | {cells(nearest_rank(pct), pct)} |")
    print(f"| max | {cells(max)} |")
    print(
        "| **median over the floor's, median of the rounds' ratios** | "
        f"| **{over['webhook']:.2f}x** | **{shown(over['gpio'], 'x', 2)}** |"
    )
    print()
    figures: dict[str, float | int] = {
        "webhook_median_ms": median(pooled["webhook"]),
        "webhook_p99_ms": percentile(pooled["webhook"], 99),
        "gpio_median_ms": median(pooled["gpio"]),
        "gpio_p99_ms": percentile(pooled["gpio"], 99),
        "floor_median_ms": median(pooled["floor"]),
        "floor_p99_ms": percentile(pooled["floor"], 99),
        "webhook_over_floor": over["webhook"],
        "gpio_over_floor": over["gpio"],
        "events": n,
        "rounds": len(rounds),
    }
    print(final_line(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--events", type=int, default=50, help="events of each kind per round")
    parser.add_argument("--warm-up", type=int, default=10, help="turns not counted")
    parser.add_argument(
        "--interval", type=float, default=1.0, help="least seconds between two events of a kind"
    )
    args = parser.parse_args()
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeLLM.running() as llm,
        FakeTelegram.running() as telegram,
    ):
        port = free_port()
        config = daemon_config(llm, telegram, port)
        with (
            daemon_running(Path(tmp), config) as daemon,
            floor_running(telegram) as floor_port,
        ):
            assert daemon.stdin is not None and daemon.stdout is not None
            hooks = {
                "webhook": Hook(port, "/hooks/bench-hook", {"Authorization": f"Bearer {SECRET}"}),
                "floor": Hook(floor_port, "/hook", {}),
            }
            subjects = Subjects(
                Deliveries(telegram),
                hooks,
                daemon.stdin,
                daemon.stdout,
            )
            rounds = measure(subjects, args)
    print(f"({time.monotonic() - started:.0f} s in all)", file=sys.stderr)
    report(rounds, args)


if __name__ == "__main__":
    main()
