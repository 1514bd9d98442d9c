"""The configuration reference: complete, described, current, and the example agrees.

The reference (``bot.config.reference``) is read from the pydantic models; the site's
page and ``pinclaw config explain`` are made from it. These tests count its keys
against a walk of the models' JSON schemas, render the page the way MkDocs does,
hold the committed page to what the command prints now, check
``pinclaw.example.toml`` (its tables, its keys and its commented-out keys) against
the same models. The explain command is tested in ``tests/test_config_explain.py``.
"""

from __future__ import annotations

import html
import re
import tomllib
from pathlib import Path
from typing import Any

import markdown  # type: ignore[import-untyped]  # no stubs; Python-Markdown, as MkDocs uses
import pytest
from pydantic import ValidationError

from bot.cli.config_reference import page
from bot.config import parse_config
from bot.config.reference import (
    Entry,
    Table,
    anchor,
    entries,
    find,
    human_type,
    tables,
    tables_under,
    toml_value,
)
from bot.core.channel_registry import CHANNELS, settings_model
from tests.cli_helpers import run

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reference" / "configuration.md"
EXAMPLE = ROOT / "pinclaw.example.toml"
REGENERATE = "pinclaw config reference > docs/reference/configuration.md"
WEB_ONLY_OWNER = {  # ChannelSettings keys the web chat refuses: its one user is the owner
    "allowed_users",
    "allowed_groups",
    "group_mode",
    "keywords",
    "pairing",
    "owner",
    "approvers",
    "approvals_in_dm",
}


@pytest.fixture(scope="module")
def every() -> list[Table]:
    return tables()


# -- complete and described ----------------------------------------------------------


def _schema_keys(schema: dict[str, Any], defs: dict[str, Any], path: str, out: set[str]) -> None:
    """Every key below ``schema``, as dotted paths, read from JSON schema (not model_fields)."""
    for key, prop in schema.get("properties", {}).items():
        where = f"{path}.{key}" if path else key
        options = [o for o in prop.get("anyOf", [prop]) if o.get("type") != "null"]
        held = options[0] if len(options) == 1 else {}
        extra = held.get("additionalProperties")
        if "$ref" in held:
            _schema_keys(defs[held["$ref"].rsplit("/", 1)[1]], defs, where, out)
        elif isinstance(extra, dict) and "$ref" in extra:
            _schema_keys(defs[extra["$ref"].rsplit("/", 1)[1]], defs, f"{where}.NAME", out)
        elif held.get("type") == "array" and "$ref" in held.get("items", {}):
            _schema_keys(defs[held["items"]["$ref"].rsplit("/", 1)[1]], defs, where, out)
        else:
            out.add(where)


def test_the_reference_lists_every_key_of_the_models(every: list[Table]) -> None:
    from bot.config import Config

    schema = Config.model_json_schema()
    del schema["properties"]["channels"]  # a table per channel, from the registry
    expected: set[str] = set()
    _schema_keys(schema, schema.get("$defs", {}), "", expected)
    for name in CHANNELS:
        channel = settings_model(name).model_json_schema()
        _schema_keys(channel, channel.get("$defs", {}), f"channels.{name}", expected)
    listed = [entry.path for entry in entries(every)]
    assert len(listed) == len(set(listed))
    assert expected - set(listed) == {f"channels.web.{key}" for key in WEB_ONLY_OWNER}
    assert set(listed) <= expected
    assert len(listed) > 250  # the walk above found the keys, not an empty schema


def test_the_keys_left_out_are_the_ones_the_web_chat_refuses() -> None:
    model = settings_model("web")
    model.model_validate({})
    for key in WEB_ONLY_OWNER:
        with pytest.raises(ValidationError, match="not used by the web chat"):
            model.model_validate(
                {key: model.model_fields[key].get_default(call_default_factory=True)}
            )


