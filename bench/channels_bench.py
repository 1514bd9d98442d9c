"""Benchmark: PinClaw's Telegram path against a minimal PTB bot, and the daemon's idle RSS.

Run from the repository root, with PinClaw and its test extras installed:

    python bench/channels_bench.py [--messages 60] [--chats 100] [--per-chat 3]

Everything runs on 127.0.0.1: the fake Telegram, Discord and Slack servers and
the fake model (answering at once) live in this process; the bots under test
are separate processes. Measured:

1. latency: ``--messages`` messages, each from a new chat, one every
   ``--gap`` seconds (default 0.1 s: ten a second, under Telegram's 30 a second
   that PinClaw's flood control enforces; back-to-back replies beyond that are
   paced on purpose); for each, the time from the message entering the fake
   Telegram server to the reply arriving there (both timestamps taken by the
   fake, on one clock);
2. throughput: ``--chats`` chats each send ``--per-chat`` messages at once;
   replies per second from the first message to the last reply;
3. idle RSS of ``pinclaw run`` with Telegram, Discord and Slack connected (and
   of the floor bot for reference), read from /proc after 5 s of idling.

The floor is ``bench/telegram_floor.py``: no storage, checks, pacing or retries.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.daemon_harness import DaemonProcess
from tests.fake_discord import FakeDiscord
from tests.fake_llm import FakeLLM
from tests.fake_slack import FakeSlack
from tests.fake_telegram import Call, FakeTelegram

FIRST_USER = 10_000  # throughput chats follow it
LATENCY_USER = 50_000  # each latency sample is a new chat from here on


def rss_mib(pid: int) -> tuple[float, float]:
    """(current RSS, peak RSS) of a process, in MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def latency(telegram: FakeTelegram, first: int, count: int, gap: float) -> list[float]:
    """Seconds from each message entering the fake to its reply arriving, one at a time."""
    results = []
    for chat in range(first, first + count):
        started = time.monotonic()
        telegram.user_sends(chat, telegram.user(chat, "Bench"), f"ping {chat}")
        call = telegram.wait_for("sendMessage", _to_chat(chat), 30)
        results.append(call.at - started)
        time.sleep(gap)
    return results


def _to_chat(chat: int) -> Callable[[Call], bool]:
    return lambda call: bool(call.params["chat_id"] == chat)


def throughput(telegram: FakeTelegram, chats: int, per_chat: int) -> float:
    """Replies per second when ``chats`` chats each send ``per_chat`` messages at once."""
    users = [telegram.user(FIRST_USER + 1 + n, f"User{n}") for n in range(chats)]
    started = time.monotonic()
    for round_ in range(per_chat):
        for user in users:
            telegram.user_sends(int(user["id"]), user, f"message {round_}")
    last = started
    for _ in range(chats * per_chat):
        last = telegram.wait_for(
            "sendMessage", lambda c: FIRST_USER < int(c.params["chat_id"]) < LATENCY_USER, 120
        ).at
    return chats * per_chat / (last - started)


def wait_polling(telegram: FakeTelegram) -> None:
    """Wait until a bot has a long poll parked at the fake."""
    telegram.wait_until(lambda: True if telegram.parked_polls else None, 30)


