"""Benchmark: PinClaw's Telegram path against a bare PTB bot, throughput, and idle RSS.

Run from the repository root, with PinClaw and its test extras installed:

    python bench/channels_bench.py [--rounds 5] [--messages 40] [--chats 100] [--per-chat 3]

Everything runs on 127.0.0.1: the fake Telegram, Discord and Slack servers and
the fake model (answering at once) live in this process; the bots under test
are separate processes, each against a fresh fake Telegram (and PinClaw in a
fresh HOME). Each of ``--rounds`` rounds:

1. the floor (``bench/telegram_floor.py``: no storage, checks, pacing or
   retries) and ``pinclaw run`` with Telegram only, one after the other (the
   floor first in odd rounds, PinClaw first in even ones, so slow drift of the
   machine does not favour either). Each gets ``--warm-up`` messages not counted,
   then ``--messages`` latency samples: each from a new chat, one every ``--gap``
   seconds (ten a second: under the 30 a second that PinClaw's flood control
   allows, so pacing never delays a sample); a sample is the time from the
   message entering the fake Telegram to the reply arriving there, both taken by
   the fake on one clock. Then throughput: ``--chats`` chats each send
   ``--per-chat`` messages at once; messages answered per second from the first
   message to the reply that answers the last chat's last message (PinClaw may
   answer messages of one chat sent together in one turn). Then the bot's RSS;
2. throughput again with ``pinclaw run`` and ``[channels.telegram] pacing =
   false``: the daemon's capacity, without the flood control the real Telegram
   needs;
3. the idle RSS of ``pinclaw run`` with Telegram, Discord and Slack connected,
   read from /proc after ``--idle`` seconds of idling, and the same for its
   floor, ``bench/idle_floor.py`` (the three bare bots and an idle aiohttp.web
   server in one process).

Each round gives its own ratio (PinClaw's median over the floor's, both of that
round); ``latency_ratio`` is the median of the rounds' ratios. Latency
percentiles are nearest-rank over every sample of every round pooled; rates and
RSS are medians over the rounds. The daemons run with their default settings
(web panel included, on a free port). The last line is ``key=value`` pairs.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchkit import (
    CHANNEL_PACKAGES,
    NAN,
    final_line,
    machine_line,
    median,
    percentile,
    rss_mib,
    shown,
)

from tests.daemon_harness import DaemonProcess
from tests.fake_discord import FakeDiscord
from tests.fake_llm import FakeLLM
from tests.fake_slack import FakeSlack
from tests.fake_telegram import Call, FakeTelegram

FIRST_USER = 10_000  # throughput chats follow it
LATENCY_USER = 50_000  # each latency sample is a new chat from here on


class Replies:
    """The bot's answered sendMessage calls at one fake, by chat; each call read once."""

    def __init__(self, telegram: FakeTelegram) -> None:
        self.telegram = telegram
        self._seen = 0
        self.by_chat: dict[int, list[Call]] = defaultdict(list)

    def _scan(self) -> None:
        """Read the calls recorded since the last scan (the fake's lock is held)."""
        calls = self.telegram.journal.calls
        for call in calls[self._seen :]:
            if call.method == "sendMessage" and call.ok:
                self.by_chat[int(call.params["chat_id"])].append(call)
        self._seen = len(calls)

    def first_in(self, chat: int, timeout: float) -> Call:
        """Wait for the bot's first message in ``chat``."""

        def check() -> Call | None:
            self._scan()
            found = self.by_chat.get(chat)
            return found[0] if found else None

        return self.telegram.wait_until(check, timeout)

    def last_of(self, chats: range, last: str, timeout: float) -> float:
        """Wait until each of ``chats`` has a reply that answers its message ``last`` (the
        fake model repeats it); when the last of those arrived. PinClaw answers messages
        sent together in one turn (``merge_window_ms``), so replies are not counted."""

        def answered(chat: int) -> float | None:
            calls = self.by_chat.get(chat, [])
            return next((c.at for c in calls if str(c.params.get("text", "")).endswith(last)), None)

        def check() -> float | None:
            self._scan()
            times = [answered(chat) for chat in chats]
            return None if None in times else max(t for t in times if t is not None)

        return self.telegram.wait_until(check, timeout)


@dataclass
class Run:
    """One bot measured once."""

    latencies_ms: list[float] = field(default_factory=list)
    rate: float = NAN
    rss: float = NAN
    peak: float = NAN


