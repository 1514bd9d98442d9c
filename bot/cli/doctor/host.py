"""Checks of the machine around PinClaw: the shell sandbox, the systemd service, the clock.

systemctl and timedatectl are asked when they can answer; where they cannot
(a container, no systemd), the service is judged by its files and the time
sync is not mentioned.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from bot.cli.doctor.findings import Finding, command_output, in_thread
from bot.config import LoadedConfig

if TYPE_CHECKING:
    from bot.cli.service_units import Target

MIN_YEAR = 2024  # a clock before this was never set (a Pi has no battery clock)
COMMAND_TIMEOUT_S = 5.0
ENABLED_STATES = frozenset({"enabled", "enabled-runtime", "static", "indirect", "alias"})
SYSTEMCTL_WORDS = ENABLED_STATES | {
    "disabled", "masked", "masked-runtime", "linked", "linked-runtime", "generated",
    "transient", "bad", "not-found", "active", "inactive", "failed", "activating",
    "deactivating", "reloading",
}  # fmt: skip


async def sandbox(loaded: LoadedConfig) -> Finding:
    """Which sandbox shell commands get, probed the way the shell tool probes it."""
    config = loaded.config
    if "shell" in config.tools.disabled:
        return Finding("sandbox", "info", "shell sandbox: not needed, the shell tool is disabled")
    mode = config.security.shell_sandbox
    full = config.security.autonomy == "full"
    install = "install bubblewrap (sudo apt install bubblewrap)"
    if mode == "off":
        return Finding(
            "sandbox",
            "fail" if full else "warn",
            'shell sandbox: OFF (security.shell_sandbox = "off"): shell commands run WITHOUT '
            "a sandbox"
            + ('; security.autonomy = "full" refuses to start like this' if full else ""),
            'set security.shell_sandbox = "auto" to use bubblewrap where it works',
        )
    from bot.security.kit import build_security
    from bot.security.sandbox.bwrap import find_sandbox
    from tools.shell import sandbox_layout

    layout = sandbox_layout(build_security(loaded))
    found = await in_thread(lambda: find_sandbox(layout, mode))
    if found.sandbox is not None:
        return Finding("sandbox", "ok", f"shell sandbox: {found.summary}")
    if mode == "required" or full:
        key = "security.shell_sandbox" if mode == "required" else "security.autonomy"
        value = '"required"' if mode == "required" else '"full"'
        return Finding(
            "sandbox",
            "fail",
            f"shell sandbox: NONE, but {key} = {value} needs one: {found.summary}",
            f'{install}, or set security.autonomy = "supervised"'
            + (' and security.shell_sandbox = "auto"' if mode == "required" else ""),
        )
    return Finding(
        "sandbox",
        "warn",
        f"shell sandbox: NONE, shell commands run WITHOUT a sandbox: {found.summary}; "
        "scripts and network commands ask first",
        install,
    )


async def service(config_path: Path | None, target: Target | None = None) -> Finding:
    """Whether the systemd unit (``target``'s, else the one installed) is installed and
    enabled, and not failed; not installed is fine. ``pinclaw service status`` says the same."""
    from bot.cli.service_units import ENABLED, UNIT, installed_target

    target = target or installed_target()
    if target is None or not target.unit_path.exists():
        return Finding(
            "service",
            "info",
            "service: not installed (fine while you start `pinclaw run` yourself)",
            "to start PinClaw at boot: pinclaw service install",
        )
    where = f"service: installed as a {target.label} ({target.unit_path})"
    enabled = await _ask(target.systemctl("is-enabled", UNIT))
    if not enabled:  # systemctl cannot answer here: the links `enable` makes tell
        linked = any(target.unit_dir.glob(f"*.wants/{UNIT}"))
        enabled = "enabled" if linked else "disabled"
    if enabled not in ENABLED_STATES:
        return Finding(
            "service",
            "warn",
            f"{where}, but not enabled ({enabled}): it does not start at boot",
            ("" if target.user_scope else "sudo ")
            + " ".join(target.systemctl("enable", "--now", *ENABLED)),
        )
    used = _other_config(target.unit_path, config_path)
    if used is not None:
        return Finding(
            "service",
            "warn",
            f"{where}, but it reads {used}, not {config_path}",
            f"check that one: pinclaw doctor --config {used}",
        )
    active = await _ask(target.systemctl("is-active", UNIT))
    if active == "failed":  # systemd gave up restarting it: PinClaw is not running
        journal = "journalctl --user" if target.user_scope else "journalctl"
        return Finding(
            "service", "fail", f"{where}, enabled, but it failed", f"{journal} -u pinclaw -e"
        )
    state = {"active": ", running", "inactive": ", stopped", "activating": ", starting"}
    return Finding("service", "ok", f"{where}, enabled{state.get(active, '')}")


def _other_config(unit: Path, config_path: Path | None) -> Path | None:
    """The config file the unit hands the daemon (``Environment=PINCLAW_CONFIG=...``)
    when it is not ``config_path``, the one being checked."""
    if config_path is None:
        return None
    try:
        lines = unit.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    prefix = "Environment=PINCLAW_CONFIG="
    found = next((line.removeprefix(prefix) for line in lines if line.startswith(prefix)), None)
    used = Path(found.strip('"')) if found else None
    return used if used is not None and used.resolve() != config_path.resolve() else None


async def clock(configured: str | None) -> Finding:
    """The time zone in use resolves, the date is plausible, and (if known) NTP keeps it."""
    zone, source = _zone(configured)
    now = datetime.now(zone)
    shown = f"clock: {now:%Y-%m-%d %H:%M} {zone.key} ({source})"
    if now.year < MIN_YEAR:
        return Finding(
            "clock",
            "fail",
            f"{shown}: the date is wrong; HTTPS and schedules need the right time",
            "let the system set its clock from the network: sudo timedatectl set-ntp true",
        )
    if source == "no zone set":
        return Finding(
            "clock",
            "warn",
            f"{shown}: schedules and reminders follow UTC",
            'set [general] timezone, e.g. timezone = "Europe/Berlin"',
        )
    synced = await _ask(["timedatectl", "show", "--property=NTPSynchronized", "--value"])
    if synced == "no":
        return Finding(
            "clock",
            "warn",
            f"{shown}, not synchronised with a time server",
            "sudo timedatectl set-ntp true",
        )
    return Finding("clock", "ok", shown + (", synchronised (NTP)" if synced == "yes" else ""))


def _zone(configured: str | None) -> tuple[ZoneInfo, str]:
    """The zone PinClaw uses (``LoadedConfig.timezone``'s rule) and where it comes from."""
    from bot.config import resolve_timezone

    zone = resolve_timezone(configured)
    if configured:
        return zone, "from the config"
    if os.environ.get("TZ", "").lstrip(":") == zone.key:
        return zone, "from $TZ"
    if zone.key != "UTC" or Path("/etc/localtime").exists() or Path("/etc/timezone").exists():
        return zone, "the system's"
    return zone, "no zone set"


async def _ask(argv: list[str]) -> str:
    """The one word a command prints (systemctl, timedatectl); "" when it cannot answer."""
    word = (await command_output(argv, COMMAND_TIMEOUT_S)).strip()
    return word if word in SYSTEMCTL_WORDS | {"yes", "no"} else ""
