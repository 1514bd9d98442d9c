"""``pinclaw service install | uninstall | status``: PinClaw as a systemd service.

``install`` renders the ``systemd/`` templates (``bot.cli.service_units``: the
daemon's ``pinclaw.service`` and the shell sandbox's socket and helper) with
this installation's ``pinclaw`` script, the config file, the data directory it
names and (system scope) the account, writes the units to
``~/.config/systemd/user/`` (``--user``) or ``/etc/systemd/system/``
(``--system``), creates the secrets file next to the config if it is missing,
and runs ``systemctl daemon-reload`` and ``enable --now`` (socket first). Where systemctl
cannot run, the unit is still written and the commands are printed to run by
hand. The exit code is 0 when everything was done, 1 when something was not.
``status`` says what ``pinclaw doctor`` says of the service, then shows
``systemctl status``; its exit code is 1 only when doctor fails the service.

For tests and packaging, ``--unit-dir DIR`` puts the unit elsewhere and
``$PINCLAW_SYSTEMCTL`` names the program run instead of ``systemctl``. Only
the standard library is imported here: the parser is built for every command.
"""

from __future__ import annotations

import argparse
import contextlib
import grp
import os
import pwd
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from bot.cli.service_units import (
    ENABLED,
    SYSTEM_UNIT_DIR,
    SYSTEMCTL_ENV,
    UNIT,
    UNITS,
    Target,
    default_unit_dir,
    installed_target,
    render_units,
)
from bot.core.errors import ConfigError, UserError

Subparsers = argparse._SubParsersAction  # the type argparse gives add_subparsers

ENV_FILE = "pinclaw.env"
DEVICE_GROUPS = ("gpio", "i2c", "dialout")
_UNSAFE = re.compile(r"[\s\"'\\\x00-\x1f\x7f]")
_ENV_TEMPLATE = """\
# Secrets for the PinClaw service: one NAME=value line each, no quotes needed.
# The config refers to them as "${NAME}", e.g. token = "${TELEGRAM_BOT_TOKEN}".
# Keep this file private (mode 0600); restart the service after a change.
# TELEGRAM_BOT_TOKEN=123456789:AA...
# OPENAI_API_KEY=sk-...
"""


