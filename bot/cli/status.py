"""``pinclaw status``: ask the running daemon how it is, through its local endpoint.

Exit codes: 0 running and healthy, 1 running but something is down (a channel
past its grace time, the scheduler, the database, a full data folder) or the endpoint refused us,
3 no daemon answers. A trigger source that is down (Home Assistant unreachable) is
shown with ✗ but leaves the exit code at 0, as it leaves ``/healthz`` healthy.
``--json`` prints the daemon's own report unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.core.durations import format_duration
from bot.core.version import pinclaw_version
from bot.daemon.run_lock import LOCK_FILE
from bot.security.shell.state import INSTALL_HINT, ShellState

if TYPE_CHECKING:
    import httpx

    from bot.config import LoadedConfig

NO_DAEMON = 3
TIMEOUT_S = 5.0


def add_status_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """``pinclaw status [--json]``."""
    status = sub.add_parser(
        "status", parents=[common], help="ask the running daemon how it is (exit 3: not running)"
    )
    status.add_argument("--json", action="store_true", help="the daemon's report as JSON")
    status.set_defaults(handler=_status)


def _status(args: argparse.Namespace) -> int:
    from bot.config import load_config

    return show_status(load_config(getattr(args, "config", None)), as_json=args.json)


def show_status(loaded: LoadedConfig, *, as_json: bool = False) -> int:
    """Print the daemon's status; the exit code."""
    import httpx

    web = loaded.config.web
    if not web.url:
        return _absent(loaded, 'its status endpoint is off ([web] listen = "off")', as_json)
    headers = {}
    if web.token is not None:
        headers["Authorization"] = f"Bearer {web.token.get_secret_value()}"
    try:
        response = httpx.get(f"{web.url}/status", headers=headers, timeout=TIMEOUT_S)
    except httpx.HTTPError as exc:
        return _absent(loaded, f"nothing answers at {web.url} ({_why(exc)})", as_json)
    if response.status_code in (401, 403):
        print(
            f"pinclaw: the daemon at {web.url} refused the request "
            f"({response.status_code}); check [web] token in {loaded.path}"
        )
        return 1
    try:
        report: dict[str, Any] = response.json()
        healthy = bool(report["ok"])
    except (ValueError, KeyError, TypeError):
        print(f"pinclaw: something at {web.url} answered, but not like a PinClaw daemon")
        return 1
    if as_json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(describe(report))
    return 0 if healthy else 1


def describe(report: dict[str, Any], now: float | None = None) -> str:
    """The report as lines for a person."""
    now = time.time() if now is None else now
    zone = _zone(report.get("timezone"))
    running = str(report.get("version", "?"))
    lines = [
        f"PinClaw {running} running for "
        f"{format_duration(float(report.get('uptime_s', 0)))} (pid {report.get('pid', '?')})",
    ]
    if running != (installed := pinclaw_version()):
        lines.append(f"Installed: PinClaw {installed}; restart the daemon to run it")
    if model := report.get("model"):
        lines.append(f"Model: {model}")
    channels: dict[str, dict[str, Any]] = report.get("channels", {})
    if channels:
        lines.append("Channels:")
        width = max(len(name) for name in channels)
        for name, channel in channels.items():
            lines.append(f"  {name:<{width}}  {_channel_line(channel, zone, now)}")
    else:
        lines.append("Channels: none (scheduler and heartbeat only)")
    lines.append(_scheduler_line(report.get("scheduler", {}), zone, now))
    if servers := report.get("mcp"):
        from bot.cli.mcp import server_lines

        lines.append("MCP servers:")
        lines.extend(f"  {line}" for line in server_lines(servers))
    lines.extend(trigger_lines(report.get("triggers")))
    if shell := ShellState.from_dict(report.get("shell")):
        lines.append(f"Shell: {shell.sentence()}")
        if not shell.sandboxed:
            lines.append(f"  to confine them, {INSTALL_HINT}")
    database = report.get("database", {})
    if not database.get("ok", True):
        lines.append(f"Database: failing ({database.get('detail', '')})")
    storage = report.get("storage", {})
    if not storage.get("ok", True):
        since = storage.get("since")
        when = f" since {_when(float(since), zone, now)}" if since else ""
        lines.append(f"Storage: {storage.get('detail', 'data folder full')}{when}")
    for key, label in (
        ("approvals_pending", "Approvals pending"),
        ("inbox_depth", "Messages waiting for an answer"),
        ("owner_inbox_unread", "Unread in `pinclaw inbox`"),
        ("memories", "Memories"),
        ("tokens_today", "Tokens today"),
    ):
        value = report.get(key)
        if value is not None:
            lines.append(f"{label}: {value:,}")
    lines.append("Health: ok" if report.get("ok") else "Health: something is down (see above)")
    return "\n".join(lines)


