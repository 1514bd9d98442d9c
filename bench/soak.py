"""Benchmark: memory of ``pinclaw run`` over a long soak at one message a second.

Run from the repository root, with PinClaw and its test extras installed:

    python bench/soak.py [--minutes 360] [--rate 1] [--chats 20] [--channels telegram|all]

The full soak is six hours (the target: RSS growth at most 5 %); ``--minutes 10``
is the shortened variant. ``pinclaw run`` runs as its own process with its
default settings (web panel on a free port) against the fake Telegram server
(``--channels all``: the fake Discord and Slack servers too) and the fake model,
all in this process. A message goes out every ``1 / --rate`` seconds to the next
of a rotating set of chats: ``--chats`` Telegram private chats (with ``all``,
also a Discord DM and a Slack DM in the rotation); every tenth asks for the time
and every tenth, five later, for some arithmetic, so tool turns (two model calls
each) are in the mix. Every ``--sample-s`` seconds the daemon's RSS is read from
/proc/PID/status (VmRSS).

Growth is measured from the end of a warm-up (``--warm-up-min``, default a tenth
of the run but at least a minute: caches, the database and the allocator's
arenas settle): ``rss_growth_pct`` = (RSS at the end - RSS at the first sample
after the warm-up) / that RSS, and ``slope_mib_per_h`` is the least-squares
slope of the samples after the warm-up, in MiB an hour. At the end it waits for
every reply and checks that each message got exactly one (exit status 1 if
not). ``--csv FILE`` writes every sample. The last line is ``key=value`` pairs.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import re
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchkit import NAN, final_line, machine_line, rss_mib

from tests.daemon_harness import DaemonProcess
from tests.fake_discord import FakeDiscord
from tests.fake_llm import FakeLLM
from tests.fake_slack import ALICE, ALICE_DM, FakeSlack
from tests.fake_telegram import FakeTelegram

FIRST_CHAT = 70_000  # the soak's Telegram chats (private: chat id = user id)
KEEP_LOG_LINES = 2000  # the daemon's log kept in this process (warnings are counted first)


@dataclass
class Sample:
    """One reading: seconds since the first message, RSS, messages sent and answered."""

    at_s: float
    rss_mib: float
    sent: int
    replied: int


@dataclass
class Target:
    """One chat of the rotation: how to send into it, how many replies it holds."""

    name: str
    send: Callable[[str], object]
    replies: Callable[[], int]
    sent: int = 0


class TelegramReplies:
    """The bot's answered sendMessage calls per chat, read once each from the fake's call
    log, which is trimmed as it is read so a six-hour soak does not fill this process."""

    def __init__(self, telegram: FakeTelegram) -> None:
        self.telegram = telegram
        self.by_chat: dict[int, int] = {}

    def count(self, chat: int) -> int:
        """Replies in ``chat`` so far."""
        with self.telegram.lock:
            calls = self.telegram.journal.calls
            for call in calls:
                if call.method == "sendMessage" and call.ok:
                    key = int(call.params["chat_id"])
                    self.by_chat[key] = self.by_chat.get(key, 0) + 1
            calls.clear()
        return self.by_chat.get(chat, 0)


@dataclass
class Log:
    """The daemon's log lines: warnings and errors counted, the rest let go."""

    daemon: DaemonProcess
    warnings: int = 0
    errors: int = 0
    kinds: dict[str, tuple[int, str]] = field(default_factory=dict)  # count, an example
    _read: int = 0

    def scan(self) -> None:
        """Count the new lines, then drop old ones."""
        lines = self.daemon.lines
        for line in lines[self._read :]:
            if " WARNING " in line or " ERROR " in line or " CRITICAL " in line:
                if " WARNING " in line:
                    self.warnings += 1
                else:
                    self.errors += 1
                kind = kind_of(line)
                count, example = self.kinds.get(kind, (0, line.rstrip()))
                self.kinds[kind] = (count + 1, example)
        self._read = len(lines)
        if len(lines) > KEEP_LOG_LINES:
            drop = len(lines) - KEEP_LOG_LINES // 2
            del lines[:drop]
            self._read -= drop


def kind_of(line: str) -> str:
    """A log line without its time and numbers: lines that differ only there are one kind."""
    return re.sub(r"\d+(\.\d+)?", "N", line.split(" ", 2)[-1])[:120]


def free_port() -> int:
    """A TCP port nobody listens on right now (for the web panel)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def slope_per_hour(samples: list[Sample]) -> float:
    """Least-squares slope of RSS over time, MiB an hour (nan from fewer than 2 samples)."""
    if len(samples) < 2:
        return NAN
    mean_t = sum(s.at_s for s in samples) / len(samples)
    mean_r = sum(s.rss_mib for s in samples) / len(samples)
    spread = sum((s.at_s - mean_t) ** 2 for s in samples)
    if spread == 0:
        return NAN
    covariance = sum((s.at_s - mean_t) * (s.rss_mib - mean_r) for s in samples)
    return covariance / spread * 3600


def question(number: int) -> str:
    """The soak's message number ``number``: mostly chat, some tool turns."""
    if number % 10 == 0:
        return f"what time is it? ({number})"
    if number % 10 == 5:
        return f"what is {number} * 7? please"
    return f"soak message {number}: how is the greenhouse doing today?"


