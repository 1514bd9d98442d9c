"""What an approver is shown of a tool call: every argument whole, nothing invisible.

``summarize`` writes a call's arguments as ``key=value, key=value``: every value in
full (secrets masked by the redactor first; values that are not text as JSON),
each through ``visible``, which follows one rule:

1. A printable character is shown as it is, but for ``⟨`` and ``⟩``: they frame
   the marks below, so in an argument they are marks themselves (``⟨U+27E8⟩``,
   ``⟨U+27E9⟩``) and no argument can forge a mark.
2. A character that shows nothing, or moves or hides other text, is shown as a
   mark naming it: controls (C0 and C1, DEL: ``⟨ESC⟩``, ``⟨CR⟩``, ``⟨NUL⟩``,
   ``⟨U+0085⟩``...), format characters (zero-width ``⟨ZWSP⟩``/``⟨ZWNJ⟩``/``⟨ZWJ⟩``/
   ``⟨WJ⟩``, bidi marks ``⟨LRM⟩``/``⟨RLM⟩``/``⟨ALM⟩``, the embeddings, overrides and
   isolates U+202A-202E and U+2066-2069 as ``⟨LRE⟩`` ... ``⟨PDI⟩``, ``⟨BOM⟩``, the soft
   hyphen ``⟨SHY⟩``, tag characters), the other default-ignorable characters
   (variation selectors, Hangul fillers), the braille blank, every space but the
   plain space and the tab (``⟨NBSP⟩``, ``⟨U+3000⟩``), line and paragraph separators,
   private-use, surrogate and unassigned code points, and a combining mark that
   follows three others (a pile of them would smear over the lines around it). A
   run of one such character is one mark with its count: ``⟨40 × ZWSP⟩``.
3. Newlines stay line breaks; more than two blank lines in a row become one line
   ``⟨N blank lines⟩``.
4. Spaces and tabs stay as they are in a run of at most 8 inside a line, or of
   at most 16 at the start of a line (a script's indentation); a longer run, and
   any run at the end of a line, is a mark with its count: ``⟨312 spaces⟩``,
   ``⟨3 tabs⟩``, ``⟨4 spaces and 2 tabs⟩``.

So every character of an argument is either on screen or counted in a mark, and
no run of blanks or invisible characters can push the rest out of view.

A file the call writes (``file_write``'s content, ``file_edit``'s old and new
text) may stand as its size instead (``not_shown``) where a chat cannot show it
whole: ``renderings`` gives the whole form first, then the shorter ones.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from typing import Any

from bot.security.redact import Redactor

OPEN, CLOSE = "⟨", "⟩"
MAX_GAP = 8  # blanks shown as they are inside a line
MAX_INDENT = 16  # ... and at the start of a line
MAX_BLANK_LINES = 2
MAX_MARKS = 3  # combining marks on one character shown as they are
SUMMARIZED_FIELDS: dict[str, tuple[str, ...]] = {
    "file_write": ("content",),
    "file_edit": ("old_text", "new_text"),
}
"""The arguments a tool writes into a file, which may be summarized by their size."""

NAMES = {
    0x00: "NUL", 0x07: "BEL", 0x08: "BS", 0x0B: "VT", 0x0C: "FF", 0x0D: "CR",
    0x1B: "ESC", 0x7F: "DEL", 0xA0: "NBSP", 0xAD: "SHY", 0x061C: "ALM",
    0x200B: "ZWSP", 0x200C: "ZWNJ", 0x200D: "ZWJ", 0x200E: "LRM", 0x200F: "RLM",
    0x2028: "LS", 0x2029: "PS", 0x202A: "LRE", 0x202B: "RLE", 0x202C: "PDF",
    0x202D: "LRO", 0x202E: "RLO", 0x2060: "WJ", 0x2066: "LRI", 0x2067: "RLI",
    0x2068: "FSI", 0x2069: "PDI", 0xFEFF: "BOM",
}  # fmt: skip
"""Short names for the hidden characters people meet most; the rest are ``U+XXXX``."""

# Printable, yet invisible: default-ignorable code points outside the format
# category (Unicode's DerivedCoreProperties), and the braille blank.
_BLANK_RANGES = (
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
    (0x2800, 0x2800), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0),
    (0xE0100, 0xE01EF),
)  # fmt: skip


def escape(char: str) -> str:
    """The mark for one hidden character: ``⟨ESC⟩``, ``⟨U+202E⟩``-style names."""
    code = ord(char)
    return f"{OPEN}{NAMES.get(code) or f'U+{code:04X}'}{CLOSE}"


def hidden(char: str) -> bool:
    """Whether ``char`` is shown as a mark rather than as itself (rule 2 and the brackets).

    Newlines, spaces and tabs are not: rules 3 and 4 handle them.
    """
    if char in "\n\t ":
        return False
    if char in (OPEN, CLOSE) or not char.isprintable():
        return True
    if unicodedata.category(char) == "Cf":
        return True
    code = ord(char)
    return any(low <= code <= high for low, high in _BLANK_RANGES)


def visible(text: str) -> str:
    """``text`` for an approver, by the rule in this module's docstring."""
    lines = [_line(line) for line in text.split("\n")]
    out: list[str] = []
    blank = 0
    for line in [*lines, None]:
        if line == "":
            blank += 1
            continue
        if blank > MAX_BLANK_LINES:
            out.append(f"{OPEN}{blank} blank lines{CLOSE}")
        else:
            out.extend([""] * blank)
        blank = 0
        if line is not None:
            out.append(line)
    return "\n".join(out)


