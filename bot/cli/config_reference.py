"""``pinclaw config reference`` and ``pinclaw config explain KEY``: the configuration
reference (``bot.config.reference``) as the site's Markdown page, or one entry as
plain text for a terminal.

The page is ``docs/reference/configuration.md``; regenerate it with
``pinclaw config reference > docs/reference/configuration.md``.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import textwrap

from bot.config.reference import (
    PLACEHOLDER,
    Entry,
    Table,
    find,
    named_by,
    segments,
    tables,
    tables_under,
)
from bot.core.errors import UsageError

PAGE = "docs/reference/configuration.md"
WIDTH = 80
SHOWN = 60  # characters of an unknown key repeated in the error
_CODE = re.compile(r"``(.+?)``|`([^`]+)`")
_TOML_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')

INTRO = """\
# Configuration reference

PinClaw reads one TOML file: `~/.pinclaw/config.toml`, or the file that `--config PATH`
or `$PINCLAW_CONFIG` names. This page lists every table and key of that file with its
type, its default, its limits and what it does.

The page is generated from the configuration models by `pinclaw config reference`, so it
says what the code accepts. Two more commands read the same models:

- `pinclaw config check [PATH]` validates a file and names every mistake, one line each.
- `pinclaw config explain KEY` prints one key's entry in the terminal, for example
  `pinclaw config explain home_assistant.allow`.

A key left out takes its default. An unknown key or a value of the wrong type is an
error: PinClaw names the key and does not start, so a typo never silently turns a
setting off. Any string value may refer to an environment variable: `"${NAME}"`, or
`"${NAME:-fallback}"` for a value to use when `NAME` is not set. Keep secrets such as API
keys and tokens there rather than in the file. `pinclaw.example.toml`, at the top of the
source tree, is a complete example file with comments.

`NAME` in a table's name stands for a name you choose: `[agents.researcher]`,
`[browser.profiles.grafana]`. A table written with double brackets, like `[[triggers]]`,
is an array of tables: write the header once for each trigger.
"""


def print_reference(args: argparse.Namespace) -> int:
    """The whole reference page on stdout, as UTF-8 whatever the terminal's encoding:
    it is the page's file (``pinclaw config reference > docs/...``)."""
    text = page()
    raw = getattr(sys.stdout, "buffer", None)
    if raw is None:  # a stream without bytes underneath: it takes text
        sys.stdout.write(text)
    else:
        sys.stdout.flush()
        raw.write(text.encode("utf-8"))
    return 0


def print_explanation(args: argparse.Namespace) -> int:
    """The entry of the key the words name, or of each key named; an unknown key is a
    usage error."""
    print(explain_all(args.key))
    return 0


# -- the page ------------------------------------------------------------------------


def page(every: list[Table] | None = None) -> str:
    """The Markdown of ``docs/reference/configuration.md``."""
    parts = [INTRO]
    for table in tables() if every is None else every:
        parts.append(f"## {table.name} {{#{table.anchor}}}\n")
        parts += [f"{_markdown(text)}\n" for text in table.description.split("\n\n") if text]
        parts += [_markdown_entry(entry) for entry in table.entries]
    return "\n".join(parts)


def _markdown_entry(entry: Entry) -> str:
    kind = _TOML_STRING.sub(lambda m: f"`{m[0]}`", entry.kind)
    long = len(entry.default) > 60
    if entry.default in ("required", "not set", "set (not shown)"):
        default = entry.default
    else:
        default = "written out below" if long else f"`{entry.default}`"
    lines = [f"### {entry.name} {{#{entry.anchor}}}\n", f"- Type: {kind}", f"- Default: {default}"]
    if entry.limits:
        lines.append(f"- Limits: {_escape(', '.join(entry.limits))}")
    if entry.only_for:
        lines.append(f"- Only for: {' and '.join(entry.only_for)} triggers")
    lines.append("")
    if long:
        lines += ["```toml", *_wrapped_toml(entry), "```", ""]
    if entry.description:
        lines += [_markdown(entry.description), ""]
    return "\n".join(lines)


def _wrapped_toml(entry: Entry) -> list[str]:
    """A long default as the example file writes it: ``key = [`` then rows of items."""
    text = entry.default
    if not (text.startswith("[") and text.endswith("]")):
        return [f"{entry.key} = {text}"]
    items = [item + "," for item in _TOML_STRING.findall(text)] or [text[1:-1]]
    rows = textwrap.wrap(" ".join(items), 68, break_long_words=False, break_on_hyphens=False)
    return [f"{entry.key} = [", *(f"    {row}" for row in rows), "]"]


def _markdown(text: str) -> str:
    """Prose for Markdown: code spans kept (RST's double backticks made single), and
    everything else that Markdown or attr_list would read as markup escaped."""
    out: list[str] = []
    at = 0
    for match in _CODE.finditer(text):
        out.append(_escape(text[at : match.start()]))
        out.append(f"`{match[1] or match[2]}`")
        at = match.end()
    out.append(_escape(text[at:]))
    return "".join(out)


def _escape(text: str) -> str:
    text = re.sub(r"([\\*\[\]{}])", r"\\\1", text)
    text = re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\_", text)
    return text.replace("<", "&lt;").replace(">", "&gt;")


# -- one entry, as plain text --------------------------------------------------------


def explain_all(words: list[str], every: list[Table] | None = None) -> str:
    """The words as one key (``channels telegram token``), else each word as a key of its
    own (``provider.kind web.listen``), their entries one after another."""
    known = tables() if every is None else every
    try:
        return explain(" ".join(words), known)
    except UsageError as joined:
        if len(words) < 2:
            raise
        try:
            return "\n\n".join(explain(word, known) for word in words)
        except UsageError:
            raise joined from None


