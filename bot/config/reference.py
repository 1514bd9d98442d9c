"""The configuration reference, read from the models: one entry per key of the file.

``tables()`` walks ``Config`` the way a file is written: each table with its own
keys, then the tables inside it (``[hardware.gpio.NAME]``, ``[[triggers]]``), and
the chat channels in the order ``bot.core.channel_registry`` names them. An entry
holds what a reader needs: the key's type in words, its default written as TOML,
its limits, and the description from the model's ``Field(description=...)``.
``pinclaw config reference`` renders the tables as the site's page and
``pinclaw config explain KEY`` prints one of them (``find`` looks it up).
"""

from __future__ import annotations

import inspect
import json
import re
import types
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from bot.config.base import made_default
from bot.config.triggers import ONLY_FOR

PLACEHOLDER = "NAME"
"""Stands for a name the file chooses: ``[agents.NAME]``, ``[browser.profiles.NAME]``."""

_WORDS = {bool: "true or false", int: "integer", float: "number", str: "string"}
_SEGMENT = re.compile(r'"[^"]*"|[^.\s\[\]"]+')


@dataclass(frozen=True, slots=True)
class Entry:
    """One key: its table, type in words, default as TOML, limits and description."""

    table: str  # as a file writes it: "[home_assistant]", "[[triggers]]"
    key: str
    path: str  # dotted: "home_assistant.allow", "browser.profiles.NAME.hosts"
    kind: str  # "list of strings", "true or false", 'one of "a", "b"'
    default: str  # TOML text, "required", or "not set"
    limits: tuple[str, ...]  # "≥ 0", "at least 1 item"
    description: str
    only_for: tuple[str, ...] = ()  # the trigger sources that have this key

    @property
    def name(self) -> str:
        """How prose writes the key: ``[home_assistant] allow``."""
        return f"{self.table} {self.key}"

    @property
    def anchor(self) -> str:
        """The key's anchor on the reference page."""
        return anchor(self.path)


@dataclass(frozen=True, slots=True)
class Table:
    """One table of the file, its description and its own keys (not its tables')."""

    name: str  # "[browser.profiles.NAME]", "[[triggers]]"
    path: str  # "browser.profiles.NAME", "triggers"
    description: str
    entries: tuple[Entry, ...]

    @property
    def anchor(self) -> str:
        """The table's anchor on the reference page."""
        return anchor(self.path)


def anchor(path: str) -> str:
    """A dotted path as a page anchor: lower case, anything but a-z, 0-9 and _ a dash."""
    return re.sub(r"[^a-z0-9_]+", "-", path.lower()).strip("-")


def tables() -> list[Table]:
    """Every table of the configuration, in the order of the models' fields."""
    from bot.config import Config

    found: list[Table] = []
    _walk(Config, "", False, "", found)
    return found


def entries(every: list[Table] | None = None) -> list[Entry]:
    """Every key of the configuration, table after table."""
    return [entry for table in (tables() if every is None else every) for entry in table.entries]


def _walk(model: type[BaseModel], path: str, many: bool, about: str, found: list[Table]) -> None:
    """Add ``model``'s table at ``path`` (an array of tables when ``many``), then its tables."""
    name = f"[[{path}]]" if many else f"[{path}]"
    inner: list[tuple[type[BaseModel], str, bool, str]] = []
    keys: list[Entry] = []
    # Keys a channel's model has but refuses in a file (the web chat's access keys).
    refused: tuple[str, ...] = getattr(model, "refused_keys", ())
    for field_name, field in model.model_fields.items():
        key = field.alias or field_name
        where = f"{path}.{key}" if path else key
        held = _table_in(field.annotation)
        if path == "" and key == "channels":
            inner += [(m, f"channels.{n}", False, "") for n, m in _channel_models()]
        elif held is not None:
            table, shape = held
            inner.append((table, where + shape, shape == "[]", field.description or ""))
        elif field_name not in refused:
            only = ONLY_FOR.get(key, ()) if path == "triggers" else ()
            keys.append(_entry(name, where, key, field, only))
    if path:
        text = "\n\n".join(part for part in (_summary(model), about.strip()) if part)
        found.append(Table(name, path, text, tuple(keys)))
    for table, where, is_many, text in inner:
        _walk(table, where.removesuffix("[]"), is_many, text, found)


def _table_in(annotation: Any) -> tuple[type[BaseModel], str] | None:
    """The model of a key that holds tables, and how: ``""`` one table, ``".NAME"`` a
    table per name, ``"[]"`` an array of tables; None for a plain value."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        values = [a for a in args if a is not type(None)]
        return _table_in(values[0]) if len(values) == 1 else None
    if origin is dict and _is_model(args[1]):
        return args[1], f".{PLACEHOLDER}"
    if origin is list and _is_model(args[0]):
        return args[0], "[]"
    return (annotation, "") if _is_model(annotation) else None


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _channel_models() -> list[tuple[str, type[BaseModel]]]:
    from bot.core.channel_registry import CHANNELS, settings_model

    return [(name, settings_model(name)) for name in CHANNELS]


def _summary(model: type[BaseModel]) -> str:
    """The first paragraph of the model's docstring, without a leading ``[table]``: label."""
    doc = inspect.cleandoc(model.__dict__.get("__doc__") or "")
    first = " ".join(doc.split("\n\n", 1)[0].split())
    first = re.sub(r"^``\[[^`]*\]``:\s*", "", first)
    return first[:1].upper() + first[1:]