@dataclass
class Round:
    """One round's figures."""

    number: int
    floor_first: bool
    floor: Run
    pinclaw: Run
    capacity: float
    idle_rss: float
    idle_peak: float
    idle_floor: float

    @property
    def ratio(self) -> float:
        """PinClaw's median latency over the floor's, this round."""
        return median(self.pinclaw.latencies_ms) / median(self.floor.latencies_ms)


def latency(replies: Replies, first: int, count: int, gap: float) -> list[float]:
    """Milliseconds from each message entering the fake to its reply arriving, one at a time."""
    telegram = replies.telegram
    results = []
    for chat in range(first, first + count):
        started = time.monotonic()
        telegram.user_sends(chat, telegram.user(chat, "Bench"), f"ping {chat}")
        results.append((replies.first_in(chat, 30).at - started) * 1000)
        time.sleep(gap)
    return results


def throughput(replies: Replies, chats: int, per_chat: int) -> float:
    """Messages answered per second when ``chats`` chats each send ``per_chat`` messages
    at once (from the first message to the reply answering each chat's last)."""
    telegram = replies.telegram
    ids = range(FIRST_USER + 1, FIRST_USER + 1 + chats)
    users = [telegram.user(chat, f"User{chat}") for chat in ids]
    started = time.monotonic()
    for number in range(per_chat):
        for user in users:
            telegram.user_sends(int(user["id"]), user, f"message {number}")
    last = replies.last_of(ids, f"message {per_chat - 1}", 180)
    return chats * per_chat / (last - started)


def drive(telegram: FakeTelegram, pid: int, args: argparse.Namespace, *, samples: int) -> Run:
    """Warm a started bot up, take ``samples`` latency samples, then its throughput and RSS."""
    telegram.wait_until(lambda: True if telegram.parked_polls else None, 60)
    replies = Replies(telegram)
    latency(replies, LATENCY_USER, args.warm_up, args.gap)  # connections, first database pages
    run = Run()
    run.latencies_ms = latency(replies, LATENCY_USER + args.warm_up, samples, args.gap)
    run.rate = throughput(replies, args.chats, args.per_chat)
    time.sleep(1)
    run.rss, run.peak = rss_mib(pid)
    return run


def free_port() -> int:
    """A TCP port nobody listens on right now (for the web panel)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def config(llm: FakeLLM, channels: str) -> str:
    """A ``pinclaw run`` config: the fake model, defaults otherwise, the panel on a free port."""
    return (
        f'[provider]\nkind = "openai"\nmodel = "bench"\nbase_url = "{llm.url}/v1"\n'
        f'[daemon]\nshutdown_grace_s = 1\n[web]\nlisten = "127.0.0.1:{free_port()}"\n{channels}'
    )


def telegram_table(telegram: FakeTelegram, users: list[str], *, pacing: bool = True) -> str:
    """The [channels.telegram] table for the fake, allowing the bench's users."""
    allowed = ", ".join(f'"{u}"' for u in users)
    return (
        f'[channels.telegram]\ntoken = "{telegram.token}"\napi_base_url = "{telegram.url}"\n'
        f"poll_timeout_s = 10\nallowed_users = [{allowed}]\n"
        + ("" if pacing else "pacing = false\n")
    )


@contextmanager
def pinclaw_on(home: Path, config_toml: str, channels: tuple[str, ...]) -> Iterator[int]:
    """``pinclaw run`` in ``home`` until the block ends; yields its pid once connected."""
    daemon = DaemonProcess(home, config_toml).start()
    try:
        for name in channels:
            daemon.wait_log(f"{name} connected", timeout=60)
        assert daemon.proc is not None
        yield daemon.proc.pid
    finally:
        daemon.terminate()


def measure_floor(llm: FakeLLM, args: argparse.Namespace) -> Run:
    """The bare PTB bot: latency, throughput, RSS."""
    script = Path(__file__).with_name("telegram_floor.py")
    with FakeTelegram.running() as telegram:
        command = [sys.executable, str(script), telegram.url, telegram.token, f"{llm.url}/v1"]
        proc = subprocess.Popen(command, stderr=subprocess.DEVNULL)
        try:
            return drive(telegram, proc.pid, args, samples=args.messages)
        finally:
            proc.terminate()
            proc.wait(30)


def measure_pinclaw(
    llm: FakeLLM, home: Path, users: list[str], args: argparse.Namespace, *, pacing: bool
) -> Run:
    """``pinclaw run`` with Telegram only: latency (when paced), throughput, RSS."""
    with FakeTelegram.running() as telegram:
        toml = config(llm, telegram_table(telegram, users, pacing=pacing))
        with pinclaw_on(home, toml, ("telegram",)) as pid:
            return drive(telegram, pid, args, samples=args.messages if pacing else 0)