def _line(line: str) -> str:
    """One line, by rules 1, 2 and 4."""
    out: list[str] = []
    index, end = 0, len(line)
    marks = 0
    while index < end:
        char = line[index]
        stop = index + 1
        if char in " \t":
            while stop < end and line[stop] in " \t":
                stop += 1
            run = line[index:stop]
            room = MAX_INDENT if index == 0 else MAX_GAP
            out.append(run if stop < end and len(run) <= room else _blanks(run))
            marks = 0
        elif hidden(char) or (marks >= MAX_MARKS and _is_mark(char)):
            while stop < end and line[stop] == char:
                stop += 1
            count = stop - index
            mark = escape(char)
            out.append(mark if count == 1 else f"{OPEN}{count} × {mark[1:]}")
        else:
            out.append(char)
            marks = marks + 1 if _is_mark(char) else 0
        index = stop
    return "".join(out)


def _is_mark(char: str) -> bool:
    return unicodedata.category(char) in ("Mn", "Me")


def _blanks(run: str) -> str:
    """The mark for a run of spaces and tabs: ``⟨312 spaces⟩``, ``⟨1 tab⟩``."""
    spaces, tabs = run.count(" "), run.count("\t")
    parts = [_count(n, word) for n, word in ((spaces, "space"), (tabs, "tab")) if n]
    return f"{OPEN}{' and '.join(parts)}{CLOSE}"


def _count(number: int, word: str) -> str:
    return f"{number:,} {word}" + ("" if number == 1 else "s")


def not_shown(text: str) -> str:
    """What stands for a file's content that is not shown: its size, said plainly."""
    size = len(text.encode("utf-8", "surrogatepass"))
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    what = f"{_count(size, 'byte')} in {_count(lines, 'line')}"
    return f"{OPEN}not shown: {what}, too long to show in full here{CLOSE}"


def summarize(arguments: Mapping[str, Any], redactor: Redactor, brief: tuple[str, ...] = ()) -> str:
    """Every argument as ``key=value`` (joined by ", "), whole and ``visible``, secrets
    masked; the text arguments named in ``brief`` only as their size (``not_shown``)."""
    parts = []
    for key, value in redactor.arguments(arguments).items():
        original = arguments.get(key)
        if key in brief and isinstance(original, str):
            shown = not_shown(original)
        else:
            text = value if isinstance(value, str) else _json(value)
            shown = visible(text)
        parts.append(f"{visible(str(key))}={shown}")
    return ", ".join(parts)


def renderings(tool: str, arguments: Mapping[str, Any], redactor: Redactor) -> tuple[str, ...]:
    """The call's arguments for an approver: whole first; then, for a tool that writes a
    file, with its content summarized, the longest field first, then the next."""
    fields = [f for f in SUMMARIZED_FIELDS.get(tool, ()) if isinstance(arguments.get(f), str)]
    fields.sort(key=lambda field: len(arguments[field]), reverse=True)
    return tuple(
        summarize(arguments, redactor, brief=tuple(fields[:count]))
        for count in range(len(fields) + 1)
    )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