def _entry(table: str, path: str, key: str, field: FieldInfo, only: tuple[str, ...]) -> Entry:
    secret = SecretStr in _leaves(field.annotation)
    return Entry(
        table=table,
        key=key,
        path=path,
        kind=human_type(field.annotation),
        default=_default(field, secret),
        limits=_limits(field),
        description=" ".join((field.description or "").split()),
        only_for=only,
    )


def _leaves(annotation: Any) -> list[Any]:
    args = get_args(annotation)
    return [leaf for arg in args for leaf in _leaves(arg)] if args else [annotation]


def human_type(annotation: Any) -> str:
    """A type in words: "integer", "list of strings", 'one of "a", "b"', "…, or not set"."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        values = [a for a in args if a is not type(None)]
        words = ", or ".join(human_type(a) for a in values)
        return f"{words}, or not set" if len(values) < len(args) else words
    if origin is Literal:
        return "one of " + ", ".join(toml_value(a) for a in args)
    if origin is list:
        return f"list of {_plural(human_type(args[0]))}"
    if origin is dict:
        return f"table of {_plural(human_type(args[1]))}"
    if annotation is SecretStr:
        return "secret string"
    return _WORDS.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _plural(words: str) -> str:
    return "true or false values" if words == "true or false" else f"{words}s"


def toml_value(value: Any) -> str:
    """``value`` as TOML writes it: ``true``, ``10``, ``"info"``, ``[]``, ``{ a = "b" }``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        pairs = ", ".join(f"{_toml_key(str(k))} = {toml_value(v)}" for k, v in value.items())
        return f"{{ {pairs} }}" if pairs else "{}"
    return json.dumps(str(value), ensure_ascii=False)  # a TOML basic string, escapes and all


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else toml_value(key)


def _default_value(field: FieldInfo) -> Any:
    return made_default(field) if field.default_factory is not None else field.default


def _default(field: FieldInfo, secret: bool) -> str:
    if field.is_required():
        return "required"
    value = _default_value(field)
    if value is None:
        return "not set"
    return "set (not shown)" if secret else toml_value(value)


def _limits(field: FieldInfo) -> tuple[str, ...]:
    """The bounds in the field's metadata, in words."""
    values = [a for a in get_args(field.annotation) if a is not type(None)]
    plain = values[0] if get_origin(field.annotation) in (Union, types.UnionType) else None
    unit = "character" if (plain or field.annotation) is str else "item"
    words: list[str] = []
    for item in field.metadata:
        if isinstance(item, annotated_types.Ge):
            words.append(f"≥ {item.ge}")
        elif isinstance(item, annotated_types.Gt):
            words.append(f"> {item.gt}")
        elif isinstance(item, annotated_types.Le):
            words.append(f"≤ {item.le}")
        elif isinstance(item, annotated_types.Lt):
            words.append(f"< {item.lt}")
        elif isinstance(item, annotated_types.MinLen):
            words.append(f"at least {_count(item.min_length, unit)}")
        elif isinstance(item, annotated_types.MaxLen):
            words.append(f"at most {_count(item.max_length, unit)}")
    return tuple(words)


def _count(number: int, unit: str) -> str:
    return f"{number} {unit}" if number == 1 else f"{number} {unit}s"


def segments(text: str) -> list[str]:
    """A key as written by a person, in lower-case parts: ``[channels.telegram] token``,
    ``channels.telegram.token`` and ``channels telegram token`` all give the same three."""
    return [part.strip('"').lower() for part in _SEGMENT.findall(text)]


def find(text: str, every: list[Table]) -> Entry | Table | None:
    """The key or table ``text`` names; ``NAME`` in a path matches any name, and a
    path naming fewer of them wins (``hardware.i2c`` is that table, not a device)."""
    wanted = segments(text)
    best: tuple[int, Entry | Table] | None = None
    for table in every:
        items: list[Entry | Table] = [table, *table.entries]
        for item in items:
            score = _matches(wanted, item.path.split("."))
            if score is not None and (best is None or score < best[0]):
                best = (score, item)
    return None if best is None else best[1]


def _matches(wanted: list[str], path: list[str]) -> int | None:
    """How many ``NAME`` parts ``wanted`` filled with a name to match ``path``; None: no match."""
    if len(wanted) != len(path):
        return None
    filled = 0
    for asked, part in zip(wanted, path, strict=True):
        if part == PLACEHOLDER:
            filled += asked != PLACEHOLDER.lower()
        elif asked != part.lower():
            return None
    return filled


def named_by(text: str, every: list[Table]) -> list[Entry | Table]:
    """Every key or table ``text`` names when a table's name in it is written ``NAME``
    (as the docs write ``[channels.NAME] allowed_users``): each channel's key."""
    parts = [part.strip('"') for part in _SEGMENT.findall(text)]
    wild = [part == PLACEHOLDER for part in parts]
    if not any(wild):
        return []
    found: list[Entry | Table] = []
    for table in every:
        items: list[Entry | Table] = [table, *table.entries]
        for item in items:
            path = item.path.split(".")
            if len(path) != len(parts) or (isinstance(item, Entry) and wild[-1]):
                continue  # NAME stands for a table's name, never for a key's
            pairs = zip(wild, parts, path, strict=True)
            if all(w or p == PLACEHOLDER or p.lower() == a.lower() for w, a, p in pairs):
                found.append(item)
    return found


def tables_under(text: str, every: list[Table]) -> list[Table]:
    """The tables inside the one ``text`` names (``channels``: each channel's table)."""
    wanted = segments(text)
    return [t for t in every if _matches(wanted, t.path.split(".")[: len(wanted)]) is not None]
