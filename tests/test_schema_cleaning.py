"""Tool schemas from real pydantic models, cleaned for each provider strategy."""

from __future__ import annotations

import copy
import datetime
import enum
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from bot.providers.schema import MAX_REF_EXPANSIONS, SchemaStrategy, clean_schema

STRATEGIES: tuple[SchemaStrategy, ...] = ("openai", "anthropic", "gemini", "conservative")
# The keys of Gemini's Schema object that clean_schema may emit.
GEMINI_NODE_KEYS = {"type", "format", "description", "nullable", "enum", "properties", "required"}
GEMINI_BOUNDS = {"items", "minItems", "maxItems", "minimum", "maximum", "minLength", "maxLength"}
GEMINI_KEYS = GEMINI_NODE_KEYS | GEMINI_BOUNDS | {"pattern"}


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    """A postal address."""

    street: str
    zip_code: str | None = None


class Node(BaseModel):
    """One node of a tree."""

    name: str
    children: list[Node] = []


class Cat(BaseModel):
    kind: Literal["cat"] = "cat"
    lives: int = 9


class Dog(BaseModel):
    kind: Literal["dog"] = "dog"
    good: bool = True


class Args(BaseModel):
    title: str = Field(description="A field that happens to be called title.")
    query: str = Field(description="What to look for.", min_length=1, max_length=200)
    limit: int = Field(10, ge=1, le=50)
    mode: Literal["fast", "thorough"] = "fast"
    level: Literal[1, 2, 3] = 1
    color: Color = Color.RED
    maybe_color: Color | None = None
    home: Address
    work: Address | None = Field(None, description="Where the user works, if known.")
    past: list[Address] = []
    when: datetime.datetime | None = None
    day: datetime.date | None = None
    key: int | str = 0
    ratio: int | float = 1
    pet: Cat | Dog | None = None
    tree: Node | None = None
    tags: dict[str, int] = {}
    fixed: Literal["only"] = "only"
    positive: int = Field(1, gt=0)


def schema_nodes(node: Any) -> Iterator[dict[str, Any]]:
    """Every schema object in ``node``: property names are not schema keys."""
    if not isinstance(node, dict):
        return
    yield node
    for key in ("properties", "$defs", "patternProperties"):
        for sub in (node.get(key) or {}).values():
            yield from schema_nodes(sub)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for sub in node.get(key) or ():
            yield from schema_nodes(sub)
    for key in ("items", "additionalProperties", "not"):
        yield from schema_nodes(node.get(key))


def all_keys(schema: dict[str, Any]) -> set[str]:
    return {key for node in schema_nodes(schema) for key in node}


def depth(node: dict[str, Any]) -> int:
    """How many times the recursive ``children`` field is expanded below ``node``."""
    items = node.get("properties", {}).get("children", {}).get("items")
    return 0 if items is None or "properties" not in items else 1 + depth(items)


@pytest.fixture
def args_schema() -> dict[str, Any]:
    return Args.model_json_schema()


