"""Benchmark: how soon a streamed reply shows text on Telegram, against the whole reply.

Run from the repository root, with PinClaw and its test extras installed:

    python bench/stream_bench.py [--rounds 10] [--pieces 40] [--pause 0.1]

``pinclaw run`` runs as a separate process against the fake Telegram server and a
fake model that writes slowly: the reply comes in ``--pieces`` pieces, ``--pause``
seconds apart (40 x 0.1 s: about four seconds, a small model on a Pi). Each round,
a message enters the fake Telegram and the benchmark reads, from the calls the fake
recorded (one clock for everything), when the first text became visible (the first
``sendMessage`` of the answer: the draft) and when the whole reply was in place (the
last edit of it). The same is measured with ``[agent] stream = false`` and a model
that takes the same time but sends its answer at once, for the full-reply time of a
reply that is not streamed. Percentiles are nearest-rank (p90 from 10 rounds up). The
last line is ``key=value`` pairs, times in seconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchkit import final_line, percentile, shown

from channels.telegram.format import to_html
from tests.daemon_harness import DaemonProcess, telegram_run_config
from tests.fake_llm import FakeLLM, Say, Stall
from tests.fake_telegram import FakeTelegram

OWNER = 7001
REPLY = (
    "Here is what I found about the greenhouse this week.\n\n"
    "- The temperature stayed between **14 and 27 °C**; the warmest hour was 15:00.\n"
    "- Humidity rose to 81% on Tuesday night, when the vent was closed.\n"
    "- The soil sensor in bed 2 reported nothing for six hours on Thursday.\n\n"
    "To check the sensor yourself:\n\n"
    "```sh\ni2cdetect -y 1\n```\n\n"
    "If the address `0x76` is missing, reseat the cable and run `pinclaw hardware check`. "
    "I can also open the vent automatically when the humidity passes 75%: say the word "
    "and I will add a job for it."
)


def one_round(telegram: FakeTelegram, number: int) -> tuple[float, float, int]:
    """Send a message; (seconds to first visible text, seconds to the whole reply, edits)."""
    html = to_html(REPLY)
    before = len(telegram.sent(OWNER))
    calls_before = len(telegram.calls())
    sent_at = time.monotonic()
    telegram.user_sends(OWNER, FakeTelegram.user(OWNER, "Ada"), f"how was the week? ({number})")

    def answered() -> bool | None:
        sent = telegram.sent(OWNER)
        return True if len(sent) > before and sent[before].raw_text == html else None

    telegram.wait_until(answered, timeout=120)
    answer = telegram.sent(OWNER)[before].message_id
    calls = telegram.calls()[calls_before:]
    posted = next(
        c for c in calls if c.method == "sendMessage" and c.ok and c.result["message_id"] == answer
    )
    edits = [
        c
        for c in calls
        if c.method == "editMessageText" and int(c.params.get("message_id", 0)) == answer
    ]
    last = edits[-1] if edits else posted
    return posted.at - sent_at, last.at - sent_at, len(edits)


def run(
    llm: FakeLLM, home: Path, rounds: int, streamed: bool, pieces: int, pause: float
) -> list[tuple[float, float, int]]:
    """``rounds`` measured rounds (after one to warm up) against a fresh ``pinclaw run``."""
    with FakeTelegram.running() as telegram:
        config = telegram_run_config(llm, telegram, OWNER)
        config += "\n[agent]\nstream = " + ("true" if streamed else "false") + "\n"
        daemon = DaemonProcess(home, config).start()
        try:
            daemon.wait_log("telegram connected", timeout=60)
            results = []
            for number in range(rounds + 1):
                if streamed:
                    llm.queue(Say(REPLY, pieces=pieces, pause_s=pause))
                else:  # the same writing time, the answer at once at the end
                    llm.queue(Stall(pieces * pause, Say(REPLY)))
                results.append(one_round(telegram, number))
                time.sleep(1.5)  # let the chat's pacing bucket refill, as between real questions
            return results[1:]
        finally:
            daemon.terminate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--pieces", type=int, default=40, help="pieces the model writes")
    parser.add_argument("--pause", type=float, default=0.1, help="seconds between pieces")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeLLM.running() as llm:
        streamed = run(llm, Path(tmp) / "streamed", args.rounds, True, args.pieces, args.pause)
        whole = run(llm, Path(tmp) / "whole", args.rounds, False, args.pieces, args.pause)
    first = [r[0] for r in streamed]
    full = [r[1] for r in streamed]
    edits = [r[2] for r in streamed]
    unstreamed = [r[1] for r in whole]
    rows = [
        ("first visible text, streamed", first),
        ("whole reply in place, streamed", full),
        ("whole reply, not streamed", unstreamed),
    ]
    print(f"model writing time: {args.pieces} pieces x {args.pause} s; {args.rounds} rounds each")
    print("| measure | median | p90 |")
    print("|---|---|---|")
    for name, values in rows:
        median, p90 = statistics.median(values), percentile(values, 90)
        print(f"| {name} | {median:.2f} s | {shown(p90, ' s', 2, 90, len(values))} |")
    print(f"| edits per streamed reply | {statistics.median(edits):g} | {max(edits)} (max) |")
    pairs: dict[str, float | int] = {
        "rounds": args.rounds,
        "model_s": round(args.pieces * args.pause, 2),
        "first_text_median_s": statistics.median(first),
        "first_text_p90_s": percentile(first, 90),
        "full_median_s": statistics.median(full),
        "full_p90_s": percentile(full, 90),
        "unstreamed_full_median_s": statistics.median(unstreamed),
        "unstreamed_full_p90_s": percentile(unstreamed, 90),
        "edits_median": statistics.median(edits),
    }
    print(final_line(pairs))


if __name__ == "__main__":
    main()
