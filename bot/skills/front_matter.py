"""A minimal reader for the front matter at the top of a ``SKILL.md``.

Skills only need flat ``key: value`` pairs (``name``, ``description``,
``requires``), so this reads that subset of YAML instead of adding PyYAML as a
dependency: one key per line, optional quotes, a ``[a, b]`` list, and a block
list of ``- item`` lines under a key. Anything else is reported as a problem.
"""

from __future__ import annotations

from dataclasses import dataclass

FrontValue = str | list[str]


class FrontMatterError(ValueError):
    """The front matter is missing or not the simple ``key: value`` form skills use."""


@dataclass(frozen=True, slots=True)
class Document:
    """A ``SKILL.md`` split into its front matter and its body."""

    fields: dict[str, FrontValue]
    body: str


def split(text: str) -> Document:
    """Split ``text`` into front matter fields and the body after the closing ``---``."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise FrontMatterError("the file does not start with a '---' front matter line")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise FrontMatterError("the front matter has no closing '---' line") from None
    fields = _parse(lines[1:end])
    return Document(fields, "\n".join(lines[end + 1 :]).strip())


def _parse(lines: list[str]) -> dict[str, FrontValue]:
    fields: dict[str, FrontValue] = {}
    current: str | None = None
    for number, raw in enumerate(lines, start=2):
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.lstrip().startswith("- ") and current is not None:
            value = fields.setdefault(current, [])
            if not isinstance(value, list):
                raise FrontMatterError(f"line {number}: '{current}' mixes a value and a list")
            value.append(_scalar(line.lstrip()[2:]))
            continue
        key, colon, rest = line.partition(":")
        if not colon or line[0].isspace() or not key.strip():
            raise FrontMatterError(f"line {number}: expected 'key: value', got {line.strip()!r}")
        current = key.strip()
        if current in fields:
            raise FrontMatterError(f"line {number}: '{current}' is given twice")
        rest = rest.strip()
        if rest.startswith("[") and rest.endswith("]"):
            fields[current] = [_scalar(p) for p in rest[1:-1].split(",") if p.strip()]
        elif rest:
            fields[current] = _scalar(rest)
        else:
            fields[current] = []
    return fields


def _scalar(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text
