"""The Gemini end of schema cleaning: one node reduced to Gemini's OpenAPI subset.

``bot.providers.schema`` inlines references and flattens unions first; this
module decides what one already-cleaned node may keep. Gemini's ``Schema``
object (generativelanguage v1beta) accepts ``type``, ``format``,
``description``, ``nullable``, ``enum``, ``properties``, ``required``,
``items``, ``minItems``, ``maxItems``, ``minimum``, ``maximum``,
``minLength``, ``maxLength`` and ``pattern``; every other key is dropped, and
each kept key only where its type allows it (``properties`` only on objects,
``items`` only on arrays), since Gemini rejects e.g. ``properties`` on a string.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

_SCALARS = frozenset({"string", "integer", "number", "boolean"})
_NUMERIC = frozenset({"integer", "number"})
_TYPES = _SCALARS | {"object", "array"}

# The Gemini API rejects any other format ("date", "uri", "email", ...); those
# become a hint in the description so the model still learns what is expected.
_FORMATS: dict[str, frozenset[str]] = {
    "string": frozenset({"enum", "date-time"}),
    "integer": frozenset({"int32", "int64"}),
    "number": frozenset({"float", "double"}),
}
_TYPE_KEYS: dict[str, tuple[str, ...]] = {
    "string": ("minLength", "maxLength", "pattern"),
    "integer": ("minimum", "maximum"),
    "number": ("minimum", "maximum"),
    "array": ("minItems", "maxItems"),
}


def combine_types(kinds: Sequence[str]) -> str | None:
    """One Gemini type standing for several: numbers → number, other scalars → string."""
    if not kinds:
        return None
    if len(set(kinds)) == 1:
        return kinds[0]
    if all(kind in _NUMERIC for kind in kinds):
        return "number"
    if all(kind in _SCALARS for kind in kinds):
        return "string"
    return kinds[0]


def is_scalar(node: Any) -> bool:
    """Whether a cleaned node is a plain string, integer, number or boolean."""
    return isinstance(node, dict) and node.get("type") in _SCALARS


def string_enum(node: Any) -> list[str] | None:
    """The values of a cleaned string enum node, or ``None`` if it is not one."""
    if not isinstance(node, dict) or node.get("type") != "string":
        return None
    values = node.get("enum")
    return values if isinstance(values, list) else None


def finish_gemini(node: dict[str, Any]) -> dict[str, Any]:
    """Reduce a node whose children are already cleaned to what Gemini accepts."""
    nullable = node.get("nullable") is True
    hints: list[str] = []
    kind = node.get("type")
    if isinstance(kind, list):
        names = [name for name in kind if isinstance(name, str)]
        kept = [name for name in names if name != "null"]
        nullable = nullable or len(kept) < len(names)
        kind = combine_types(kept)
    if kind == "null":
        kind, nullable = None, True

    enum: list[str] | None = None
    values = [node["const"]] if "const" in node else node.get("enum")
    if isinstance(values, list):
        if None in values:
            nullable = True
            values = [value for value in values if value is not None]
        if values and all(isinstance(value, str) for value in values):
            kind, enum = "string", values
        elif values:
            # Gemini enums are strings only, and pydantic refuses "1" for
            # Literal[1]; so numeric and boolean choices keep their type and
            # are listed in the description instead.
            hints.append("one of " + ", ".join(json.dumps(value, default=str) for value in values))
            kind = kind or _kind_of(values)

    if not isinstance(kind, str) or kind not in _TYPES:
        kind = _infer_kind(node)
    out: dict[str, Any] = {"type": kind}

    fmt = node.get("format")
    if isinstance(fmt, str):
        if fmt in _FORMATS.get(kind, ()):
            out["format"] = fmt
        else:
            hints.append(f"format: {fmt}")
    description = _describe(node.get("description"), hints)
    if description:
        out["description"] = description
    if nullable:
        out["nullable"] = True
    if enum is not None:
        out["enum"] = enum

    if kind == "object":
        _keep_object(node, out)
    elif kind == "array":
        out["items"] = _items_of(node)
    elif kind in _NUMERIC:
        _keep_bounds(node, out, integer=kind == "integer")
    for key in _TYPE_KEYS.get(kind, ()):
        if key in node and key not in out:
            out[key] = node[key]
    return out


def _kind_of(values: list[Any]) -> str | None:
    if all(isinstance(value, bool) for value in values):
        return "boolean"
    if any(isinstance(value, bool) for value in values):
        return None
    if all(isinstance(value, int) for value in values):
        return "integer"
    if all(isinstance(value, int | float) for value in values):
        return "number"
    return None


def _infer_kind(node: dict[str, Any]) -> str:
    # Gemini wants a type on every node; an untyped one (pydantic's ``Any``)
    # becomes a string unless its keys say otherwise.
    if "properties" in node:
        return "object"
    if "items" in node or "prefixItems" in node:
        return "array"
    return "string"


def _describe(description: Any, hints: list[str]) -> str:
    text = description if isinstance(description, str) else ""
    if not hints:
        return text
    hint = "(" + "; ".join(hints) + ")"
    return f"{text} {hint}" if text else hint


def _keep_object(node: dict[str, Any], out: dict[str, Any]) -> None:
    properties = node.get("properties")
    if not isinstance(properties, dict):
        return
    out["properties"] = properties
    # Gemini rejects a required name that is not among the properties.
    required = [name for name in node.get("required", ()) if name in properties]
    if required:
        out["required"] = required


def _items_of(node: dict[str, Any]) -> dict[str, Any]:
    items = node.get("items")
    if isinstance(items, list):
        items = items[0] if items else None
    if isinstance(items, dict):
        return items
    # A tuple (prefixItems) has no single item type; Gemini needs one.
    prefix = node.get("prefixItems")
    if isinstance(prefix, list) and prefix and isinstance(prefix[0], dict):
        first: dict[str, Any] = prefix[0]
        return first
    return {"type": "string"}


def _keep_bounds(node: dict[str, Any], out: dict[str, Any], *, integer: bool) -> None:
    # Gemini has no exclusive bounds: integers shift by one exactly; numbers
    # get the inclusive bound and the tool's own validation stays strict.
    step = 1 if integer else 0
    low, high = node.get("exclusiveMinimum"), node.get("exclusiveMaximum")
    if "minimum" not in node and isinstance(low, int | float) and not isinstance(low, bool):
        out["minimum"] = low + step
    if "maximum" not in node and isinstance(high, int | float) and not isinstance(high, bool):
        out["maximum"] = high - step