def telegram_targets(telegram: FakeTelegram, chats: list[int]) -> list[Target]:
    """One private chat each, answered replies counted from the fake's call log."""
    replies = TelegramReplies(telegram)

    def target(chat: int) -> Target:
        def send(text: str) -> object:
            return telegram.user_sends(chat, telegram.user(chat), text)

        return Target(f"telegram:{chat}", send, lambda: replies.count(chat))

    return [target(chat) for chat in chats]


@contextlib.contextmanager
def fakes_and_daemon(
    llm: FakeLLM, home: Path, args: argparse.Namespace
) -> Iterator[tuple[DaemonProcess, list[Target]]]:
    """The fakes and ``pinclaw run`` against them; the rotation of chats."""
    with ExitStack() as stack:
        telegram = stack.enter_context(FakeTelegram.running())
        chats = [FIRST_CHAT + n for n in range(args.chats)]
        allowed = ", ".join(f'"{c}"' for c in chats)
        tables = (
            f'[channels.telegram]\ntoken = "{telegram.token}"\n'
            f'api_base_url = "{telegram.url}"\nallowed_users = [{allowed}]\n'
        )
        targets = telegram_targets(telegram, chats)
        if args.channels == "all":
            discord = stack.enter_context(FakeDiscord.running())
            slack = stack.enter_context(FakeSlack.running())
            owner = discord.owner
            tables += (
                f'[channels.discord]\ntoken = "{discord.token}"\n'
                f'api_base_url = "{discord.api_base}"\ngateway_url = "{discord.gateway_url}"\n'
                f'allowed_users = ["{owner["id"]}"]\n'
                f'[channels.slack]\nbot_token = "{slack.bot_token}"\n'
                f'app_token = "{slack.app_token}"\napi_base_url = "{slack.api_url}"\n'
                f'allowed_users = ["{ALICE}"]\n'
            )
            dm = str(discord.dm_channel(owner)["id"])
            targets.append(
                Target(
                    "discord:dm",
                    lambda text: discord.user_sends(dm, owner, text),
                    lambda: len(discord.sent(dm)),
                )
            )
            targets.append(
                Target(
                    "slack:dm",
                    lambda text: slack.user_sends(ALICE_DM, ALICE, text),
                    lambda: len(slack.sent(ALICE_DM)),
                )
            )
        config = (
            f'[provider]\nkind = "openai"\nmodel = "soak"\nbase_url = "{llm.url}/v1"\n'
            f'[daemon]\nshutdown_grace_s = 1\n[web]\nlisten = "127.0.0.1:{free_port()}"\n' + tables
        )
        daemon = DaemonProcess(home, config).start()
        try:
            for name in ("telegram", "discord", "slack")[: 3 if args.channels == "all" else 1]:
                daemon.wait_log(f"{name} connected", timeout=60)
            yield daemon, targets
        finally:
            daemon.terminate()


def replied(targets: list[Target]) -> int:
    """Replies counted over every chat of the rotation."""
    return sum(target.replies() for target in targets)


