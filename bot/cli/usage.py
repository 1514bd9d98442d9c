"""``pinclaw usage``: model calls, tokens and cost added up per model, chat or day.

Reads the ``model_calls`` table that every answered model request adds to
(``bot.store.usage``); it works while the daemon runs (SQLite in WAL mode: open,
read, close) and creates nothing when there is no database yet. Only argparse
is imported at the top: the parser is built for every ``pinclaw`` command.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

    from bot.config import LoadedConfig
    from bot.store.usage import GroupBy, UsageTotal

Subparsers = argparse._SubParsersAction  # the type argparse gives add_subparsers

DEFAULT_SINCE = "30d"
HEADINGS = {"model": "MODEL", "chat": "CHAT", "day": "DAY"}


def add_usage_commands(
    sub: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Register ``pinclaw usage``."""
    usage = sub.add_parser(
        "usage", parents=[common], help="model calls, tokens and cost per model, chat or day"
    )
    usage.add_argument(
        "--since",
        default=DEFAULT_SINCE,
        metavar="WHEN",
        help="a duration back from now (7d, 12h), a date (2025-06-01), today or month "
        f"(default {DEFAULT_SINCE})",
    )
    usage.add_argument(
        "--by", choices=("model", "chat", "day"), default="model", help="default: model"
    )
    usage.add_argument("--json", action="store_true", help="print JSON for scripts")
    usage.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    import asyncio

    from bot.config import load_config

    return asyncio.run(run_usage(load_config(getattr(args, "config", None)), args))


async def run_usage(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    """Print the usage table (or JSON) for ``args``; return the exit code."""
    import time

    zone = loaded.timezone()
    since = parse_since(args.since, time.time(), zone)
    totals = await _read(loaded, since, args.by)
    if args.json:
        _print_json(totals, since, args.by, loaded.config.usage.currency, zone)
    elif not totals:
        print(f"No model calls since {_moment(since, zone)}.")
    else:
        print(f"Model calls since {_moment(since, zone)}, by {args.by}:")
        print()
        for line in table(totals, args.by, loaded.config.usage.currency):
            print(line)
    return 0


def parse_since(text: str, now: float, zone: ZoneInfo) -> float:
    """``--since`` as a time: "7d" back from now, a local date, "today" or "month"."""
    from datetime import date, datetime

    from bot.core.durations import ScheduleError, parse_duration
    from bot.core.errors import UsageError
    from bot.store.usage import day_start, month_start

    cleaned = text.strip().lower()
    if cleaned == "today":
        return day_start(now, zone)
    if cleaned == "month":
        return month_start(now, zone)
    if cleaned[:1].isdigit() and cleaned.count("-") == 2:
        try:
            day = date.fromisoformat(cleaned)
        except ValueError:
            raise UsageError(f"--since: {text!r} is not a date; write it like 2025-06-01") from None
        return datetime(day.year, day.month, day.day, tzinfo=zone).timestamp()
    try:
        return now - parse_duration(cleaned).total_seconds()
    except ScheduleError as exc:
        raise UsageError(f"--since: {exc} (or give a date like 2025-06-01)") from None


async def _read(loaded: LoadedConfig, since: float, by: GroupBy) -> list[UsageTotal]:
    from bot.store.db import Database
    from bot.store.usage import UsageStore

    if not loaded.database.exists():
        return []
    db = Database(loaded.database)
    await db.open()
    try:
        store = UsageStore(db, loaded.timezone())
        await store.setup()
        return await store.totals(since, by)
    finally:
        await db.close()


def table(totals: list[UsageTotal], by: GroupBy, currency: str) -> list[str]:
    """The aligned table: a heading, one line per group, a total line and any footnote."""
    from bot.store.usage import combined

    whole = combined(totals, "Total")
    rows = [_cells(t) for t in totals]
    total = _cells(whole)
    heading = [HEADINGS[by], "CALLS", "INPUT", "OUTPUT", "TOTAL", f"COST ({currency})"]
    widths = [max(len(row[i]) for row in [heading, *rows, total]) for i in range(len(heading))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    lines = [line(heading), *(line(row) for row in rows), line(total)]
    if whole.unpriced and whole.cost is not None:
        calls = f"{whole.unpriced} call{'' if whole.unpriced == 1 else 's'}"
        lines += [
            "",
            f"* {calls} of a model without a price in [usage.prices]; "
            "the cost shown leaves them out.",
        ]
    elif whole.cost is None:
        lines += ["", "No cost shown: add the models' prices to [usage.prices] in the config."]
    return lines


def _cells(total: UsageTotal) -> list[str]:
    return [
        _printable(total.key),
        f"{total.calls:,}",
        f"{total.input_tokens:,}",
        f"{total.output_tokens:,}",
        f"{total.tokens:,}",
        _cost(total),
    ]


def _cost(total: UsageTotal) -> str:
    from bot.store.usage import money

    if total.cost is None:
        return "-"
    return money(total.cost) + ("*" if total.unpriced else "")


def _print_json(
    totals: list[UsageTotal], since: float, by: GroupBy, currency: str, zone: ZoneInfo
) -> None:
    import json
    from datetime import datetime

    from bot.store.usage import combined

    document: dict[str, Any] = {
        "since": datetime.fromtimestamp(since, zone).isoformat(timespec="seconds"),
        "timezone": zone.key,
        "by": by,
        "currency": currency,
        "rows": [{by: t.key, **_numbers(t)} for t in totals],
        "total": _numbers(combined(totals, "Total")),
    }
    print(json.dumps(document, indent=2, ensure_ascii=False))


def _numbers(total: UsageTotal) -> dict[str, Any]:
    return {
        "calls": total.calls,
        "input_tokens": total.input_tokens,
        "output_tokens": total.output_tokens,
        "total_tokens": total.tokens,
        "cost": None if total.cost is None else round(total.cost, 9),
        "unpriced_calls": total.unpriced,
    }


def _moment(when: float, zone: ZoneInfo) -> str:
    from datetime import datetime

    return f"{datetime.fromtimestamp(when, zone):%Y-%m-%d %H:%M} ({zone.key})"


def _printable(text: str) -> str:
    # Chat keys come from chat platforms: no escape sequence of theirs reaches the terminal.
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )
