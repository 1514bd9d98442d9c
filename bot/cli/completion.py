"""Shell completion for bash, zsh and fish, through argcomplete.

``pinclaw completion SHELL`` prints the script to load (see docs/reference/commands.md); the shell
then runs ``pinclaw`` with ``_ARGCOMPLETE`` set, and ``complete`` answers from
the same argparse parser the command uses, so completion never drifts from the
real options. argcomplete is imported only in those two cases.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

SHELLS = ("bash", "zsh", "fish")


def add_completion_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """``pinclaw completion bash|zsh|fish``."""
    completion = sub.add_parser(
        "completion", parents=[common], help="print the shell completion script"
    )
    completion.add_argument("shell", choices=SHELLS, help="your shell")
    completion.set_defaults(handler=_print_script)


def complete(parser: argparse.ArgumentParser) -> None:
    """When the shell asks for completions, answer and exit; otherwise do nothing."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete

    argcomplete.autocomplete(parser)


def _print_script(args: argparse.Namespace) -> int:
    from argcomplete.shell_integration import shellcode

    print(shellcode(["pinclaw"], shell=args.shell), end="")
    return 0