def test_every_key_and_table_has_a_description_that_says_more_than_its_name(
    every: list[Table],
) -> None:
    """Fails while a key's ``Field(description=...)`` is missing: write one in its model."""
    bare = [
        entry.name
        for entry in entries(every)
        if len(entry.description.strip(" .`")) <= len(entry.key)
        or entry.description.strip(" .`").lower() in (entry.key, entry.key.replace("_", " "))
    ]
    assert bare == [], f"{len(bare)} keys without a description: {', '.join(bare)}"
    assert [t.name for t in every if not t.description] == []


# -- the page --------------------------------------------------------------------------


def test_the_page_in_docs_is_what_pinclaw_config_reference_prints(home: Path) -> None:
    printed = run(home, "config", "reference")
    assert (printed.returncode, printed.stderr) == (0, "")
    assert printed.stdout == page()
    assert PAGE.read_text(encoding="utf-8") == printed.stdout, (
        f"docs/reference/configuration.md is stale; regenerate it with `{REGENERATE}`"
    )


def _html(text: str) -> str:
    made: str = markdown.markdown(text, extensions=["attr_list", "toc", "pymdownx.superfences"])
    return made


def _text(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def test_each_key_renders_as_its_own_heading_with_its_anchor_and_words(
    every: list[Table],
) -> None:
    rendered = _html(page(every))
    headings = dict(re.findall(r'<h[23] id="([^"]+)">(.*?)</h[23]>', rendered))
    for table in every:
        assert _text(headings[table.anchor]) == table.name
        for entry in table.entries:
            assert _text(headings[entry.anchor]) == entry.name
    assert len(headings) == len(every) + len(entries(every))
    assert "<em>" not in rendered and "<strong>" not in rendered
    said = _text(rendered)
    missing = [e.name for e in entries(every) if e.description.replace("`", "") not in said]
    assert missing == []


def test_markup_in_a_description_is_shown_as_written() -> None:
    words = "Say {body} at 8 * 2 <tool_call> [x] _y_ \\d+ & `{code}` ``rst``"
    entry = Entry("[t]", "k", "t.k", "string", '""', ("> 0",), words)
    rendered = _html(page([Table("[t]", "t", "A table {x}.", (entry,))]))
    assert "Say {body} at 8 * 2 <tool_call> [x] _y_ \\d+ & {code} rst" in _text(rendered)
    assert "<code>{code}</code>" in rendered and "<code>rst</code>" in rendered
    assert "Limits: &gt; 0" in rendered


def test_a_long_default_is_written_out_as_toml_that_reads_back(every: list[Table]) -> None:
    forbidden = find("security.forbidden_paths", every)
    assert isinstance(forbidden, Entry)
    block = page(every).split(f"{{#{forbidden.anchor}}}")[1].split("```toml\n")[1]
    written = tomllib.loads(block.split("```")[0])["forbidden_paths"]
    assert toml_value(written) == forbidden.default
    assert "/etc" in written and "~/.ssh" in written


# -- the pieces ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("home_assistant.allow", "home_assistant-allow"),
        ("home_assistant", "home_assistant"),
        ("browser.profiles.NAME.hosts", "browser-profiles-name-hosts"),
        ("triggers.source", "triggers-source"),
        ("channels.telegram.token", "channels-telegram-token"),
        ('usage.prices."openai:gpt".x', "usage-prices-openai-gpt-x"),
    ],
)
def test_anchors_follow_the_shared_rule(path: str, expected: str) -> None:
    assert anchor(path) == expected


def test_types_and_defaults_are_said_in_words_and_toml() -> None:
    from typing import Literal

    from pydantic import SecretStr

    assert human_type(int) == "integer"
    assert human_type(list[str] | bool) == "list of strings, or true or false"
    assert human_type(SecretStr | None) == "secret string, or not set"
    assert human_type(dict[str, str]) == "table of strings"
    assert human_type(Literal["a", "\n"]) == 'one of "a", "\\n"'
    assert (
        toml_value({"X-Title": "P", "a b": [1, 2.5, True]})
        == '{ X-Title = "P", "a b" = [1, 2.5, true] }'
    )