# --- every strategy -----------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_refs_defs_and_titles_are_gone(
    args_schema: dict[str, Any], strategy: SchemaStrategy
) -> None:
    assert "$defs" in args_schema and "title" in all_keys(args_schema)  # the input has them
    cleaned = clean_schema(args_schema, strategy)
    keys = all_keys(cleaned)
    assert not {"$ref", "$defs", "title", "definitions", "discriminator"} & keys
    assert cleaned["type"] == "object"
    assert "title" in cleaned["properties"]  # a property named "title" is kept
    assert cleaned["properties"]["home"]["properties"]["street"] == {"type": "string"}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_input_is_never_changed(args_schema: dict[str, Any], strategy: SchemaStrategy) -> None:
    before = copy.deepcopy(args_schema)
    cleaned = clean_schema(args_schema, strategy)
    assert args_schema == before
    # Nothing mutable is shared: changing the result leaves the input alone.
    for node in list(schema_nodes(cleaned)):
        for value in node.values():
            if isinstance(value, list):
                value.append("x")
        node.clear()
    assert args_schema == before


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("schema", [{}, {"type": "object"}, {"title": "NoArgs"}])
def test_top_level_is_always_an_object_with_properties(
    schema: dict[str, Any], strategy: SchemaStrategy
) -> None:
    assert clean_schema(schema, strategy) == {"type": "object", "properties": {}}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_recursive_model_is_cut_off_with_description(strategy: SchemaStrategy) -> None:
    cleaned = clean_schema(Node.model_json_schema(), strategy)
    # The top level uses one expansion of Node; the rest are nested children.
    assert depth(cleaned) == MAX_REF_EXPANSIONS - 1
    stub: dict[str, Any] = cleaned
    for _ in range(MAX_REF_EXPANSIONS):
        stub = stub["properties"]["children"]["items"]
    assert stub == {"type": "object", "description": "One node of a tree."}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_dangling_reference_becomes_an_object_stub(strategy: SchemaStrategy) -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/Missing", "description": "kept"}},
    }
    assert clean_schema(schema, strategy)["properties"]["x"] == {
        "type": "object",
        "description": "kept",
    }


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_reference_siblings_win_over_the_definition(strategy: SchemaStrategy) -> None:
    cleaned = clean_schema(Args.model_json_schema(), strategy)
    work = cleaned["properties"]["work"]
    assert work["description"] == "Where the user works, if known."
    inlined = work["anyOf"][0] if strategy in ("openai", "anthropic") else work
    assert inlined["properties"]["street"] == {"type": "string"}


# --- openai and anthropic -----------------------------------------------------


@pytest.mark.parametrize("strategy", ["openai", "anthropic"])
def test_full_json_schema_strategies_keep_the_rest(
    args_schema: dict[str, Any], strategy: SchemaStrategy
) -> None:
    props = clean_schema(args_schema, strategy)["properties"]
    assert props["maybe_color"]["anyOf"] == [
        {"enum": ["red", "blue"], "type": "string"},
        {"type": "null"},
    ]
    assert props["limit"] == {"default": 10, "maximum": 50, "minimum": 1, "type": "integer"}
    assert props["day"]["anyOf"][0] == {"format": "date", "type": "string"}
    assert props["tags"]["additionalProperties"] == {"type": "integer"}
    assert props["fixed"]["const"] == "only"


# --- conservative -------------------------------------------------------------


