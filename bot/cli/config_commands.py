"""``pinclaw config``: check a config file, print the reference, explain a key.

``check`` validates a file and names every mistake; ``reference`` and ``explain`` read
the configuration models (``bot.cli.config_reference``) and need no config file.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bot.core.errors import ConfigError

if TYPE_CHECKING:
    from bot.config.env_refs import UnsetVariable


def add_config_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """``pinclaw config check|reference|explain``."""
    config = sub.add_parser("config", parents=[common], help="work with the config file")
    config_sub = config.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    check = config_sub.add_parser("check", parents=[common], help="validate a config file")
    check.add_argument("path", nargs="?", help="file to check (default: the config in use)")
    check.add_argument(
        "--strict",
        action="store_true",
        help="also fail on ${VARS} not set here (default: a note naming them)",
    )
    check.set_defaults(handler=_config_check)
    reference = config_sub.add_parser(
        "reference", parents=[common], help="print the configuration reference (Markdown)"
    )
    reference.set_defaults(handler=_config_reference)
    explain = config_sub.add_parser(
        "explain", parents=[common], help="what a config key does: type, default, limits"
    )
    explain.add_argument("key", nargs="+", metavar="KEY", help="e.g. home_assistant.allow")
    explain.set_defaults(handler=_config_explain)


def _config_check(args: argparse.Namespace) -> int:
    """Check the file; a ``${VAR}`` not set here is a note (the file is right), unless
    ``--strict``: the daemon's environment, not this shell's, is the one that counts."""
    from bot.config import config_path, load_config

    unset: list[UnsetVariable] = []
    path = config_path(args.path or getattr(args, "config", None))
    try:
        loaded = load_config(path, unset=None if args.strict else unset)
    except ConfigError:
        if unset:  # worth knowing too, before the mistakes are named
            print(_unset_note(unset, path))
        raise
    config = loaded.config
    fallbacks = len(config.provider.fallbacks)
    print(
        f"{loaded.path}: OK (provider {config.provider.label} at {config.provider.url}"
        f"{f', {fallbacks} fallback(s)' if fallbacks else ''}; data in {loaded.data_dir})"
    )
    if unset:
        print(_unset_note(unset, loaded.path))
    return 0


def _config_reference(args: argparse.Namespace) -> int:
    from bot.cli.config_reference import print_reference

    return print_reference(args)


def _config_explain(args: argparse.Namespace) -> int:
    from bot.cli.config_reference import print_explanation

    return print_explanation(args)


def _unset_note(unset: Sequence[UnsetVariable], path: Path) -> str:
    """Which variables are not set here, the keys that use them, and where they come from."""
    from bot.cli.service import ENV_FILE

    keys: dict[str, list[str]] = {}
    for variable in unset:
        keys.setdefault(variable.name, []).append(variable.key)
    named = ", ".join(f"{name} ({', '.join(where)})" for name, where in keys.items())
    them = "it" if len(keys) == 1 else "them"
    return (
        f"Note: not set here: {named}. `pinclaw run` reads {them} from its environment; "
        f"the service (`pinclaw service install`) from {path.absolute().parent / ENV_FILE}. "
        "`pinclaw config check --strict` fails on this."
    )