def soak(
    llm: FakeLLM, daemon: DaemonProcess, targets: list[Target], args: argparse.Namespace
) -> tuple[list[Sample], Log, int]:
    """Send for ``--minutes``, sampling; wait for the last replies; (samples, log, messages)."""
    assert daemon.proc is not None
    pid = daemon.proc.pid
    log = Log(daemon)
    total = int(args.minutes * 60 * args.rate)
    samples: list[Sample] = []
    started = time.monotonic()
    next_sample = 0.0
    for number in range(total):
        due = started + number / args.rate
        while (now := time.monotonic()) < due or now - started >= next_sample:
            if now - started >= next_sample:
                if daemon.proc.poll() is not None:
                    raise SystemExit("pinclaw run exited:\n" + daemon.log()[-4000:])
                sent = sum(t.sent for t in targets)
                samples.append(Sample(now - started, rss_mib(pid)[0], sent, replied(targets)))
                llm.requests.clear()  # the fake keeps every request; nothing here reads them
                log.scan()
                next_sample += args.sample_s
                if len(samples) % max(1, int(60 / args.sample_s)) == 0:
                    last = samples[-1]
                    print(
                        f"{last.at_s / 60:5.1f} min: RSS {last.rss_mib:.1f} MiB, "
                        f"{last.sent} sent, {last.replied} answered",
                        file=sys.stderr,
                        flush=True,
                    )
            else:
                time.sleep(min(due - now, 0.05))
        target = targets[number % len(targets)]
        target.send(question(number))
        target.sent += 1
    deadline = time.monotonic() + 120
    while replied(targets) < total and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(1)  # anything more (a second reply) would show now
    samples.append(Sample(time.monotonic() - started, rss_mib(pid)[0], total, replied(targets)))
    log.scan()
    return samples, log, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=360.0, help="how long to send")
    parser.add_argument("--rate", type=float, default=1.0, help="messages a second")
    parser.add_argument("--chats", type=int, default=20, help="Telegram chats in the rotation")
    parser.add_argument("--channels", choices=("telegram", "all"), default="telegram")
    parser.add_argument("--sample-s", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--warm-up-min", type=float, help="default: a tenth of the run, >= 1")
    parser.add_argument("--csv", type=Path, help="write every sample to this file")
    args = parser.parse_args()
    warm_up_s = 60 * (
        args.warm_up_min if args.warm_up_min is not None else max(1.0, args.minutes / 10)
    )
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeLLM.running() as llm,
        fakes_and_daemon(llm, Path(tmp) / "home", args) as (daemon, targets),
    ):
        samples, log, total = soak(llm, daemon, targets, args)
        per_target = [(t.name, t.sent, t.replies()) for t in targets]
    if args.csv:
        write_csv(args.csv, samples)
    wrong = report(samples, log, total, per_target, args, warm_up_s)
    if wrong:
        raise SystemExit(1)


def write_csv(path: Path, samples: list[Sample]) -> None:
    """Every sample, one a row."""
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["seconds", "rss_mib", "sent", "replied"])
        for s in samples:
            writer.writerow([f"{s.at_s:.1f}", f"{s.rss_mib:.2f}", s.sent, s.replied])


def report(
    samples: list[Sample],
    log: Log,
    total: int,
    per_target: list[tuple[str, int, int]],
    args: argparse.Namespace,
    warm_up_s: float,
) -> bool:
    """The table and the final line; True if some chat did not get one reply a message."""
    settled = [s for s in samples if s.at_s >= warm_up_s]
    start = settled[0] if settled else samples[-1]
    end = samples[-1]
    answered = sum(got for _, _, got in per_target)
    wrong = [(name, sent, got) for name, sent, got in per_target if sent != got]
    growth = (end.rss_mib - start.rss_mib) / start.rss_mib * 100
    figures: dict[str, float | int] = {
        "soak_minutes": args.minutes,
        "messages": total,
        "replies": answered,
        "rss_first_mib": samples[0].rss_mib,
        "rss_start_mib": start.rss_mib,
        "rss_end_mib": end.rss_mib,
        "rss_max_mib": max(s.rss_mib for s in samples),
        "rss_growth_pct": growth,
        "slope_mib_per_h": slope_per_hour(settled),
        "warm_up_min": warm_up_s / 60,
        "backlog_max": max(s.sent - s.replied for s in samples),
        "warnings": log.warnings,
        "errors": log.errors,
    }
    print(machine_line(("python-telegram-bot", "discord.py", "slack-bolt", "httpx", "pydantic")))
    print(
        f"{total} messages over {args.minutes:g} min ({args.rate:g} a second) to "
        f"{len(per_target)} chats ({args.channels}); RSS every {args.sample_s:g} s; "
        f"warm-up {warm_up_s / 60:g} min"
    )
    print()
    print("| measure | value |")
    print("|---|---|")
    print(f"| messages sent / answered | {total} / {answered} |")
    print(
        f"| RSS at the first sample (connected, nothing answered yet) | "
        f"{samples[0].rss_mib:.1f} MiB |"
    )
    print(f"| RSS after the warm-up ({start.at_s / 60:.1f} min) | {start.rss_mib:.1f} MiB |")
    print(f"| RSS at the end ({end.at_s / 60:.1f} min) | {end.rss_mib:.1f} MiB |")
    print(f"| highest RSS sampled | {figures['rss_max_mib']:.1f} MiB |")
    print(f"| **growth after the warm-up** | **{growth:+.1f} %** |")
    print(
        f"| slope after the warm-up (least squares, {len(settled)} samples) | "
        f"{figures['slope_mib_per_h']:+.2f} MiB/h |"
    )
    print(f"| most messages waiting for their reply at a sample | {figures['backlog_max']} |")
    print(f"| warnings / errors logged | {log.warnings} / {log.errors} |")
    for count, example in sorted(log.kinds.values(), reverse=True):
        print(f"log, {count} like: {example}", file=sys.stderr)
    for name, sent, got in wrong:
        print(f"{name}: {sent} sent, {got} replies", file=sys.stderr)
    print()
    print(final_line(figures))
    return bool(wrong)


if __name__ == "__main__":
    main()