def test_conservative_flattens_optional_and_drops_risky_keys(args_schema: dict[str, Any]) -> None:
    cleaned = clean_schema(args_schema, "conservative")
    props = cleaned["properties"]
    assert not {"default", "format", "additionalProperties", "const"} & all_keys(cleaned)
    assert props["maybe_color"] == {"enum": ["red", "blue"], "type": "string"}
    assert props["work"]["type"] == "object"
    assert props["home"]["properties"]["zip_code"] == {"type": "string"}
    assert props["day"] == {"type": "string", "description": "(format: date)"}
    assert props["fixed"] == {"type": "string", "enum": ["only"]}
    assert props["level"] == {"enum": [1, 2, 3], "type": "integer"}
    assert props["past"]["items"]["required"] == ["street"]
    assert cleaned["required"] == ["title", "query", "home"]
    # A real union stays a union; only its null variant would be removed.
    assert props["key"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert "anyOf" in props["pet"] and len(props["pet"]["anyOf"]) == 3


def test_conservative_reads_type_lists_without_null() -> None:
    schema = {"properties": {"a": {"type": ["string", "null"]}, "b": {"type": ["integer"]}}}
    props = clean_schema(schema, "conservative")["properties"]
    assert props == {"a": {"type": "string"}, "b": {"type": "integer"}}


# --- gemini -------------------------------------------------------------------


def test_gemini_keeps_only_its_subset(args_schema: dict[str, Any]) -> None:
    cleaned = clean_schema(args_schema, "gemini")
    assert all_keys(cleaned) <= GEMINI_KEYS
    for node in schema_nodes(cleaned):
        assert isinstance(node["type"], str)
        if "enum" in node:
            assert node["type"] == "string"
            assert all(isinstance(value, str) for value in node["enum"])
        if node["type"] != "object":
            assert "properties" not in node and "required" not in node


def test_gemini_optional_becomes_nullable(args_schema: dict[str, Any]) -> None:
    props = clean_schema(args_schema, "gemini")["properties"]
    assert props["maybe_color"] == {"type": "string", "nullable": True, "enum": ["red", "blue"]}
    work = props["work"]
    assert work["nullable"] is True
    assert work["description"] == "Where the user works, if known."
    assert work["required"] == ["street"]
    assert props["home"]["properties"]["zip_code"] == {"type": "string", "nullable": True}
    assert props["when"] == {"type": "string", "format": "date-time", "nullable": True}
    assert props["day"] == {"type": "string", "description": "(format: date)", "nullable": True}


def test_gemini_unions_follow_the_documented_rule(args_schema: dict[str, Any]) -> None:
    props = clean_schema(args_schema, "gemini")["properties"]
    assert props["key"] == {"type": "string"}  # int | str: scalars → string
    assert props["ratio"] == {"type": "number"}  # int | float: numeric → number
    pet = props["pet"]  # Cat | Dog | None: the first variant, nullable
    assert pet["nullable"] is True
    assert set(pet["properties"]) == {"kind", "lives"}
    assert pet["properties"]["kind"] == {"type": "string", "enum": ["cat"]}


def test_gemini_merges_string_enum_unions() -> None:
    schema = {
        "properties": {
            "pick": {
                "anyOf": [{"enum": ["a", "b"]}, {"const": "c"}, {"type": "null"}],
                "description": "Which one.",
            }
        }
    }
    assert clean_schema(schema, "gemini")["properties"]["pick"] == {
        "type": "string",
        "description": "Which one.",
        "nullable": True,
        "enum": ["a", "b", "c"],
    }


def test_gemini_keeps_numeric_choices_typed(args_schema: dict[str, Any]) -> None:
    props = clean_schema(args_schema, "gemini")["properties"]
    # pydantic refuses "1" for Literal[1], so the values go to the description.
    assert props["level"] == {"type": "integer", "description": "(one of 1, 2, 3)"}
    assert props["fixed"] == {"type": "string", "enum": ["only"]}
    assert props["positive"] == {"type": "integer", "minimum": 1}
    assert props["limit"] == {"type": "integer", "minimum": 1, "maximum": 50}
    assert props["tags"] == {"type": "object"}


def test_gemini_type_lists_formats_and_odd_shapes() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": ["string", "null"], "format": "email"},
            "b": {"type": "integer", "format": "int64", "exclusiveMaximum": 10},
            "c": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
            "d": {},
            "e": {"allOf": [{"$ref": "#/$defs/E"}], "description": "Outer."},
            "f": {"type": "string", "properties": {"x": {"type": "string"}}},
        },
        "required": ["a", "ghost"],
        "additionalProperties": False,
        "$defs": {"E": {"type": "object", "properties": {"x": {"type": "number"}}}},
    }
    cleaned = clean_schema(schema, "gemini")
    props = cleaned["properties"]
    assert props["a"] == {"type": "string", "description": "(format: email)", "nullable": True}
    assert props["b"] == {"type": "integer", "format": "int64", "maximum": 9}
    assert props["c"] == {"type": "array", "items": {"type": "integer"}}
    assert props["d"] == {"type": "string"}
    assert props["e"] == {
        "type": "object",
        "description": "Outer.",
        "properties": {"x": {"type": "number"}},
    }
    assert props["f"] == {"type": "string"}
    assert cleaned["required"] == ["a"]
    assert "additionalProperties" not in cleaned


def test_all_of_is_kept_for_full_json_schema_and_merged_otherwise() -> None:
    schema = {
        "properties": {
            "p": {
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"type": "object", "properties": {"b": {"type": "integer"}}},
                ]
            }
        }
    }
    assert "allOf" in clean_schema(schema, "openai")["properties"]["p"]
    for strategy in ("gemini", "conservative"):
        merged = clean_schema(schema, strategy)["properties"]["p"]
        assert merged == {
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
            "required": ["a"],
        }