def add_service_commands(
    sub: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Register ``pinclaw service`` and its actions."""
    scope = argparse.ArgumentParser(add_help=False)
    which = scope.add_mutually_exclusive_group()
    which.add_argument(
        "--user", dest="scope", action="store_const", const="user",
        help="your own systemd manager (the default unless run as root)",
    )  # fmt: skip
    which.add_argument(
        "--system", dest="scope", action="store_const", const="system",
        help="the system manager, /etc/systemd/system (needs root)",
    )  # fmt: skip
    scope.add_argument(
        "--unit-dir", metavar="DIR", type=Path,
        help="for testing and packaging: put the unit in DIR instead of the usual folder",
    )  # fmt: skip
    service = sub.add_parser(
        "service",
        parents=[common],
        help="run PinClaw as a systemd service",
        epilog=f"For testing, ${SYSTEMCTL_ENV} names a program to run instead of systemctl.",
    )
    actions = service.add_subparsers(dest="service_command", required=True, metavar="ACTION")
    install = actions.add_parser(
        "install", parents=[common, scope], help="write the unit, enable and start it"
    )
    install.add_argument("--dry-run", action="store_true", help="print the unit, change nothing")
    install.add_argument("--no-start", action="store_true", help="write the unit only")
    install.add_argument(
        "--run-as", metavar="USER", help="--system: the account (default: whoever ran sudo)"
    )
    actions.add_parser("uninstall", parents=[common, scope], help="stop, disable, remove it")
    actions.add_parser(
        "status",
        parents=[common, scope],
        help="the service as doctor judges it, then systemctl status (exit 1: it failed)",
    )
    service.set_defaults(handler=run_service)
    helper = sub.add_parser(
        "sandbox-exec",
        parents=[common],
        help="run one shell command in the sandbox (started by pinclaw-sandbox.socket)",
    )
    helper.set_defaults(handler=_sandbox_exec)


def _sandbox_exec(args: argparse.Namespace) -> int:
    from bot.security.sandbox.wire import serve_connection

    return serve_connection(0)


def run_service(args: argparse.Namespace) -> int:
    """Run ``pinclaw service ACTION``."""
    if args.service_command == "install":
        return install(args)
    target = _installed(args.scope, args.unit_dir)
    if args.service_command == "uninstall":
        return uninstall(target)
    return status(target, _config_path(getattr(args, "config", None)))


def _check_root(target: Target, action: str) -> None:
    """Refuse, in one line, to change the system manager's units without root."""
    if target.unit_dir == SYSTEM_UNIT_DIR and os.geteuid() != 0:
        try:  # sudo's PATH seldom includes a virtualenv: name the script in full
            command = str(_pinclaw_script())
        except UserError:
            command = "pinclaw"
        raise UserError(
            f"the system service needs root: run `sudo {command} service {action} --system`, "
            "or use --user for a service of your own"
        )


def install(args: argparse.Namespace) -> int:
    """Write the unit and start it; see the module docstring."""
    target = _scoped(args.scope, args.unit_dir)
    user_scope = target.user_scope
    if user_scope and args.run_as:
        raise UserError("--run-as is for --system: a user service runs as you")
    if not args.dry_run:
        _check_root(target, "install")
    account = _account(user_scope, args.run_as)
    home = str(Path.home()) if user_scope else account.pw_dir
    with _home(home):
        config = Path(getattr(args, "config", None) or _config_path()).expanduser().absolute()
        env_file = config.parent / ENV_FILE
        data_dir, devices = _checked_config(config, env_file, account)
    groups = [g for g in DEVICE_GROUPS if _group_exists(g)]
    values: dict[str, str | None] = {
        "pinclaw": _unit_path(_pinclaw_script()),
        "config_path": _unit_path(config),
        "env_file": _unit_path(env_file),
        "data_dir": _unit_path(data_dir),
        "user": None if user_scope else account.pw_name,
        "group": None if user_scope else grp.getgrgid(account.pw_gid).gr_name,
        "device_groups": " ".join(groups) or None,
        "wanted_by": "default.target" if user_scope else "multi-user.target",
        "private_devices": None if devices else "yes",
    }
    units = render_units(values, user_scope=user_scope)
    steps = [target.systemctl("daemon-reload"), target.systemctl("enable", "--now", *ENABLED)]
    if args.dry_run:
        for name, text in units.items():
            print(f"# pinclaw service install --dry-run: would write {target.unit_dir / name}")
            print(text, end="")
        print(f"# and then run: {_joined(steps)}")
        return 0
    _make_private_dir(data_dir, account)
    created = _ensure_env_file(env_file, account)
    for name, text in reversed(units.items()):  # the daemon's unit last
        _write_unit(target.unit_dir / name, text)
    others = ", ".join(name for name in UNITS if name != UNIT)
    print(f"Wrote {target.unit_path} ({target.label}, data in {data_dir}), and {others}.")
    print(f"Secrets go in {env_file}{_env_file_note(env_file, created)}.")
    for note in _group_notes(account, groups, user_scope):
        print(note)
    if args.no_start:
        print(f"Not started. To start it: {_joined(steps)}")
        return 0
    if failed := _run_steps(steps):
        why, left = failed
        raise UserError(f"the unit is written but not started: {why}; run by hand: {left}")
    flag = " --user" if user_scope else ""
    print(f"PinClaw is running. Follow its log with: journalctl{flag} -u pinclaw -f")
    if user_scope and not Path("/var/lib/systemd/linger", account.pw_name).exists():
        print(
            f"To keep it running while you are logged out: loginctl enable-linger {account.pw_name}"
        )
    return 0


def uninstall(target: Target) -> int:
    """Stop and disable the service and remove the unit; the data and secrets stay."""
    if not target.unit_path.exists():
        print(f"Nothing to remove: there is no {target.unit_path}.")
        return 0
    _check_root(target, "uninstall")
    failed = _run_steps([target.systemctl("disable", "--now", *reversed(ENABLED))])
    # The enable links too, in case systemctl could not remove them.
    links = [link for name in ENABLED for link in target.unit_dir.glob(f"*.wants/{name}")]
    for path in [*target.unit_paths(), *links]:
        path.unlink(missing_ok=True)
    print(f"Removed {target.unit_path} (the data and the secrets file stay).")
    if failed:
        stop = _joined([target.systemctl("stop", UNIT), target.systemctl("daemon-reload")])
        raise UserError(f"{failed[0]}; if PinClaw is still running, stop it with: {stop}")
    if failed := _run_steps([target.systemctl("daemon-reload")]):
        raise UserError(f"{failed[0]}; run by hand: {failed[1]}")
    return 0


def status(target: Target, config: Path) -> int:
    """The service as ``pinclaw doctor`` judges it, in its words, then ``systemctl status``.

    The exit code agrees with doctor's: 1 only when doctor fails the service (systemd
    gave up on it); not installed, stopped or not enabled are 0, as they are not
    failures there either (``pinclaw status`` answers whether the daemon runs).
    """
    import asyncio

    from bot.cli.doctor import report_line
    from bot.cli.doctor.host import service

    finding = asyncio.run(service(config if config.is_file() else None, target))
    print(report_line(finding, sys.stdout), flush=True)
    if target.unit_path.exists():
        command = target.systemctl("status", UNIT, "--no-pager")
        try:
            subprocess.run(command, check=False)
        except OSError as exc:
            print(f"pinclaw: could not run {command[0]} ({exc.strerror or exc})", file=sys.stderr)
    return 1 if finding.status == "fail" else 0


def _installed(scope: str | None, unit_dir: Path | None) -> Target:
    """The scope asked for; else the one where a unit is installed (user first); else
    the default scope (system for root)."""
    if scope is None and unit_dir is None and (found := installed_target()):
        return found
    return _scoped(scope, unit_dir)


def _scoped(scope: str | None, unit_dir: Path | None) -> Target:
    """The scope asked for, else system for root and user for everyone else."""
    user_scope = scope == "user" or (scope is None and os.geteuid() != 0)
    return Target(user_scope, unit_dir or default_unit_dir(user_scope))


def _account(user_scope: bool, run_as: str | None) -> pwd.struct_passwd:
    name = run_as or (None if user_scope else os.environ.get("SUDO_USER"))
    try:
        return pwd.getpwnam(name) if name else pwd.getpwuid(os.getuid())
    except KeyError:
        raise UserError(f"there is no user {name!r} on this machine") from None


@contextlib.contextmanager
def _home(home: str) -> Iterator[None]:
    """Expand ``~`` as the service will (under sudo, HOME is root's, not the account's)."""
    saved = os.environ.get("HOME")
    os.environ["HOME"] = home
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = saved


def _config_path(explicit: str | None = None) -> Path:
    from bot.config import config_path

    return config_path(explicit)


def _checked_config(config: Path, env_file: Path, account: pwd.struct_passwd) -> tuple[Path, bool]:
    """Validate the config as the service will see it (its environment comes from
    ``env_file`` alone); the data directory, and whether it names hardware devices.
    Call it inside ``_home``."""
    from bot.config import load_config

    env = {"HOME": str(Path.home()), "USER": account.pw_name, "LOGNAME": account.pw_name}
    env |= read_env_file(env_file)
    try:
        loaded = load_config(config, env)
    except ConfigError as exc:
        if "environment variable" not in str(exc):
            raise
        raise ConfigError(f"{exc}; the service reads variables only from {env_file}") from None
    hardware = loaded.config.hardware
    named = hardware.gpio or hardware.serial or hardware.sensors or hardware.i2c.buses
    devices = hardware.pin_factory != "mock" and bool(named or hardware.allow_raw_pins)
    return loaded.data_dir.absolute(), devices


def read_env_file(path: Path) -> dict[str, str]:
    """``NAME=value`` lines of an ``EnvironmentFile=`` (comments and blank lines skipped)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    found: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.strip().partition("=")
        if sep and name and not name.startswith(("#", ";")):
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            found[name.strip()] = value
    return found


def _pinclaw_script() -> Path:
    argv0 = Path(sys.argv[0])
    candidates = [argv0] if argv0.name == "pinclaw" else []
    candidates.append(Path(sys.executable).parent / "pinclaw")
    if found := shutil.which("pinclaw"):
        candidates.append(Path(found))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path.absolute()
    raise UserError("cannot find the installed `pinclaw` command; install PinClaw with pip first")


def _unit_path(path: Path) -> str:
    text = str(path)
    if _UNSAFE.search(text):
        raise UserError(f"{text}: a path with spaces or quotes cannot go into a systemd unit")
    return text.replace("%", "%%")  # % starts a systemd specifier


def _group_exists(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def _group_notes(account: pwd.struct_passwd, groups: Sequence[str], user_scope: bool) -> list[str]:
    if not user_scope:
        absent = [g for g in DEVICE_GROUPS if g not in groups]
        return [f"Left out groups that do not exist here: {', '.join(absent)}."] if absent else []
    outside = [
        g
        for g in groups
        if account.pw_name not in grp.getgrnam(g).gr_mem
        and grp.getgrnam(g).gr_gid != account.pw_gid
    ]
    if not outside:
        return []
    return [
        f"For GPIO, I2C and serial ports, add {account.pw_name} to {', '.join(outside)}: "
        f"sudo usermod -aG {','.join(outside)} {account.pw_name} (then log in again)."
    ]


def _make_private_dir(path: Path, account: pwd.struct_passwd) -> None:
    if not path.exists():
        path.mkdir(mode=0o700, parents=True)
        _give(path, account)


def _ensure_env_file(path: Path, account: pwd.struct_passwd) -> bool:
    if path.exists():
        return False
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(_ENV_TEMPLATE)
    _give(path, account)
    return True


def _env_file_note(path: Path, created: bool) -> str:
    if created:
        return " (created, mode 0600)"
    if path.stat().st_mode & 0o077:
        return f"; others can read it: chmod 600 {path}"
    return ""


def _give(path: Path, account: pwd.struct_passwd) -> None:
    """Hand what root created for the service over to its account."""
    if os.geteuid() == 0 and account.pw_uid != 0:
        os.chown(path, account.pw_uid, account.pw_gid)


def _write_unit(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(text, encoding="utf-8")
        partial.chmod(0o644)
        partial.replace(path)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None


def _run_steps(steps: Sequence[Sequence[str]]) -> tuple[str, str] | None:
    """Run each command, saying so; on the first failure return why, and what is left
    to run by hand."""
    for index, command in enumerate(steps):
        # Shown first: `enable --now` waits until PinClaw reports ready (up to a minute).
        print(f"$ {_joined([command])}", flush=True)
        try:
            result = subprocess.run(command, capture_output=True, text=True, check=False)
        except OSError as exc:
            why = f"could not run {command[0]} ({exc.strerror or exc})"
        else:
            if result.returncode == 0:
                continue
            said = (result.stderr or result.stdout).strip().splitlines()
            why = f"`{_joined([command])}` failed: {said[0] if said else result.returncode}"
        return why, _joined(steps[index:])
    return None


def _joined(commands: Sequence[Sequence[str]]) -> str:
    return " && ".join(" ".join(command) for command in commands)
