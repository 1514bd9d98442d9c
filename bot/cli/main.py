"""The ``pinclaw`` command line.

Each subcommand imports what it needs when it runs, so ``pinclaw --help`` and
``pinclaw config check`` stay fast and a disabled part's libraries are never
loaded. Errors meant for people (``UserError``) print on stderr, one line per
problem; the exit code is 2 for configuration and usage errors, 1 for other failures.
When the reader of the output goes away (``pinclaw doctor | head -1``), the
command stops quietly with exit code 141, the shell's code for a command ended
by SIGPIPE, unless it had already finished with a failure code of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bot.cli.completion import complete
from bot.cli.startup import pause_collector, resume_collector
from bot.cli.version import ShowVersion
from bot.core.by_name import load
from bot.core.errors import ConfigError, UsageError, UserError

if TYPE_CHECKING:
    from bot.config import LoadedConfig


READER_GONE = 141
"""The exit code when the output's reader went away: 128 + SIGPIPE, as the shell reports
a command that signal ended (``git log | head``)."""


def entry() -> int:
    """The ``pinclaw`` console script: ``main``, and out promptly, whatever was left running."""
    pause_collector()  # until the command is up: see bot.cli.startup
    _usable_streams()
    code: int | str | None = None
    try:
        try:
            code = main()
        except SystemExit as stop:  # argparse after --help, --version or a usage error
            code = stop.code
        sys.stdout.flush()  # now, while a reader that went away can still be answered quietly
    except BrokenPipeError:
        # The command's own failure says more than the pipe; otherwise the shell's code.
        code = code if isinstance(code, int) and code != 0 else READER_GONE
    _quiet_broken_pipes()  # stderr's reader may have gone too, while stdout's stayed
    return _leave_promptly(_exit_code(code))


def _usable_streams() -> None:
    """A stream the shell closed (``pinclaw status >&-``) is None in Python: it gets
    /dev/null, so what would be written there is dropped instead of failing. What the
    terminal's encoding cannot show (``≥`` under ``PYTHONIOENCODING=ascii``) is written
    as an escape, as Python does on stderr, instead of ending the command."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115
        elif hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def _quiet_broken_pipes() -> None:
    """Point stdout and stderr, where their reader is gone, at /dev/null, so the
    interpreter's last flush does not fail again (the recipe in Python's documentation
    of SIGPIPE)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):
            # What is left goes to /dev/null (a stream without a descriptor keeps it).
            with contextlib.suppress(OSError, ValueError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, stream.fileno())
                os.close(devnull)


def _exit_code(code: int | str | None) -> int:
    """The process exit code for what ``main`` returned or ``sys.exit`` was given."""
    if code is None or isinstance(code, int):
        return code or 0
    with contextlib.suppress(OSError):
        print(code, file=sys.stderr)  # what sys.exit("message") would have done
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``pinclaw`` command line; the exit code."""
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(None if "_ARGCOMPLETE" in os.environ else _command_in(words))
    complete(parser)  # answers the shell and exits when asked for completions
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:  # bare `pinclaw`: say what there is
        parser.print_help()
        return 0
    if args.subcommand not in _RESUME_WHEN_UP:
        resume_collector(freeze=False)
    from bot.cli.logs import setup_logging

    setup_logging(getattr(args, "log_level", None) or _default_level(args.subcommand))
    try:
        return _handle(args)
    finally:
        resume_collector(freeze=False)


_RESUME_WHEN_UP = frozenset({"agent", "chat"})
"""Commands that turn the garbage collector back on themselves, once their core is open."""


def _handle(args: argparse.Namespace) -> int:
    """Run the command; every error becomes one line on stderr and an exit code."""
    try:
        code: int = args.handler(args)
    except (ConfigError, UsageError) as exc:
        _say(exc)
        return 2
    except UserError as exc:
        _say(exc)
        return 1
    except KeyboardInterrupt:
        print("pinclaw: cancelled", file=sys.stderr)
        return 130
    except sqlite3.DatabaseError as exc:
        from bot.store.db import damaged_message, is_damage

        why = damaged_message(None, str(exc)) if is_damage(exc) else f"the database failed: {exc}"
        print(f"pinclaw: {why}", file=sys.stderr)
        return 1
    return code


def _say(exc: UserError) -> None:
    """The error on stderr: a line per problem (a config names each of its mistakes)."""
    for line in str(exc).splitlines() or [""]:
        print(f"pinclaw: {line}", file=sys.stderr)


def _leave_promptly(code: int, wait_s: float = 3.0) -> int:
    """``code``, once no worker thread is left that would keep the process alive.

    Every part closes its threads itself; this is the net under that rule: a
    thread still running after ``wait_s`` cannot hold the exit hostage.
    """
    deadline = time.monotonic() + wait_s
    for thread in threading.enumerate():
        if thread is threading.main_thread() or thread.daemon:
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
    if any(
        t.is_alive() and not t.daemon
        for t in threading.enumerate()
        if t is not threading.main_thread()
    ):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser for every subcommand, or only for ``command`` and those added
    with it (enough to parse a command line naming it, and to import no other's module)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help="config file (default: $PINCLAW_CONFIG, else ~/.pinclaw/config.toml)",
    )
    common.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default=argparse.SUPPRESS,
        help="log detail on stderr",
    )
    parser = argparse.ArgumentParser(
        prog="pinclaw",
        description="PinClaw: a chat-channel agent daemon.",
        parents=[common],
    )
    parser.add_argument("--version", action=ShowVersion, help="show the version and exit")
    sub = parser.add_subparsers(dest="subcommand", metavar="COMMAND")
    for names, adder in _COMMANDS:
        if command is None or command in names:
            _resolve(adder)(sub, common)
    return parser


