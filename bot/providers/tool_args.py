"""Reading a model's tool-call arguments, which arrive as JSON text or as an object."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def decode_arguments(raw: object) -> tuple[dict[str, Any], str | None]:
    """Return ``(arguments, error)``; ``error`` says plainly why the arguments are unusable.

    An empty string or ``None`` means no arguments. A JSON string that itself holds
    a JSON object (double-encoded, as some models send) is decoded once more. Any
    other kind of value (a list, a number) is an error.
    """
    if raw is None:
        return {}, None
    if isinstance(raw, Mapping):
        return dict(raw), None
    if not isinstance(raw, str):
        return {}, f"the arguments must be a JSON object, got {type(raw).__name__}"
    text = raw.strip()
    if not text:
        return {}, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return {}, f"the arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    except RecursionError:
        return {}, "the arguments are nested too deeply to read"
    if isinstance(value, str):
        return decode_arguments(value)
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, got {type(value).__name__}"
    return value, None