def test_entries_carry_type_default_limits_and_source(every: list[Table]) -> None:
    def entry(text: str) -> Entry:
        found = find(text, every)
        assert isinstance(found, Entry), text
        return found

    assert (entry("home_assistant.allow").kind, entry("home_assistant.allow").default) == (
        "list of strings",
        "[]",
    )
    assert entry("provider.kind").default == "required"
    assert entry("provider.max_retries").limits == ("≥ 0", "≤ 10")
    assert entry("browser.profiles.NAME.hosts").limits == ("at least 1 item",)
    assert entry("usage.currency").limits == ("at least 1 character", "at most 8 characters")
    assert entry("channels.telegram.token").default == "required"
    assert entry("home_assistant.token").default == "not set"
    assert entry("triggers.for").name == "[[triggers]] for"  # by its alias, not for_
    assert entry("triggers.secret").only_for == ("webhook",)
    assert entry("triggers.say").only_for == ()


def test_tables_follow_the_models_order_with_channels_from_the_registry(
    every: list[Table],
) -> None:
    names = [t.name for t in every]
    assert names[:2] == ["[general]", "[provider]"]
    assert names.index("[[provider.fallbacks]]") == 2
    assert names[-len(CHANNELS) :] == [f"[channels.{n}]" for n in CHANNELS]
    assert "[agents.NAME.provider]" in names and "[[mcp.servers]]" in names
    assert [t.name for t in tables_under("channels", every)] == names[-len(CHANNELS) :]


# -- the example file --------------------------------------------------------------------

_HEADER = re.compile(r"^(?:#\s?)?\[\[?\s*([^\]#]+?)\s*\]\]?\s*(?:#.*)?$")
_COMMENTED_KEY = re.compile(r"^#\s?([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*\S")


def _quoted(parts: list[str]) -> str:
    return ".".join(f'"{part}"' for part in parts)


def _unknown_keys(value: Any, path: list[str], every: list[Table]) -> list[str]:
    """The dotted paths in a parsed TOML value that are no key or table of the models."""
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [bad for item in value for bad in _unknown_keys(item, path, every)]
    unknown: list[str] = []
    for key, inner in value.items():
        where = [*path, key]
        found = find(_quoted(where), every)
        if isinstance(found, Entry):
            continue
        if found is None and not tables_under(_quoted(where), every):
            unknown.append(".".join(where))
        elif isinstance(inner, dict | list):
            unknown += _unknown_keys(inner, where, every)
    return unknown


def test_every_table_and_key_of_the_example_is_a_key_of_the_models(every: list[Table]) -> None:
    document = tomllib.loads(EXAMPLE.read_text(encoding="utf-8"))
    assert _unknown_keys(document, [], every) == []
    assert _unknown_keys({"home_assistant": {"alow": []}}, [], every) == ["home_assistant.alow"]
    config = parse_config(document, {"OPENAI_API_KEY": "sk-test"}, source=str(EXAMPLE))
    assert config.provider.label == "openai:gpt-4o-mini"


def test_every_commented_out_key_of_the_example_is_a_key_of_the_models(
    every: list[Table],
) -> None:
    table: list[str] = []
    named: list[str] = []
    unknown: list[str] = []
    for number, line in enumerate(EXAMPLE.read_text(encoding="utf-8").splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            table = [p.strip('"') for p in re.findall(r'"[^"]*"|[^.\s"]+', header[1])]
            continue
        key = _COMMENTED_KEY.match(line)
        if key:
            where = _quoted([*table, key[1]])
            named.append(where)
            if find(where, every) is None:
                unknown.append(f"line {number}: [{'.'.join(table)}] {key[1]}")
    assert unknown == []
    assert len(named) > 100  # the commented keys were found: channels, triggers, devices...