def measure(
    name: str,
    telegram: FakeTelegram,
    start: Callable[[], int],
    stop: Callable[[], None],
    args: argparse.Namespace,
) -> dict[str, float]:
    """Start a bot, measure it, stop it."""
    pid = start()
    wait_polling(telegram)
    latency(telegram, LATENCY_USER, 5, args.gap)  # warm-up: connections, first database pages
    times = sorted(latency(telegram, LATENCY_USER + 5, args.messages, args.gap))
    rate = throughput(telegram, args.chats, args.per_chat)
    time.sleep(2)
    rss, peak = rss_mib(pid)
    stop()
    print(f"{name}: median {statistics.median(times) * 1000:.1f} ms", file=sys.stderr)
    return {
        "median_ms": statistics.median(times) * 1000,
        "p90_ms": times[int(len(times) * 0.9) - 1] * 1000,
        "rate": rate,
        "rss": rss,
        "peak": peak,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=60)
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--per-chat", type=int, default=3)
    parser.add_argument("--gap", type=float, default=0.1, help="seconds between latency samples")
    args = parser.parse_args()
    users = [str(FIRST_USER + n) for n in range(args.chats + 1)]
    users += [str(LATENCY_USER + n) for n in range(args.messages + 5)]
    with tempfile.TemporaryDirectory() as tmp, FakeLLM.running() as llm:
        with FakeTelegram.running() as telegram:
            floor_proc: list[subprocess.Popen[bytes]] = []

            def start_floor() -> int:
                script = Path(__file__).with_name("telegram_floor.py")
                command = [sys.executable, str(script), telegram.url, telegram.token]
                proc = subprocess.Popen([*command, f"{llm.url}/v1"], stderr=subprocess.DEVNULL)
                floor_proc.append(proc)
                return proc.pid

            def stop_floor() -> None:
                floor_proc[0].terminate()
                floor_proc[0].wait(30)

            floor = measure("floor", telegram, start_floor, stop_floor, args)

        with FakeTelegram.running() as telegram:
            home = Path(tmp) / "telegram"
            config = _config(llm, telegram_table(telegram, users))
            pinclaw = DaemonProcess(home, config)

            def start_pinclaw() -> int:
                pinclaw.start()
                pinclaw.wait_log("telegram connected")
                assert pinclaw.proc is not None
                return pinclaw.proc.pid

            ours = measure("pinclaw", telegram, start_pinclaw, lambda: None, args)
            pinclaw.terminate()

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
            everything = DaemonProcess(Path(tmp) / "all", _config(llm, tables)).start()
            for name in ("telegram", "discord", "slack"):
                everything.wait_log(f"{name} connected", timeout=60)
            time.sleep(5)
            assert everything.proc is not None
            idle, idle_peak = rss_mib(everything.proc.pid)
            everything.terminate()

    ratio = ours["median_ms"] / floor["median_ms"]
    print("| measure | floor (bare PTB) | PinClaw |")
    print("|---|---|---|")
    print(f"| latency, median | {floor['median_ms']:.1f} ms | {ours['median_ms']:.1f} ms |")
    print(f"| latency, p90 | {floor['p90_ms']:.1f} ms | {ours['p90_ms']:.1f} ms |")
    print(f"| PinClaw median / floor median | | {ratio:.2f}x |")
    print(
        f"| {args.chats} chats x {args.per_chat} messages at once | "
        f"{floor['rate']:.1f} msg/s | {ours['rate']:.1f} msg/s |"
    )
    print(
        f"| RSS after the runs (Telegram only) | {floor['rss']:.1f} MiB | {ours['rss']:.1f} MiB |"
    )
    print(f"| idle RSS, Telegram + Discord + Slack connected | | {idle:.1f} MiB |")
    print(f"| peak RSS of that run | | {idle_peak:.1f} MiB |")


def telegram_table(telegram: FakeTelegram, users: list[str]) -> str:
    """The [channels.telegram] table for the fake, allowing the bench's users."""
    allowed = ", ".join(f'"{u}"' for u in users)
    return (
        f'[channels.telegram]\ntoken = "{telegram.token}"\napi_base_url = "{telegram.url}"\n'
        f"poll_timeout_s = 10\nallowed_users = [{allowed}]\n"
    )


def _config(llm: FakeLLM, channels: str) -> str:
    return (
        f'[provider]\nkind = "openai"\nmodel = "bench"\nbase_url = "{llm.url}/v1"\n'
        f"[daemon]\nshutdown_grace_s = 1\n{channels}"
    )


if __name__ == "__main__":
    main()
