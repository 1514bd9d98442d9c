"""Turn a pydantic ``ValidationError`` on the config into lines a person can act on:
one per problem, each naming its key."""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Collection
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")

_TOML_NOUNS = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "an array",
    dict: "a table",
}

_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "list_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
}


def describe_validation_errors(
    exc: ValidationError,
    root: type[BaseModel],
    prefix: str = "",
    skip: Collection[str] = (),
) -> list[str]:
    """Each problem as ``key.path: what is wrong``, one line each.

    Unknown keys come first: a typo is usually why a required key is missing.
    ``prefix`` is the path of ``root`` inside the file, e.g. ``channels.telegram``;
    problems at a key in ``skip`` are left out (they are told another way).
    """
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    # A key missing because it was misspelt is told by the typo's line ("did you mean").
    meant = {
        (*e["loc"][:-1], hint)
        for e in errors
        if e["type"] == "extra_forbidden" and (hint := _suggestion(e, root))
    }
    lines = []
    for error in errors:
        path = ".".join(p for p in (prefix, key_path(error["loc"]) if error["loc"] else "") if p)
        if path in skip or (error["type"] == "missing" and error["loc"] in meant):
            continue
        line = f"{path or '(top level)'}: {_explain(error, root)}"
        if line not in lines:
            lines.append(line)
    return lines


def key_path(loc: tuple[int | str, ...]) -> str:
    """Render a pydantic location as ``a.b[0].c``; a key that is not a bare TOML key
    is quoted as TOML quotes it (``usage.prices."ollama:llama3.2".input_per_million``)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = part if _BARE_KEY.fullmatch(part) else json.dumps(part, ensure_ascii=False)
            out += f".{name}" if out else name
    return out or "(top level)"


def _explain(error: ErrorDetails, root: type[BaseModel]) -> str:
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        hint = _suggestion(error, root)
        if hint:
            return f"unknown key; did you mean '{hint}'?"
        allowed = _allowed_keys(root, error["loc"][:-1])
        return "unknown key" + (f" (allowed here: {', '.join(allowed)})" if allowed else "")
    if kind == "missing":
        parent = _allowed_model(root, error["loc"][:-1])
        field = parent.model_fields.get(str(error["loc"][-1])) if parent else None
        if field is not None and _inner_model(field.annotation) is not None:
            return f"missing required table [{key_path(error['loc'])}]"
        return "missing required key"
    if kind == "literal_error":
        expected = error.get("ctx", {}).get("expected", "")
        return f"expected one of {expected}, got {_show(value)}"
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, got {_show(value)}"
    if kind == "value_error":
        return str(error.get("ctx", {}).get("error", error["msg"]))
    return f"{error['msg'][0].lower()}{error['msg'][1:]}, got {_show(value)}"


def _suggestion(error: ErrorDetails, root: type[BaseModel]) -> str | None:
    """The allowed key an unknown one is probably a typo of."""
    import difflib  # only a config with an unknown key needs it

    allowed = _allowed_keys(root, error["loc"][:-1])
    hint = difflib.get_close_matches(str(error["loc"][-1]), allowed, n=1)
    return hint[0] if hint else None


def _show(value: Any) -> str:
    noun = _TOML_NOUNS.get(type(value))
    if noun is None:
        return repr(value)
    if isinstance(value, list | dict):
        return noun
    shown = repr(value) if isinstance(value, str) else str(value).lower()
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{noun} {shown}"


def _allowed_keys(root: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    model = _allowed_model(root, loc)
    return list(model.model_fields) if model else []


def _allowed_model(root: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The config table model found at ``loc``, if the path leads to one."""
    model: type[BaseModel] | None = root
    named = False  # the last field was a table of tables ([usage.prices.NAME]): skip NAME
    for part in loc:
        if isinstance(part, int) or named:
            named = False
            continue
        field = model.model_fields.get(part) if model else None
        if field is None:
            return None
        model = _inner_model(field.annotation)
        named = get_origin(field.annotation) is dict
    return model


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if _is_model(annotation):
        return typing.cast(type[BaseModel], annotation)
    if get_origin(annotation) is dict:
        return _inner_model(get_args(annotation)[1])
    if get_origin(annotation) in (list, types.UnionType, typing.Union):
        for arg in get_args(annotation):
            found = _inner_model(arg)
            if found is not None:
                return found
    return None


def _is_model(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, BaseModel)
