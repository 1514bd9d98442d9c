"""The systemd units ``pinclaw service install`` writes, rendered from the ``systemd/`` templates,
and where they go (``Target``: the user's or the system's manager).

``pinclaw.service`` runs the daemon. ``pinclaw-sandbox.socket`` and
``pinclaw-sandbox@.service`` run its shell commands in bubblewrap: the daemon's
own unit may create no namespaces, so each command goes through that socket to
a helper in a unit of its own (``bot.security.sandbox.wire``). Only the
standard library is imported here: the parser is built for every command.
"""

from __future__ import annotations

import os
import re
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bot.core.errors import UserError

UNIT = "pinclaw.service"
SOCKET = "pinclaw-sandbox.socket"
HELPER = "pinclaw-sandbox@.service"
UNITS = (UNIT, SOCKET, HELPER)
ENABLED = (SOCKET, UNIT)
"""What ``install`` enables and starts, in this order (the socket must listen first)."""

SYSTEM_UNIT_DIR = Path("/etc/systemd/system")
SYSTEMCTL_ENV = "PINCLAW_SYSTEMCTL"


@dataclass(frozen=True, slots=True)
class Target:
    """Where the unit goes and which systemd manager runs it."""

    user_scope: bool
    unit_dir: Path

    @property
    def unit_path(self) -> Path:
        """The daemon's unit file."""
        return self.unit_dir / UNIT

    def unit_paths(self) -> list[Path]:
        """Every unit file PinClaw installs here."""
        return [self.unit_dir / name for name in UNITS]

    @property
    def label(self) -> str:
        """ "user service" or "system service", for messages."""
        return "user service" if self.user_scope else "system service"

    def systemctl(self, *args: str) -> list[str]:
        """A systemctl command line for this scope (``$PINCLAW_SYSTEMCTL`` if set)."""
        program = os.environ.get(SYSTEMCTL_ENV) or "systemctl"
        return [program, *(["--user"] if self.user_scope else []), *args]


def installed_target() -> Target | None:
    """Where the daemon's unit is installed (the user's manager first), or None."""
    targets = [Target(user_scope, default_unit_dir(user_scope)) for user_scope in (True, False)]
    return next((t for t in targets if t.unit_path.exists()), None)


def default_unit_dir(user_scope: bool) -> Path:
    """Where the user's (``~/.config/systemd/user``) or the system's manager reads units."""
    if not user_scope:
        return SYSTEM_UNIT_DIR
    config_home = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(config_home) / "systemd" / "user"


# Keys a user manager cannot honour (see the templates' headers), and the reverse.
SYSTEM_ONLY = frozenset(
    {"User", "Group", "SupplementaryGroups", "DevicePolicy", "DeviceAllow", "ProtectProc"}
    | {"ProtectControlGroups", "RemoveIPC", "Wants", "After", "SocketUser", "SocketGroup"}
)
USER_ONLY = frozenset({"PrivateUsers"})
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def render_unit(
    template: str, values: Mapping[str, str | None], *, user_scope: bool, name: str = UNIT
) -> str:
    """Fill in the ``{placeholders}``; drop the other scope's lines and those valued None.

    The template's leading comment gives way to a short header, and a comment
    goes with the directive right after it when that one is dropped.
    """
    dropped = SYSTEM_ONLY if user_scope else USER_ONLY
    lines = template.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("["))
    flag = "--user" if user_scope else "--system"
    systemctl = "systemctl --user" if user_scope else "systemctl"
    unit = name if "@" in name else name.removesuffix(".service")
    out = [
        f"# Written by `pinclaw service install {flag}` from PinClaw's systemd/{name};",
        f"# reinstalling replaces it. Change settings with `{systemctl} edit {unit}`.",
        "",
    ]
    comments: list[str] = []  # waiting for the directive they explain
    for line in lines[start:]:
        if line.startswith("#"):
            comments.append(line)
        elif line.strip() and not line.startswith("["):
            filled = None if line.split("=", 1)[0] in dropped else _fill(line, values)
            out += [*comments, filled] if filled is not None else []
            comments = []
        else:
            out += [*comments, line]
            comments = []
    text = "\n".join([*out, *comments])
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n") + "\n"


def read_template(name: str = UNIT) -> str:
    """A unit template's text: installed data files first, then the source tree."""
    candidates = [
        Path(sysconfig.get_path("data"), "share", "pinclaw", "systemd", name),
        Path(__file__).resolve().parents[2] / "systemd" / name,
    ]
    for path in candidates:
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise UserError(
        f"cannot find the unit template ({candidates[-1]}); reinstall PinClaw with `pip install .`"
    )


def render_units(values: Mapping[str, str | None], *, user_scope: bool) -> dict[str, str]:
    """Every unit, by file name."""
    return {
        name: render_unit(read_template(name), values, user_scope=user_scope, name=name)
        for name in UNITS
    }


def _fill(line: str, values: Mapping[str, str | None]) -> str | None:
    missing = False

    def value(match: re.Match[str]) -> str:
        nonlocal missing
        found = values[match.group(1)]  # a KeyError is a template bug, not a user error
        missing = missing or found is None
        return found or ""

    filled = _PLACEHOLDER.sub(value, line)
    return None if missing else filled