def measure_idle_floor(idle_s: float) -> float:
    """RSS of ``bench/idle_floor.py``: the three bare bots connected and idle."""
    script = Path(__file__).with_name("idle_floor.py")
    with (
        FakeTelegram.running() as telegram,
        FakeDiscord.running() as discord,
        FakeSlack.running() as slack,
    ):
        command = [
            sys.executable,
            str(script),
            telegram.url,
            telegram.token,
            discord.api_base,
            discord.gateway_url,
            discord.token,
            slack.api_url,
            slack.bot_token,
            slack.app_token,
        ]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            connected = {proc.stdout.readline().strip() for _ in range(3)}
            if connected != {"connected telegram", "connected discord", "connected slack"}:
                raise RuntimeError(f"idle floor did not connect: {sorted(connected)}")
            time.sleep(idle_s)
            return rss_mib(proc.pid)[0]
        finally:
            proc.terminate()
            proc.wait(30)


def measure_idle(llm: FakeLLM, home: Path, users: list[str], idle_s: float) -> tuple[float, float]:
    """(RSS, peak RSS) of ``pinclaw run`` with all three channels connected and idle."""
    with (
        FakeTelegram.running() as telegram,
        FakeDiscord.running() as discord,
        FakeSlack.running() as slack,
    ):
        tables = (
            telegram_table(telegram, users) + f'[channels.discord]\ntoken = "{discord.token}"\n'
            f'api_base_url = "{discord.api_base}"\ngateway_url = "{discord.gateway_url}"\n'
            f'[channels.slack]\nbot_token = "{slack.bot_token}"\n'
            f'app_token = "{slack.app_token}"\napi_base_url = "{slack.api_url}"\n'
        )
        with pinclaw_on(home, config(llm, tables), ("telegram", "discord", "slack")) as pid:
            time.sleep(idle_s)
            return rss_mib(pid)


def one_round(number: int, llm: FakeLLM, tmp: Path, args: argparse.Namespace) -> Round:
    """Floor and PinClaw (in alternating order), capacity, idle RSS."""
    users = [str(FIRST_USER + n) for n in range(args.chats + 1)]
    users += [str(LATENCY_USER + n) for n in range(args.messages + args.warm_up)]
    folder = tmp / f"round{number}"
    floor_first = number % 2 == 1

    def floor() -> Run:
        return measure_floor(llm, args)

    def pinclaw() -> Run:
        return measure_pinclaw(llm, folder / "paced", users, args, pacing=True)

    llm.requests.clear()  # the fake model keeps every request; nothing here reads them
    order: list[Callable[[], Run]] = [floor, pinclaw] if floor_first else [pinclaw, floor]
    runs = [step() for step in order]
    floor_run, pinclaw_run = runs if floor_first else runs[::-1]
    capacity = measure_pinclaw(llm, folder / "unpaced", users, args, pacing=False).rate
    idle, idle_peak = measure_idle(llm, folder / "all", users, args.idle)
    idle_floor = measure_idle_floor(args.idle)
    done = Round(number, floor_first, floor_run, pinclaw_run, capacity, idle, idle_peak, idle_floor)
    print(
        f"round {number}: floor {median(floor_run.latencies_ms):.1f} ms, "
        f"PinClaw {median(pinclaw_run.latencies_ms):.1f} ms, ratio {done.ratio:.2f}, "
        f"{floor_run.rate:.0f} / {pinclaw_run.rate:.0f} / {capacity:.0f} msg/s, "
        f"idle {idle:.1f} MiB (floor {idle_floor:.1f})",
        file=sys.stderr,
        flush=True,
    )
    return done


