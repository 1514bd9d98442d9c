"""``pinclaw doctor``: is everything in place for PinClaw to work? One line per check.

It names the installed version, and checks the config, the data folder and
the database (SQLite's integrity check), each model provider (one tiny
request, timed), each enabled chat channel's credentials (without starting
the channel), the GPIO pin library and chip (when pins are configured), each
trigger (and Home Assistant's WebSocket API when one follows an entity), the
browser tools' Chromium, the shell sandbox, the systemd service, the clock and
time zone, free disk space, and whether a daemon answers at ``[web] listen``.
Each line starts with ✓ (passed), ✗ (failed), ! (works, but worth fixing) or
– (for information), and ends with the fix after "—"; where the terminal
cannot show those, OK / FAIL / WARN / -- instead. The exit code is 1 when any
check failed, else 0; with a config that cannot be used, only the checks that
need none run (version, service, clock). ``--json`` prints the same findings for scripts.

The checks live in ``files`` (config, data folder, database, disk), ``remote``
(providers, channels, the daemon's endpoint), ``host`` (sandbox, service,
clock), ``gpio``, ``triggers`` and ``browser``; ``findings`` runs them
concurrently, each within its time limit. Only the standard library is imported here: the parser
is built for every command.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from bot.cli.doctor.findings import Finding, Probe
    from bot.config import LoadedConfig

DATABASE_TIMEOUT_S = 120.0  # a full integrity check of a large database on an SD card
SANDBOX_TIMEOUT_S = 30.0  # two bubblewrap probes of up to 10 s each
MARGIN_S = 5.0  # beyond the checks' own network time limits, which say more
MARKS = {"ok": "✓", "fail": "✗", "warn": "!", "info": "–"}
PLAIN_MARKS = {"ok": "OK  ", "fail": "FAIL", "warn": "WARN", "info": "--  "}

Subparsers = argparse._SubParsersAction  # the type argparse gives add_subparsers


def add_doctor_commands(
    sub: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Register ``pinclaw doctor``."""
    doctor = sub.add_parser(
        "doctor",
        parents=[common],
        help="check the config, model, channels and machine; say how to fix what fails",
        description="Check everything PinClaw needs, one line each with the fix; "
        "exit code 1 when any check fails.",
    )
    doctor.add_argument("--json", action="store_true", help="the findings as JSON, for scripts")
    doctor.set_defaults(handler=run_doctor)


def run_doctor(args: argparse.Namespace) -> int:
    """Run ``pinclaw doctor``; the exit code."""
    return asyncio.run(doctor(getattr(args, "config", None), as_json=args.json))


async def doctor(explicit: str | None, *, as_json: bool = False, out: TextIO | None = None) -> int:
    """Run every check, print the report (or JSON) to ``out``; 1 if any check failed."""
    from bot.cli.doctor.files import load
    from bot.cli.doctor.findings import run_probes

    stream = out or sys.stdout
    marks, dash = _marks(stream)
    loaded, first = await asyncio.to_thread(load, explicit)
    findings = [first]
    if not as_json:
        print(_line(first, marks, dash), file=stream, flush=True)
    async for finding in run_probes(_probes(loaded) if loaded else _host_probes()):
        findings.append(finding)
        if not as_json:
            print(_line(finding, marks, dash), file=stream, flush=True)
    failed = sum(f.status == "fail" for f in findings)
    if as_json:
        print(json.dumps(_report(findings), indent=2), file=stream)
    else:
        print(_summary(findings, skipped=loaded is None), file=stream)
    return 1 if failed else 0