def trigger_lines(triggers: object) -> list[str]:
    """``Triggers: N`` and a line per trigger with its source's state (✗ when it is down)."""
    if not isinstance(triggers, list) or not triggers:
        return []
    entries = [t for t in triggers if isinstance(t, dict)]
    down = sum(1 for t in entries if not t.get("ok", True))
    lines = [f"Triggers: {len(entries)}" + (f", {down} not watching" if down else "")]
    width = max((len(str(t.get("name", ""))) for t in entries), default=0)
    for trigger in entries:
        mark = "" if trigger.get("ok", True) else "  ✗"
        lines.append(
            f"  {trigger.get('name', '?')!s:<{width}}  "
            f"{trigger.get('on', '?')}: {trigger.get('detail', '')}{mark}"
        )
    return lines


def _channel_line(channel: dict[str, Any], zone: ZoneInfo, now: float) -> str:
    state = str(channel.get("state", "?"))
    since = channel.get("since")
    text = state
    if since:
        text += f" since {_when(float(since), zone, now)}"
    if state != "connected" and channel.get("detail"):
        text += f"; last error: {channel['detail']}"
    if not channel.get("healthy", True):
        text += "  ✗ down too long"
    return text


def _scheduler_line(scheduler: dict[str, Any], zone: ZoneInfo, now: float) -> str:
    if not scheduler.get("running"):
        return "Scheduler: not running"
    upcoming = scheduler.get("next") or []
    if not upcoming:
        return "Scheduler: running, nothing scheduled"
    jobs = ", ".join(
        f"{job['name']} at {_when(float(job['next_run']), zone, now)}" for job in upcoming
    )
    return f"Scheduler: running; next: {jobs}"


def _when(timestamp: float, zone: ZoneInfo, now: float) -> str:
    moment = datetime.fromtimestamp(timestamp, zone)
    same_day = moment.date() == datetime.fromtimestamp(now, zone).date()
    return moment.strftime("%H:%M" if same_day else "%Y-%m-%d %H:%M")


def _zone(name: object) -> ZoneInfo:
    try:
        return ZoneInfo(str(name)) if name else ZoneInfo("UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def _why(exc: httpx.HTTPError) -> str:
    import httpx

    if isinstance(exc, httpx.ConnectError):
        return "connection refused"
    if isinstance(exc, httpx.TimeoutException):
        return "no answer in time"
    return type(exc).__name__


def _absent(loaded: LoadedConfig, why: str, as_json: bool) -> int:
    pid = running_pid(loaded.data_dir)
    if as_json:
        print(json.dumps({"ok": False, "running": False, "pid": pid, "reason": why}))
        return NO_DAEMON
    print(f"PinClaw is not running: {why}.")
    if pid is not None:
        print(
            f"A daemon (pid {pid}) holds {loaded.data_dir}, but its endpoint does not answer; "
            "check [web] listen in the config it was started with."
        )
    else:
        print("Start it with `pinclaw run`, or `pinclaw service install` to keep it running.")
    return NO_DAEMON


def running_pid(data_dir: Path) -> int | None:
    """The pid in the data folder's lock file, if that process is a live pinclaw."""
    try:
        pid = int((data_dir / LOCK_FILE).read_text().strip() or 0)
        command = Path(f"/proc/{pid}/cmdline").read_bytes() if pid > 0 else b""
    except (OSError, ValueError):
        return None
    return pid if b"pinclaw" in command and pid != os.getpid() else None
