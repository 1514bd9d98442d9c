"""Objects named ``module:attribute``, imported when first asked for."""

from __future__ import annotations

import importlib
from typing import Any


def load(target: str) -> Any:
    """The attribute ``target`` names (``package.module:name``), its module imported now."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)
