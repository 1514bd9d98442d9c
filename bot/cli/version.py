"""``pinclaw --version``: the installed package's version, read only when asked for."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any


class ShowVersion(argparse.Action):
    """Print ``pinclaw VERSION`` and exit, like argparse's ``version`` action; the
    version is looked up when the option is given, not when the parser is built."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        from bot.core.version import pinclaw_version

        print(f"pinclaw {pinclaw_version()}")
        parser.exit()