def report(rounds: list[Round], args: argparse.Namespace) -> None:
    """The tables for bench/README.md and the final line."""
    floor_ms = [ms for r in rounds for ms in r.floor.latencies_ms]
    ours_ms = [ms for r in rounds for ms in r.pinclaw.latencies_ms]
    n = len(ours_ms)
    ratio = median([r.ratio for r in rounds])
    figures: dict[str, float | int] = {
        "latency_ratio": ratio,
        "floor_median_ms": median(floor_ms),
        "floor_p90_ms": percentile(floor_ms, 90),
        "floor_p99_ms": percentile(floor_ms, 99),
        "pinclaw_median_ms": median(ours_ms),
        "pinclaw_p90_ms": percentile(ours_ms, 90),
        "pinclaw_p99_ms": percentile(ours_ms, 99),
        "samples": n,
        "floor_rate": median([r.floor.rate for r in rounds]),
        "paced_rate": median([r.pinclaw.rate for r in rounds]),
        "capacity_rate": median([r.capacity for r in rounds]),
        "idle_rss_3ch_mib": median([r.idle_rss for r in rounds]),
        "idle_rss_3ch_floor_mib": median([r.idle_floor for r in rounds]),
        "floor_rss_mib": median([r.floor.rss for r in rounds]),
        "pinclaw_rss_mib": median([r.pinclaw.rss for r in rounds]),
        "rounds": len(rounds),
    }
    print(machine_line(CHANNEL_PACKAGES))
    print(
        f"{len(rounds)} rounds; per round and bot {args.warm_up} warm-up messages, then "
        f"{args.messages} latency samples {args.gap:g} s apart, then {args.chats} chats x "
        f"{args.per_chat} messages at once; idle RSS after {args.idle:g} s"
    )
    print()
    print("| round | first | floor median | PinClaw median | ratio | floor | PinClaw paced |")
    print("|---|---|---|---|---|---|---|")
    for r in rounds:
        print(
            f"| {r.number} | {'floor' if r.floor_first else 'PinClaw'} "
            f"| {median(r.floor.latencies_ms):.1f} ms | {median(r.pinclaw.latencies_ms):.1f} ms "
            f"| {r.ratio:.2f}x | {r.floor.rate:.1f} msg/s | {r.pinclaw.rate:.1f} msg/s |"
        )
    print()
    print(
        "| round | PinClaw, pacing off | idle RSS, 3 channels: floor | PinClaw "
        "| PinClaw's peak RSS in that run |"
    )
    print("|---|---|---|---|---|")
    for r in rounds:
        print(
            f"| {r.number} | {r.capacity:.1f} msg/s | {r.idle_floor:.1f} MiB "
            f"| {r.idle_rss:.1f} MiB | {r.idle_peak:.1f} MiB |"
        )
    print()
    print("| measure | floor (bare PTB) | PinClaw |")
    print("|---|---|---|")
    print(
        f"| latency, median ({n} samples per bot, {len(rounds)} rounds pooled) "
        f"| {median(floor_ms):.1f} ms | {median(ours_ms):.1f} ms |"
    )
    for pct in (90, 99):
        print(
            f"| latency, p{pct} (nearest rank) "
            f"| {shown(percentile(floor_ms, pct), ' ms', pct=pct, n=n)} "
            f"| {shown(percentile(ours_ms, pct), ' ms', pct=pct, n=n)} |"
        )
    print(f"| latency, max | {max(floor_ms):.1f} ms | {max(ours_ms):.1f} ms |")
    print(
        f"| **PinClaw median / floor median, median of the {len(rounds)} rounds' ratios** "
        f"| | **{ratio:.2f}x** (rounds {min(r.ratio for r in rounds):.2f}x to "
        f"{max(r.ratio for r in rounds):.2f}x) |"
    )
    print(
        f"| {args.chats} chats x {args.per_chat} messages at once, median of the rounds "
        f"| {figures['floor_rate']:.1f} msg/s | {figures['paced_rate']:.1f} msg/s paced "
        f"(default) |"
    )
    print(
        f"| the same, PinClaw with `pacing = false` (capacity) | "
        f"| {figures['capacity_rate']:.1f} msg/s |"
    )
    print(
        f"| RSS after the runs, Telegram only, median | {figures['floor_rss_mib']:.1f} MiB "
        f"| {figures['pinclaw_rss_mib']:.1f} MiB |"
    )
    print(
        f"| **idle RSS, Telegram + Discord + Slack connected, median** "
        f"| {figures['idle_rss_3ch_floor_mib']:.1f} MiB (three bare bots, bench/idle_floor.py) "
        f"| **{figures['idle_rss_3ch_mib']:.1f} MiB** |"
    )
    print(f"| peak RSS of that run, median | | {median([r.idle_peak for r in rounds]):.1f} MiB |")
    print()
    print(final_line(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--messages", type=int, default=40, help="latency samples per round")
    parser.add_argument("--warm-up", type=int, default=5, help="messages not counted, per run")
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--per-chat", type=int, default=3)
    parser.add_argument("--gap", type=float, default=0.1, help="seconds between latency samples")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds idle before idle RSS")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, FakeLLM.running() as llm:
        rounds = [one_round(number, llm, Path(tmp), args) for number in range(1, args.rounds + 1)]
    print(f"({time.monotonic() - started:.0f} s in all)", file=sys.stderr)
    report(rounds, args)


if __name__ == "__main__":
    main()