def explain(text: str, every: list[Table] | None = None) -> str:
    """The plain-text entry of the key or table ``text`` names (``UsageError`` if none)."""
    known = tables() if every is None else every
    if not any(segments(text)):
        raise UsageError("name a config key, like home_assistant.allow or [channels.telegram]")
    found = find(text, known)
    if isinstance(found, Entry):
        return _plain_entry(found)
    if isinstance(found, Table):
        return _plain_table(found, known)
    under = tables_under(text, known)
    if len(under) == 1:
        return _plain_table(under[0], known)
    if under:
        return _listed(f"Tables under {_above(under[0], text)}:", under)
    named = named_by(text, known)
    keys = [item for item in named if isinstance(item, Entry)]
    if keys and len({(e.kind, e.default, e.limits, e.description) for e in keys}) == 1:
        inside = ", ".join(e.table for e in keys)
        return _plain_entry(keys[0], _as_written(keys[0], text), f"The same key in {inside}.")
    if named:
        return _listed(f"{_as_written(named[0], text)} is one of:", named)
    raise UsageError(_unknown(text, known))


def _above(table: Table, text: str) -> str:
    """The part of ``table``'s path that ``text`` named: ``agents`` of ``agents.NAME``.
    Made from the models' names, so nothing typed is echoed."""
    return ".".join(table.path.split(".")[: len(segments(text))])


def _as_written(item: Entry | Table, text: str) -> str:
    """``item``'s name with ``NAME`` where ``text`` wrote it: ``[channels.NAME] token``."""
    path = item.path.split(".")
    for at, part in enumerate(segments(text)):
        if part == PLACEHOLDER.lower() and at < len(path):
            path[at] = PLACEHOLDER
    many = item.name.startswith("[[")
    table = ".".join(path[:-1] if isinstance(item, Entry) else path)
    name = f"[[{table}]]" if many else f"[{table}]"
    return f"{name} {path[-1]}" if isinstance(item, Entry) else name


def _listed(title: str, items: list[Table] | list[Entry | Table]) -> str:
    """A line per table or key, with its first sentence or its type and default."""
    names = [item.name for item in items]
    width = max(len(name) for name in names)
    rows = []
    for name, item in zip(names, items, strict=True):
        text = _plain(item.description.split("\n\n")[0])
        if isinstance(item, Entry):
            text = f"{item.kind}; {_said(item.default)}"
        rows.append(_fill(text, f"  {name:<{width}}  ", " " * (width + 4)))
    return "\n".join([title, *rows])


def _plain_entry(entry: Entry, name: str = "", note: str = "") -> str:
    fields = [("Type", entry.kind), ("Default", entry.default)]
    if entry.limits:
        fields.append(("Limits", ", ".join(entry.limits)))
    if entry.only_for:
        fields.append(("Only for", f"{' and '.join(entry.only_for)} triggers"))
    lines = [name or entry.name]
    for label, value in fields:
        lines.append(_fill(value, f"{label + ':':<10}", " " * 10))
    if entry.description:
        lines += ["", _fill(_plain(entry.description))]
    if note:
        lines += ["", _fill(note)]
    lines += ["", f"More: {PAGE}#{entry.anchor}"]
    return "\n".join(lines)


def _plain_table(table: Table, every: list[Table]) -> str:
    lines = [table.name]
    lines += [_fill(_plain(text)) for text in table.description.split("\n\n") if text]
    if table.entries:
        width = max(len(e.key) for e in table.entries)
        lines += ["", "Keys:"]
        for entry in table.entries:
            said = _said(entry.default)
            lines.append(
                _fill(f"{entry.kind}; {said}", f"  {entry.key:<{width}}  ", " " * (width + 4))
            )
    inside = [t.name for t in every if t.path.startswith(table.path + ".")]
    if inside:
        lines += ["", _fill(f"Tables in it: {', '.join(inside)}", "", "  ")]
    lines += ["", f"More: {PAGE}#{table.anchor}"]
    return "\n".join(lines)


def _said(default: str) -> str:
    short = textwrap.shorten(default, 40, placeholder=" …")
    return short if short == "required" else f"default {short}"


def _unknown(text: str, every: list[Table]) -> str:
    """The one line for a key that does not exist, with the nearest one. What was typed
    is shown shortened and escaped (repr), so no control character reaches the terminal."""
    shown = text.strip()
    shown = shown if len(shown) <= SHOWN else shown[: SHOWN - 1] + "…"
    key, _, value = text.partition("=")
    meant = find(key, every) or next(iter(tables_under(key, every)), None)
    if value and meant is not None:
        plain = meant.path if isinstance(meant, Entry) else _above(meant, key)
        return (
            f"no config key {shown!r}: name the key without a value, "
            f"as in `pinclaw config explain {plain}`"
        )
    names = {t.path.lower(): t.name for t in every}
    names |= {e.path.lower(): e.name for t in every for e in t.entries}
    asked = ".".join(segments(text))
    close = difflib.get_close_matches(asked, names, n=1, cutoff=0.6)
    if not close and len(asked) >= 3:  # a beginning: "home" for [home_assistant]
        close = sorted((p for p in names if p.startswith(asked)), key=len)[:1]
    hint = f"did you mean {names[close[0]]}?" if close else "`pinclaw config reference` lists them"
    return f"no config key {shown!r}; {hint}"


def _plain(text: str) -> str:
    """Prose for a terminal: code spans become their text."""
    return _CODE.sub(lambda m: m[1] or m[2], text)


def _fill(text: str, first: str = "", rest: str = "") -> str:
    return textwrap.fill(
        text,
        WIDTH,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )
