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

from bot.config.reference import Entry, Table, find, segments, tables, tables_under
from bot.core.errors import UsageError

PAGE = "docs/reference/configuration.md"
WIDTH = 80
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
    """The whole reference page on stdout."""
    sys.stdout.write(page())
    return 0


def print_explanation(args: argparse.Namespace) -> int:
    """One key's or table's entry on stdout; an unknown key is a usage error."""
    print(explain(" ".join(args.key)))
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


def explain(text: str, every: list[Table] | None = None) -> str:
    """The plain-text entry of the key or table ``text`` names (``UsageError`` if none)."""
    known = tables() if every is None else every
    if not segments(text):
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
        rows = [_row(t.name, _plain(t.description.split("\n\n")[0]), under) for t in under]
        return "\n".join([f"Tables under {'.'.join(segments(text))}:", *rows])
    raise UsageError(_unknown(text, known))


def _plain_entry(entry: Entry) -> str:
    fields = [("Type", entry.kind), ("Default", entry.default)]
    if entry.limits:
        fields.append(("Limits", ", ".join(entry.limits)))
    if entry.only_for:
        fields.append(("Only for", f"{' and '.join(entry.only_for)} triggers"))
    lines = [entry.name]
    for label, value in fields:
        lines.append(_fill(value, f"{label + ':':<10}", " " * 10))
    if entry.description:
        lines += ["", _fill(_plain(entry.description))]
    lines += ["", f"More: {PAGE}#{entry.anchor}"]
    return "\n".join(lines)


def _plain_table(table: Table, every: list[Table]) -> str:
    lines = [table.name]
    lines += [_fill(_plain(text)) for text in table.description.split("\n\n") if text]
    if table.entries:
        width = max(len(e.key) for e in table.entries)
        lines += ["", "Keys:"]
        for entry in table.entries:
            default = textwrap.shorten(entry.default, 40, placeholder=" …")
            said = default if default == "required" else f"default {default}"
            lines.append(
                _fill(f"{entry.kind}; {said}", f"  {entry.key:<{width}}  ", " " * (width + 4))
            )
    inside = [t.name for t in every if t.path.startswith(table.path + ".")]
    if inside:
        lines += ["", _fill(f"Tables in it: {', '.join(inside)}", "", "  ")]
    lines += ["", f"More: {PAGE}#{table.anchor}"]
    return "\n".join(lines)


def _row(name: str, text: str, under: list[Table]) -> str:
    width = max(len(t.name) for t in under)
    return _fill(text, f"  {name:<{width}}  ", " " * (width + 4))


def _unknown(text: str, every: list[Table]) -> str:
    """The one line for a key that does not exist, with the nearest one."""
    names = {t.path.lower(): t.name for t in every}
    names |= {e.path.lower(): e.name for t in every for e in t.entries}
    close = difflib.get_close_matches(".".join(segments(text)), names, n=1, cutoff=0.6)
    hint = f"did you mean {names[close[0]]}?" if close else "`pinclaw config reference` lists them"
    return f"no config key {text.strip()!r}; {hint}"


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