def _command_in(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names, when it is plain which one: it comes first, after
    nothing but ``--config PATH`` or ``--log-level LEVEL``; None sends the whole parser
    (help, a typo, an abbreviated option: argparse explains those as it always has)."""
    known = {name for names, _ in _COMMANDS for name in names}
    index = 0
    while index < len(argv):
        token = argv[index]
        if token in ("--config", "--log-level"):
            index += 2
        elif token.startswith(("--config=", "--log-level=")):
            index += 1
        else:
            return token if token in known else None
    return None


def _resolve(adder: Adder | str) -> Adder:
    """The function itself, or ``module:function`` imported now."""
    if not isinstance(adder, str):
        return adder
    found: Adder = load(adder)
    return found


Subparsers = argparse._SubParsersAction  # the type argparse gives add_subparsers
if TYPE_CHECKING:
    Adder = Callable[[Subparsers[argparse.ArgumentParser], argparse.ArgumentParser], None]


def _talking(sub: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    agent = sub.add_parser("agent", parents=[common], help="run one turn and print the reply")
    agent.add_argument("-m", "--message", required=True, help="what to say to the agent")
    agent.add_argument(
        "--session", metavar="NAME", help="continue the named conversation (default: a fresh one)"
    )
    agent.set_defaults(handler=_agent)
    chat = sub.add_parser("chat", parents=[common], help="chat with the agent in the terminal")
    chat.add_argument("--session", metavar="NAME", default="chat", help="conversation name")
    chat.set_defaults(handler=_chat)
    run = sub.add_parser(
        "run", parents=[common], help="run the daemon: chat channels, scheduled jobs, heartbeat"
    )
    run.set_defaults(handler=_run)


def _onboarding(sub: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    onboard = sub.add_parser("onboard", parents=[common], help="first-run setup of the provider")
    onboard.add_argument("--kind", choices=("openai", "anthropic", "gemini", "ollama"))
    onboard.add_argument("--model")
    onboard.add_argument(
        "--base-url", metavar="URL", help="API root, e.g. http://localhost:8080/v1"
    )
    onboard.add_argument("--api-key", metavar="KEY", help="written into the config file")
    onboard.add_argument(
        "--api-key-env", metavar="VAR", help="reference ${VAR} in the config instead of a key"
    )
    onboard.add_argument(
        "--non-interactive", action="store_true", help="ask nothing; use flags and defaults"
    )
    onboard.add_argument("--force", action="store_true", help="replace an existing config")
    onboard.add_argument(
        "--skip-check", action="store_true", help="write without asking the model for a reply"
    )
    onboard.set_defaults(handler=_onboard)


def _pairing_commands(
    sub: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    pairing = sub.add_parser("pairing", parents=[common], help="admit people who asked to talk")
    pairing_sub = pairing.add_subparsers(dest="pairing_command", required=True, metavar="ACTION")
    listing = pairing_sub.add_parser(
        "list", parents=[common], help="codes waiting and people admitted"
    )
    listing.set_defaults(handler=_pairing)
    approve = pairing_sub.add_parser("approve", parents=[common], help="admit the sender of CODE")
    approve.add_argument("code")
    approve.set_defaults(handler=_pairing)
    revoke = pairing_sub.add_parser("revoke", parents=[common], help="remove an admitted person")
    revoke.add_argument("channel")
    revoke.add_argument("user_id")
    revoke.set_defaults(handler=_pairing)


def _approvals_commands(
    sub: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    approvals = sub.add_parser("approvals", parents=[common], help="the always-allow rules")
    approvals_sub = approvals.add_subparsers(
        dest="approvals_command", required=True, metavar="ACTION"
    )
    approvals_sub.add_parser("list", parents=[common], help="every rule, who made it, when")
    revoke_rule = approvals_sub.add_parser("revoke", parents=[common], help="remove rule ID")
    revoke_rule.add_argument("rule_id", type=int, metavar="ID")
    approvals.set_defaults(handler=_approvals)


def _audit_commands(
    sub: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    audit = sub.add_parser("audit", parents=[common], help="the log of every tool call")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True, metavar="ACTION")
    verify = audit_sub.add_parser("verify", parents=[common], help="check the log's hash chain")
    verify.add_argument("path", nargs="?", help="log file (default: the one in use)")
    verify.set_defaults(handler=_audit)
    show = audit_sub.add_parser("show", parents=[common], help="the latest entries, readably")
    show.add_argument("-n", "--lines", type=int, default=20, help="how many (default 20)")
    show.set_defaults(handler=_audit)


def _default_level(command: str) -> str:
    # One-shot and interactive commands keep stderr for errors; the daemon logs its progress.
    return "info" if command == "run" else "error"


def _config_arg(args: argparse.Namespace) -> str | None:
    value: str | None = getattr(args, "config", None)
    return value


def _sealed(loaded: LoadedConfig) -> LoadedConfig:
    """The config, once its secrets are out of this process's environment (see own_env)."""
    from bot.security.own_env import seal_process
    from bot.security.redact import config_secrets

    seal_process(config_secrets(loaded.config), keep=loaded.config.security.shell_env_passthrough)
    return loaded


def _agent(args: argparse.Namespace) -> int:
    from bot.cli.terminal import run_agent_once
    from bot.config import load_config

    loaded = _sealed(load_config(_config_arg(args)))
    reply = asyncio.run(run_agent_once(loaded, args.message, args.session))
    print(reply)
    return 0


def _chat(args: argparse.Namespace) -> int:
    from bot.cli.terminal import run_chat
    from bot.config import load_config

    loaded = _sealed(load_config(_config_arg(args)))
    return asyncio.run(run_chat(loaded, args.session))


def _run(args: argparse.Namespace) -> int:
    from bot.cli.logs import setup_daemon_logging
    from bot.config import load_config
    from bot.daemon.main import announce_shell, run_daemon
    from bot.daemon.run_lock import data_dir_lock

    loaded = load_config(_config_arg(args))
    with data_dir_lock(loaded.data_dir):
        _sealed(loaded)
        setup_daemon_logging(loaded, getattr(args, "log_level", None))
        announce_shell(loaded)  # the log's first line; before the loop, whose threads it spares
        return asyncio.run(run_daemon(loaded))


def _pairing(args: argparse.Namespace) -> int:
    from bot.cli.pairing import run_pairing
    from bot.config import load_config

    loaded = load_config(_config_arg(args))
    return asyncio.run(
        run_pairing(
            loaded,
            args.pairing_command,
            code=getattr(args, "code", ""),
            channel=getattr(args, "channel", ""),
            user_id=getattr(args, "user_id", ""),
        )
    )


def _onboard(args: argparse.Namespace) -> int:
    from bot.cli.onboard import Flags, onboard
    from bot.config import config_path

    flags = Flags(
        kind=args.kind,
        model=args.model,
        base_url=args.base_url,
        api_key=args.api_key,
        api_key_env=args.api_key_env,
        interactive=not args.non_interactive,
        force=args.force,
        check=not args.skip_check,
    )
    return onboard(config_path(_config_arg(args)), flags)


def _approvals(args: argparse.Namespace) -> int:
    from bot.cli.approvals import run_approvals
    from bot.config import load_config

    loaded = load_config(_config_arg(args))
    return asyncio.run(run_approvals(loaded, args.approvals_command, getattr(args, "rule_id", 0)))


def _audit(args: argparse.Namespace) -> int:
    from bot.cli.audit import show_audit, verify_audit
    from bot.config import load_config

    if args.audit_command == "verify" and getattr(args, "path", None):
        return verify_audit(Path(args.path).expanduser(), named=True)
    loaded = load_config(_config_arg(args))
    path = loaded.data_dir / loaded.config.security.audit_log
    if args.audit_command == "verify":
        return verify_audit(path)
    return show_audit(path, args.lines)


# Every command in the order `pinclaw --help` lists them, with the function that adds
# them: one above, or ``module:function`` in the module that runs them, imported only
# when one of its commands runs or the whole list is wanted.
_COMMANDS: tuple[tuple[tuple[str, ...], Adder | str], ...] = (
    (("agent", "chat", "run"), _talking),
    (("onboard",), _onboarding),
    (("pairing",), _pairing_commands),
    (("approvals",), _approvals_commands),
    (("cron",), "bot.cli.cron:add_cron_commands"),
    (("triggers",), "bot.cli.triggers:add_triggers_commands"),
    (("inbox",), "bot.cli.inbox:add_inbox_commands"),
    (("memory",), "bot.cli.memory:add_memory_commands"),
    (("people",), "bot.cli.people:add_people_commands"),
    (("sessions",), "bot.cli.sessions:add_sessions_commands"),
    (("hardware",), "bot.cli.hardware:add_hardware_commands"),
    (("audit",), _audit_commands),
    (("config",), "bot.cli.config_commands:add_config_commands"),
    (("db",), "bot.cli.db:add_db_commands"),
    (("service", "sandbox-exec"), "bot.cli.service:add_service_commands"),
    (("status",), "bot.cli.status:add_status_commands"),
    (("doctor",), "bot.cli.doctor:add_doctor_commands"),
    (("completion",), "bot.cli.completion:add_completion_commands"),
    (("usage",), "bot.cli.usage:add_usage_commands"),
    (("web",), "bot.cli.web:add_web_commands"),
    (("skills",), "bot.cli.skills:add_skills_commands"),
    (("mcp",), "bot.cli.mcp:add_mcp_commands"),
)


if __name__ == "__main__":
    sys.exit(main())
