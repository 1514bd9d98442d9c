"""Tool JSON schemas cleaned per provider, in one place.

Input is what pydantic v2's ``model_json_schema()`` makes of a tool's argument
model. One pass builds a new tree (the input is never changed) by these rules.

Every strategy:
  * ``$ref`` is inlined (local ``#/...`` pointers; the referring node's own keys
    such as ``description`` win over the definition's). A definition is inlined
    at most ``MAX_REF_EXPANSIONS`` times along one path, so a recursive model
    ends in ``{"type": "object"}`` keeping the description. An unresolvable
    reference becomes the same stub.
  * ``$defs``, ``definitions``, every other ``$`` keyword, ``title`` and
    ``discriminator`` (its mapping points into the dropped ``$defs``) go.
  * The top level is ``{"type": "object", "properties": {...}, ...}``.

``openai`` and ``anthropic`` keep everything else: both accept full JSON schema.

``conservative`` (llama.cpp, vLLM, LM Studio, Ollama and other unknowns):
  * ``Optional[X]`` (``anyOf`` of X and null) becomes plain X; a type list drops
    ``"null"``. Real unions keep ``anyOf``: llama.cpp's grammar and vLLM's
    guided decoding both handle it, and flattening would lose information.
  * ``allOf`` is merged into its node; ``const`` becomes a one-value ``enum``.
  * ``format`` goes (a guided-decoding backend may refuse a format it does not
    know) and is kept as a hint in the description, e.g. ``(format: date)``.
  * ``default`` goes: guided decoding does not use it, optional fields are
    already the ones missing from ``required``, and the most common default,
    ``null`` from ``Optional``, tells a model nothing; small local contexts
    are better spent on descriptions.
  * ``additionalProperties`` goes; ``enum``, ``description``, ``required``,
    ``items`` and bounds stay.

``gemini``: as conservative, then every union is flattened (``anyOf`` and
``oneOf`` alike; a null variant adds ``nullable: true``):
  * one non-null variant → that variant;
  * all variants string enums → one string enum of all their values;
  * all variants plain scalars → ``number`` if all are numeric, else ``string``;
  * otherwise → the first variant (pydantic keeps declaration order, so the
    tool author decides which shape Gemini sees).
Then each node is reduced to Gemini's subset (see ``schema_gemini``).

Keywords no rule mentions are kept by every strategy but gemini, so a schema
these rules do not foresee still reaches the provider rather than failing here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import unquote

from bot.providers.schema_gemini import combine_types, finish_gemini, is_scalar, string_enum

SchemaStrategy = Literal["openai", "anthropic", "gemini", "conservative"]

MAX_REF_EXPANSIONS = 2
"""How often one definition may be inlined inside itself before it is cut off."""

_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SCHEMA_VALUES = frozenset(
    {"items", "additionalProperties", "not", "if", "then", "else", "contains"}
    | {"propertyNames", "additionalItems", "unevaluatedItems", "unevaluatedProperties"}
)
_ALWAYS_DROPPED = frozenset({"title", "definitions", "discriminator"})
_DROPPED: dict[str, frozenset[str]] = {
    "openai": _ALWAYS_DROPPED,
    "anthropic": _ALWAYS_DROPPED,
    "conservative": _ALWAYS_DROPPED | {"default", "additionalProperties"},
    # Gemini keeps none of these; dropping them here saves walking their subtrees.
    "gemini": _ALWAYS_DROPPED
    | {"default", "examples", "additionalProperties", "patternProperties", "dependentSchemas"}
    | (_SCHEMA_VALUES - {"items"}),
}


def clean_schema(schema: Mapping[str, Any], strategy: SchemaStrategy) -> dict[str, Any]:
    """Return a copy of ``schema`` that the provider behind ``strategy`` accepts."""
    body = _Cleaner(schema, strategy).clean(schema)
    if not isinstance(body, dict):
        body = {}
    properties = body.pop("properties", None)
    body.pop("type", None)
    body.pop("nullable", None)
    if not isinstance(properties, dict):
        properties = {}
        body.pop("required", None)
    return {"type": "object", "properties": properties, **body}


class _Cleaner:
    """One cleaning pass: the root for resolving references and the refs being inlined."""

    __slots__ = ("_active", "_drop", "_resolved", "_root", "_strategy")

    def __init__(self, root: Mapping[str, Any], strategy: SchemaStrategy) -> None:
        self._root = root
        self._strategy = strategy
        self._drop = _DROPPED[strategy]
        self._active: dict[str, int] = {}
        self._resolved: dict[str, Mapping[str, Any] | None] = {}

    def clean(self, node: Any) -> Any:
        """The cleaned copy of one schema node (booleans and odd values are copied)."""
        if not isinstance(node, Mapping):
            return _copy(node)
        if "$ref" in node:
            return self._inline(node)
        if self._strategy in ("gemini", "conservative"):
            if isinstance(node.get("allOf"), list):
                return self._merge_all_of(node)
            for key in ("anyOf", "oneOf"):
                if isinstance(node.get(key), list):
                    flat = self._flatten_union(node, key)
                    if flat is not None:
                        return flat
        return self._finish(self._walk(node))

    def _finish(self, node: dict[str, Any]) -> dict[str, Any]:
        if self._strategy == "gemini":
            return finish_gemini(node)
        if self._strategy == "conservative":
            return _finish_conservative(node)
        return node

    def _walk(self, node: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in self._drop or key.startswith("$"):
                continue
            if key in _SCHEMA_MAPS:
                if isinstance(value, Mapping):
                    out[key] = {name: self.clean(sub) for name, sub in value.items()}
            elif key in _SCHEMA_LISTS or (key == "items" and isinstance(value, list)):
                if isinstance(value, list):
                    out[key] = [self.clean(sub) for sub in value]
            elif key in _SCHEMA_VALUES:
                out[key] = self.clean(value)
            else:
                out[key] = _copy(value)
        return out

    def _inline(self, node: Mapping[str, Any]) -> Any:
        ref = node["$ref"]
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        if not isinstance(ref, str):
            return self.clean(siblings)
        target = self._resolve(ref)
        count = self._active.get(ref, 0)
        if target is None or count >= MAX_REF_EXPANSIONS:
            return self._stub(siblings, target)
        self._active[ref] = count + 1
        try:
            return self.clean({**target, **siblings})
        finally:
            self._active[ref] = count

    def _resolve(self, ref: str) -> Mapping[str, Any] | None:
        if ref in self._resolved:
            return self._resolved[ref]
        found: Any = None
        if ref.startswith("#"):
            found = self._root
            pointer = unquote(ref[1:])
            for token in pointer.split("/")[1:] if pointer else ():
                part = token.replace("~1", "/").replace("~0", "~")
                if isinstance(found, Mapping):
                    found = found.get(part)
                elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
                    found = found[int(part)]
                else:
                    found = None
        target = found if isinstance(found, Mapping) else None
        self._resolved[ref] = target
        return target

    def _stub(
        self, siblings: Mapping[str, Any], target: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        stub: dict[str, Any] = {"type": "object"}
        description = siblings.get("description", (target or {}).get("description"))
        if isinstance(description, str):
            stub["description"] = description
        if siblings.get("nullable") is True:
            stub["nullable"] = True
        return stub

    def _merge_all_of(self, node: Mapping[str, Any]) -> Any:
        items = [item for item in node["allOf"] if isinstance(item, Mapping)]
        rest = {key: value for key, value in node.items() if key != "allOf"}
        if len(items) == 1:
            # The usual case (a reference plus a description): the node's keys win.
            return self.clean({**items[0], **rest})
        # Several parts: properties and required are united, other keys come
        # from the last part that has them, and the node's own keys win.
        merged: dict[str, Any] = {}
        properties: dict[str, Any] = {}
        required: list[Any] = []
        for part in [*(self.clean(item) for item in items), self._walk(rest)]:
            if not isinstance(part, dict):
                continue
            properties.update(part.pop("properties", None) or {})
            required += [name for name in part.pop("required", ()) if name not in required]
            merged.update(part)
        if properties:
            merged["properties"] = properties
        if required:
            merged["required"] = required
        return self._finish(merged)

    def _flatten_union(self, node: Mapping[str, Any], key: str) -> Any:
        variants = node[key]
        rest = {name: value for name, value in node.items() if name != key}
        others = [v for v in variants if isinstance(v, Mapping) and not _is_null(v)]
        nullable = len(others) < len(variants)
        if self._strategy == "conservative":
            if nullable and len(others) == 1:
                return self.clean({**others[0], **rest})
            return None
        if nullable:
            rest["nullable"] = True
        if len(others) == 1:
            return self.clean({**others[0], **rest})
        if not others:
            return self.clean({**rest, "type": "string"})
        cleaned = [self.clean(variant) for variant in others]
        enums = [string_enum(variant) for variant in cleaned]
        if all(values is not None for values in enums):
            union = list(dict.fromkeys(value for values in enums for value in values or ()))
            return self.clean({**rest, "type": "string", "enum": union})
        if all(is_scalar(variant) for variant in cleaned):
            return self.clean({**rest, "type": combine_types([v["type"] for v in cleaned])})
        return self.clean({**others[0], **rest})


def _finish_conservative(node: dict[str, Any]) -> dict[str, Any]:
    kind = node.get("type")
    if isinstance(kind, list):
        kept = [name for name in kind if name != "null"]
        if kept:
            node["type"] = kept[0] if len(kept) == 1 else kept
    if "const" in node:
        node["enum"] = [node.pop("const")]
    fmt = node.pop("format", None)
    if isinstance(fmt, str):
        description = node.get("description")
        hint = f"(format: {fmt})"
        node["description"] = f"{description} {hint}" if isinstance(description, str) else hint
    return node


def _is_null(node: Mapping[str, Any]) -> bool:
    return node.get("type") == "null" or ("const" in node and node["const"] is None)


def _copy(value: Any) -> Any:
    """A copy of plain JSON data, so the result shares nothing mutable with the input."""
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(item) for item in value]
    return value
