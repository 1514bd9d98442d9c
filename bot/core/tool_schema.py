"""A tool's JSON schema written straight from its signature, for the usual parameters.

Making the pydantic model of a tool's arguments and asking it for its JSON
schema costs a few milliseconds a tool, and every model request shows every
tool: most runs would make all of them for nothing. For parameters of the
plain kinds tools use (str, int, float, bool; ``X | None``; a ``Literal`` of
strings; a list or a ``dict[str, ...]`` of those; ``Field`` with a description
and bounds) ``plain_schema`` writes the same schema pydantic would, key for key
and in pydantic's order, and the model is made when a call is first validated.
For anything else it answers None and the tool asks pydantic. A test compares
the two for every built-in tool (tests/test_tool_api.py).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from pydantic.fields import FieldInfo

_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_PLAIN_DEFAULTS = (str, int, float, bool, type(None))


class _NotPlain(Exception):
    """The parameter is not one of the kinds written here: pydantic writes the schema."""


def plain_schema(parameters: Sequence[tuple[str, Any, Any]]) -> dict[str, Any] | None:
    """The JSON schema of the arguments (name, annotation, default or ``...``), as
    pydantic makes it without titles; None when a parameter is not a plain one."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    try:
        for name, annotation, default in parameters:
            properties[name] = _parameter(annotation, default)
            if default is ...:
                required.append(name)
    except _NotPlain:
        return None
    schema: dict[str, Any] = {"additionalProperties": False, "properties": properties}
    if required:
        schema["required"] = required
    schema["type"] = "object"
    return schema


def _parameter(annotation: Any, default: Any) -> dict[str, Any]:
    kind, field = _unwrap(annotation)
    constraints: dict[str, Any] = {}
    description: str | None = None
    if field is not None:
        description = field.description
        for item in field.metadata:
            constraints.update(_constraint(item, kind))
    schema = _type(kind, constraints)
    if default is not ...:
        if type(default) not in _PLAIN_DEFAULTS:
            raise _NotPlain
        schema["default"] = default
    if description is not None:
        schema["description"] = description
    return dict(sorted(schema.items()))


def _unwrap(annotation: Any) -> tuple[Any, FieldInfo | None]:
    """The type and its one ``Field``, which may only describe and bound it."""
    if typing.get_origin(annotation) is not Annotated:
        return annotation, None
    kind, *extras = typing.get_args(annotation)
    if len(extras) != 1 or not isinstance(extras[0], FieldInfo):
        raise _NotPlain
    field = extras[0]
    if set(dict(field.__repr_args__())) - {"annotation", "required", "description", "metadata"}:
        raise _NotPlain  # a title, an alias, examples, a default in the Field, ...
    if not field.is_required() or field.annotation is not None:
        raise _NotPlain
    return kind, field


def _constraint(item: object, kind: Any) -> dict[str, Any]:
    """A bound as pydantic writes it for ``kind`` (the non-null part of ``X | None``)."""
    kind = _without_none(kind)
    if kind in (int, float):
        if isinstance(item, Ge):
            return {"minimum": item.ge}
        if isinstance(item, Le):
            return {"maximum": item.le}
        if isinstance(item, Gt):
            return {"exclusiveMinimum": item.gt}
        if isinstance(item, Lt):
            return {"exclusiveMaximum": item.lt}
    if kind is str or typing.get_origin(kind) is list:
        noun = "Length" if kind is str else "Items"
        if isinstance(item, MinLen):
            return {f"min{noun}": item.min_length}
        if isinstance(item, MaxLen):
            return {f"max{noun}": item.max_length}
    raise _NotPlain


def _without_none(kind: Any) -> Any:
    args = typing.get_args(kind)
    if _is_union(kind) and len(args) == 2 and type(None) in args:
        return next(a for a in args if a is not type(None))
    return kind


def _is_union(kind: Any) -> bool:
    return typing.get_origin(kind) in (typing.Union, types.UnionType)


def _type(kind: Any, constraints: dict[str, Any]) -> dict[str, Any]:
    if _is_union(kind):
        inner = _without_none(kind)
        if inner is kind:
            raise _NotPlain  # a union of two real types
        return {"anyOf": [_type(inner, constraints), {"type": "null"}]}
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind in _TYPES and (kind is not bool or not constraints):
        return dict(sorted({**constraints, "type": _TYPES[kind]}.items()))
    if constraints and origin is not list:
        raise _NotPlain
    if origin is Literal and len(args) > 1 and all(type(a) is str for a in args):
        return {"enum": list(args), "type": "string"}
    if origin is list and len(args) == 1 and args[0] in _TYPES:
        return dict(sorted({**constraints, "items": _type(args[0], {}), "type": "array"}.items()))
    if origin is dict and len(args) == 2 and args[0] is str:
        values: Any = True if args[1] is Any else _type(args[1], {})
        return {"additionalProperties": values, "type": "object"}
    raise _NotPlain