def _probes(loaded: LoadedConfig) -> list[Probe]:
    """Every check for a usable config, in report order."""
    from functools import partial

    from bot.cli.doctor import files, host, remote
    from bot.cli.doctor.findings import Probe, in_thread
    from bot.cli.doctor.gpio import gpio
    from bot.cli.mcp import doctor_probe as mcp_probe

    config = loaded.config
    probes = [
        Probe("version", _version),
        Probe("data_dir", lambda: in_thread(partial(files.data_folder, loaded))),
        Probe(
            "database",
            lambda: in_thread(partial(files.database, loaded.database)),
            DATABASE_TIMEOUT_S,
            "`pinclaw db check` runs the same check without a time limit",
        ),
    ]
    probes += [
        Probe(
            where,
            partial(remote.provider, where, title, spec),
            remote.provider_timeout(spec) + MARGIN_S,
        )
        for where, title, spec in remote.provider_specs(config)
    ]
    channels = config.enabled_channels()
    probes += [
        Probe(name, partial(remote.channel, name, settings), remote.CHANNEL_TIMEOUT_S + MARGIN_S)
        for name, settings in channels.items()
    ]
    if not channels:
        probes.append(Probe("channels", _no_channels))
    probes += [
        Probe(f"mcp {server.name}", partial(mcp_probe, loaded, server), 30 + MARGIN_S)
        for server in config.mcp.servers
    ]
    if config.hardware.gpio and config.hardware.pin_factory != "mock":
        probes.append(Probe("gpio", lambda: in_thread(partial(gpio, config.hardware))))
    if config.triggers:
        from bot.cli.doctor.triggers import trigger_probes

        probes += trigger_probes(loaded, MARGIN_S)
    from bot.cli.doctor.browser import browser

    return [
        *probes,
        Probe("browser", partial(browser, config.browser)),
        Probe("sandbox", partial(host.sandbox, loaded), SANDBOX_TIMEOUT_S),
        Probe("service", partial(host.service, loaded.path)),
        Probe("clock", partial(host.clock, config.general.timezone)),
        Probe("disk", lambda: in_thread(partial(files.disk, loaded.data_dir))),
        Probe("daemon", partial(remote.daemon, config.web)),
    ]


def _host_probes() -> list[Probe]:
    """The checks that need no config."""
    from functools import partial

    from bot.cli.doctor import host
    from bot.cli.doctor.findings import Probe

    return [
        Probe("version", _version),
        Probe("service", partial(host.service, None)),
        Probe("clock", partial(host.clock, None)),
    ]


async def _version() -> Finding:
    """Which PinClaw is installed, on which Python and SQLite."""
    import platform
    import sqlite3

    from bot.cli.doctor.findings import Finding
    from bot.core.version import pinclaw_version

    return Finding(
        "version",
        "info",
        f"version: PinClaw {pinclaw_version()} (Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version})",
    )


async def _no_channels() -> Finding:
    from bot.cli.doctor.findings import Finding

    return Finding(
        "channels", "info", "channels: none enabled; PinClaw answers in the terminal (pinclaw chat)"
    )


def _marks(stream: TextIO) -> tuple[dict[str, str], str]:
    """The status marks and the fix separator this stream can show."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        "".join([*MARKS.values(), "—"]).encode(encoding)
    except (UnicodeError, LookupError):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="replace")  # a path or a bot's name may not fit either
        return PLAIN_MARKS, " - "
    return MARKS, " — "


def report_line(finding: Finding, stream: TextIO) -> str:
    """``finding`` as doctor prints it on ``stream``: mark, text, and the fix after a dash."""
    marks, dash = _marks(stream)
    return _line(finding, marks, dash)


def _line(finding: Finding, marks: dict[str, str], dash: str) -> str:
    fix = f"{dash}{finding.fix}" if finding.fix else ""
    return f"{marks[finding.status]} {finding.text}{fix}"


def _summary(findings: list[Finding], *, skipped: bool) -> str:
    failed = sum(f.status == "fail" for f in findings)
    warned = sum(f.status == "warn" for f in findings)
    if failed:
        text = f"{failed} check{'s' if failed > 1 else ''} failed."
        return text + (" The other checks need a config that loads." if skipped else "")
    if warned:
        return f"All checks passed; {warned} warning{'s' if warned > 1 else ''} (!) worth a look."
    return "All checks passed."


def _report(findings: list[Finding]) -> dict[str, Any]:
    checks = []
    for finding in findings:
        entry: dict[str, Any] = {
            "check": finding.check,
            "status": finding.status,
            "text": finding.text,
            "fix": finding.fix,
        }
        if finding.latency_ms is not None:
            entry["latency_ms"] = finding.latency_ms
        checks.append(entry)
    failed = sum(f.status == "fail" for f in findings)
    warned = sum(f.status == "warn" for f in findings)
    return {"ok": failed == 0, "failed": failed, "warnings": warned, "checks": checks}
