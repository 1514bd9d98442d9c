"""The site names only what exists: config keys, reference anchors, commands, TOML.

Read with plain regular expressions, without building the site: the prose pages
(``docs/*.md``, ``docs/reference/commands.md``) and README. The generated
``docs/reference/configuration.md`` is the truth they are held to, through
``bot.config.reference``; the commands come from ``pinclaw``'s own parser. Each
finding names the page and line, so the fix is on the page (or in the code, when
the page was right and the code has moved).
"""

from __future__ import annotations

import argparse
import re
import shlex
import textwrap
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.cli.config_reference import explain_all
from bot.cli.main import build_parser
from bot.config import parse_config
from bot.config.reference import Entry, Table, find, named_by, tables, tables_under
from bot.core.errors import ConfigError, UsageError

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [
    *sorted(DOCS.glob("*.md")),
    DOCS / "reference" / "commands.md",
    ROOT / "README.md",
]
NOT_KEYS = {"[redacted]"}  # written in backticks, but what the logs print, not a table

_FENCE = re.compile(r"^( *)```(\w*)[^\n]*\n(.*?)^\1```[ \t]*$", re.MULTILINE | re.DOTALL)
_MENTION = re.compile(r"`(\[\[?)([A-Za-z][^\]\s`]*)(\]\]?)(?: ([A-Za-z_][\w-]*))?(?: = ([^`]+))?`")
_LINK = re.compile(r"\[(?P<label>[^\]]*(?:\][^\]\(]*)*)\]\((?P<target>[^)\s]+)\)")
_TO_REFERENCE = re.compile(r"^(?:\.\./)?(?:reference/)?configuration\.md#(?P<anchor>.+)$")
_INLINE_COMMAND = re.compile(r"`(pinclaw(?: [^`]*)?)`")
_SHELL_LINE = re.compile(r"^(?:\$ )?(?:sudo )?(pinclaw(?: .*)?)$")
_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


@dataclass(frozen=True, slots=True)
class Fence:
    """A fenced code block: where it starts, its language and its text (dedented)."""

    where: str
    lang: str
    body: str


@dataclass(frozen=True, slots=True)
class Page:
    """A page's prose (fenced blocks blanked, lines kept) and its fenced blocks."""

    name: str
    prose: str
    fences: tuple[Fence, ...]

    def where(self, offset: int) -> str:
        return f"{self.name}:{self.prose.count(chr(10), 0, offset) + 1}"


def _read(path: Path) -> Page:
    text = path.read_text(encoding="utf-8")
    name = str(path.relative_to(ROOT))
    fences = []
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        fences.append(Fence(f"{name}:{line}", match[2], textwrap.dedent(match[3])))
    prose = _FENCE.sub(lambda m: "\n" * m[0].count("\n"), text)
    return Page(name, prose, tuple(fences))


@pytest.fixture(scope="module")
def pages() -> list[Page]:
    return [_read(path) for path in PAGES]


@pytest.fixture(scope="module")
def every() -> list[Table]:
    return tables()


# -- config keys -----------------------------------------------------------------------


def resolve(table: str, key: str | None, every: list[Table]) -> list[Entry | Table]:
    """What ``[table] key`` (or the table alone) names: ``NAME`` in the table stands for
    any name, a concrete name fills the models' ``NAME`` (``[agents.researcher]``)."""
    text = f"{table}.{key}" if key else table
    found = find(text, every)
    if found is not None:
        return [found]
    if key is None and tables_under(text, every):
        return list(tables_under(text, every))
    return named_by(text, every)


def fits(value: str, kind: str) -> bool:
    """Whether the TOML ``value`` (``"ask"``, ``true|false``) is of the key's ``kind``."""
    try:
        parsed = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        options = value.split("|")
        return len(options) > 1 and all(fits(option.strip(), kind) for option in options)
    for alternative in kind.removesuffix(", or not set").split(", or "):
        if alternative.startswith("one of "):
            allowed = re.findall(r'"(?:[^"\\]|\\.)*"|[^,\s]+', alternative.removeprefix("one of "))
            if any(tomllib.loads(f"v = {a}")["v"] == parsed for a in allowed):
                return True
        elif alternative == "true or false":
            if isinstance(parsed, bool):
                return True
        elif alternative in ("integer", "number"):
            numbers = int if alternative == "integer" else (int, float)
            if isinstance(parsed, numbers) and not isinstance(parsed, bool):
                return True
        elif alternative in ("string", "secret string"):
            if isinstance(parsed, str):
                return True
        elif alternative.startswith("list of") and isinstance(parsed, list):
            return True
    return False


def mention_problem(match: re.Match[str], every: list[Table]) -> str | None:
    """What is wrong with a `[table] key = value` mention, or None."""
    opening, table, closing, key, value = match.groups()
    if f"{opening}{table}{closing}" in NOT_KEYS and key is None:
        return None
    if len(opening) != len(closing):
        return f"unbalanced brackets in {match[0]}"
    named = resolve(table, key, every)
    if not named:
        what = "no key" if key else "no table"
        return f"{match[0]}: {what} of the configuration has that name"
    if key is None:
        arrays = {isinstance(t, Table) and t.name.startswith("[[") for t in named}
        if arrays != {opening == "[["}:
            right = named[0].name
            return f"{match[0]}: the table is written {right}"
    if value is not None:
        kinds = {item.kind for item in named if isinstance(item, Entry)}
        if not any(fits(value, kind) for kind in kinds):
            return f"{match[0]}: the value is not {' / '.join(sorted(kinds))}"
    return None


def test_every_key_and_table_the_prose_names_is_in_the_models(
    pages: list[Page], every: list[Table]
) -> None:
    problems = []
    count = 0
    for page in pages:
        for match in _MENTION.finditer(page.prose):
            count += 1
            problem = mention_problem(match, every)
            if problem:
                problems.append(f"{page.where(match.start())}: {problem}")
    assert problems == []
    assert count > 100  # the mentions were found


@pytest.mark.parametrize(
    ("text", "wrong"),
    [
        ("`[home_assistant] allow`", False),
        ("`[channels.NAME] allowed_users`", False),
        ("`[browser.profiles.NAME] hosts`", False),
        ("`[[triggers]] on`", False),
        ("`[agents.researcher]`", False),
        ('`[security] after_untrusted = "ask"`', False),
        ("`[home_assistant] alow`", True),
        ("`[homeassistant]`", True),
        ("`[triggers]`", True),  # an array of tables: [[triggers]]
        ("`[[home_assistant]]`", True),
        ('`[security] autonomy = "everything"`', True),
        ("`[channels.*]`", True),
    ],
)
def test_a_wrong_mention_is_found(text: str, wrong: bool, every: list[Table]) -> None:
    match = _MENTION.search(text)
    assert match is not None
    assert (mention_problem(match, every) is not None) is wrong


# -- links into the reference -----------------------------------------------------------


def links(pages: list[Page]) -> Iterator[tuple[str, str, str]]:
    """Each link into the configuration reference: where, its label, its anchor."""
    for page in pages:
        for match in _LINK.finditer(page.prose):
            target = _TO_REFERENCE.match(match["target"])
            if target:
                yield page.where(match.start()), match["label"], target["anchor"]


def label_problem(label: str, item: Entry | Table, every: list[Table]) -> str | None:
    """Whether a link's label (a single code span) names the key its anchor is for."""
    code = re.fullmatch(r"`([^`]+)`", label)
    if code is None:
        return None  # words, not a key: any anchor may be meant
    mention = _MENTION.fullmatch(label)
    if mention:
        named = resolve(mention[2], mention[4], every)
        wrong = mention_problem(mention, every)
        return wrong or (None if item in named else f"names {item.name}")
    plain = re.fullmatch(r"([A-Za-z_][\w-]*)(?: = (.+))?", code[1])
    if plain:
        if not isinstance(item, Entry) or item.key != plain[1]:
            return f"names {item.name}"
        if plain[2] is not None and not fits(plain[2], item.kind):
            return f"the value is not {item.kind}"
        return None
    return None if find(code[1], every) == item else f"names {item.name}"


def test_every_link_into_the_reference_has_a_real_anchor_and_the_right_key(
    pages: list[Page], every: list[Table]
) -> None:
    by_anchor: dict[str, Entry | Table] = {t.anchor: t for t in every}
    by_anchor |= {e.anchor: e for t in every for e in t.entries}
    problems = []
    found = list(links(pages))
    for where, label, anchor in found:
        item = by_anchor.get(anchor)
        if item is None:
            problems.append(f"{where}: no #{anchor} on the reference page")
            continue
        wrong = label_problem(label, item, every)
        if wrong:
            problems.append(f"{where}: [{label}] links to #{anchor}, which {wrong}")
    assert problems == []
    assert len(found) > 50


def test_a_label_and_anchor_that_disagree_are_found(every: list[Table]) -> None:
    allow = find("home_assistant.allow", every)
    url = find("home_assistant.url", every)
    assert isinstance(allow, Entry) and isinstance(url, Entry)
    assert label_problem("`[home_assistant] allow`", allow, every) is None
    assert label_problem("`allow`", allow, every) is None
    assert label_problem("words about it", url, every) is None
    assert label_problem("`[home_assistant] allow`", url, every) is not None
    assert label_problem("`allow`", url, every) is not None
    assert label_problem("`allow = 3`", allow, every) is not None


# -- commands ---------------------------------------------------------------------------


def _subcommands(
    parser: argparse.ArgumentParser,
) -> argparse._SubParsersAction[argparse.ArgumentParser] | None:
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return found[0] if found else None


def command_problems(line: str, root: argparse.ArgumentParser) -> list[str]:
    """What in a ``pinclaw …`` line names no command or option of the parser."""
    words = re.sub(r"\s+#\s.*$", "", line).split()[1:]
    parser, path = root, ["pinclaw"]
    for word in words:
        sub = _subcommands(parser)
        if sub is None or not re.fullmatch(r"[a-z][a-z-]*", word):
            break
        if word not in sub.choices:
            if parser is root or sub.required:
                return [f"`{' '.join(path)} {word}` is no command"]
            break
        parser = sub.choices[word]
        path.append(word)
    options = {option for action in parser._actions for option in action.option_strings}
    return [
        f"`{' '.join(path)}` has no option {option}"
        for option in _OPTION.findall(" ".join(words))
        if option not in options
    ]


def commands(pages: list[Page]) -> Iterator[tuple[str, str]]:
    """Each ``pinclaw …`` written in backticks or run in a shell block, up to a pipe."""
    for page in pages:
        for match in _INLINE_COMMAND.finditer(page.prose):
            yield page.where(match.start()), match[1]
        for fence in page.fences:
            if fence.lang in ("sh", "console", "bash", "shell"):
                for line in fence.body.splitlines():
                    shell = _SHELL_LINE.match(line.strip())
                    if shell:
                        yield fence.where, shell[1]


def _before_pipe(command: str) -> str:
    return re.split(r"(?<!\\)\|", command)[0] if "\\|" not in command else command


def test_every_command_the_docs_name_is_a_command_of_the_parser(pages: list[Page]) -> None:
    root = build_parser()
    problems = []
    found = list(commands(pages))
    for where, command in found:
        problems += [f"{where}: {p}" for p in command_problems(_before_pipe(command), root)]
    assert problems == []
    assert len(found) > 100


@pytest.mark.parametrize(
    ("line", "wrong"),
    [
        ("pinclaw db backup PATH [--force]", False),
        ("pinclaw inbox clear", False),
        ("pinclaw agent -m hi", False),
        ("pinclaw COMMAND --help", False),
        ("pinclaw status --json   # for scripts", False),
        ("pinclaw db backpu", True),
        ("pinclaw statuz", True),
        ("pinclaw status --jsno", True),
        ("pinclaw pairing approve --all", True),
    ],
)
def test_a_command_that_does_not_exist_is_found(line: str, wrong: bool) -> None:
    assert bool(command_problems(line, build_parser())) is wrong


def test_the_command_reference_lists_every_command() -> None:
    text = (DOCS / "reference" / "commands.md").read_text(encoding="utf-8")

    def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[str]:
        sub = _subcommands(parser)
        if sub is None or not sub.required:
            yield " ".join(("pinclaw", *path))
        for name, child in sub.choices.items() if sub else ():
            yield from leaves(child, (*path, name))

    def listed(command: str) -> bool:
        """Written out, or as a sibling in a row: `pinclaw cron remove ID` / `pause ID`."""
        parent, _, name = command.rpartition(" ")
        rows = [line for line in text.splitlines() if f"`{parent} " in line]
        return f"`{command}" in text or any(f"/ `{name}" in row for row in rows)

    every = [c for c in leaves(build_parser(), ()) if c != "pinclaw"]
    missing = [c for c in every if not listed(c)]
    assert missing == [], "docs/reference/commands.md does not list these"
    assert len(every) > 40


def explained(words: list[str]) -> str:
    """What ``pinclaw config explain WORDS`` prints, on stdout or (an error) on stderr."""
    try:
        return explain_all(words)
    except UsageError as exc:
        return f"pinclaw: {exc}"


def explanations(pages: list[Page]) -> Iterator[tuple[str, list[str], str | None]]:
    """Each ``pinclaw config explain`` in the docs: where, its words, and the output a
    console block shows after it (None in prose)."""
    for page in pages:
        for match in _INLINE_COMMAND.finditer(page.prose):
            words = shlex.split(match[1])
            if words[1:3] == ["config", "explain"] and words[3:] and "KEY" not in words:
                yield page.where(match.start()), words[3:], None
        for fence in page.fences:
            if fence.lang != "console":
                continue
            for session in re.split(r"^(?=\$ )", fence.body, flags=re.MULTILINE):
                command, _, shown = session.partition("\n")
                words = shlex.split(command.removeprefix("$ "))
                if words[1:3] == ["config", "explain"]:
                    yield fence.where, words[3:], shown.rstrip("\n")


def test_every_explain_in_the_docs_shows_what_the_command_prints(pages: list[Page]) -> None:
    problems = []
    found = list(explanations(pages))
    for where, words, shown in found:
        printed = explained(words)
        if shown is None and printed.startswith("pinclaw: "):
            problems.append(f"{where}: {printed}")
        elif shown is not None and shown != printed:
            problems.append(f"{where}: shows other output than it prints now:\n{printed}")
    assert problems == []
    assert sum(shown is not None for _, _, shown in found) >= 3


# -- TOML examples -----------------------------------------------------------------------


def toml_problem(body: str, where: str) -> str | None:
    """Why a TOML example would not pass ``pinclaw config check``, as part of a config
    with a provider (added when the example has none); None when it would."""
    try:
        document = tomllib.loads(body)
    except tomllib.TOMLDecodeError as exc:
        return f"not TOML: {exc}"
    document.setdefault("provider", {"kind": "ollama", "model": "llama3.2"})
    try:
        parse_config(document, {}, source=where, unset=[])
    except ConfigError as exc:
        return str(exc)
    return None


def test_every_toml_example_is_a_valid_piece_of_config(pages: list[Page]) -> None:
    examples = [f for page in pages for f in page.fences if f.lang == "toml"]
    problems = [p for f in examples if (p := toml_problem(f.body, f.where))]
    assert problems == []
    assert len(examples) > 20


@pytest.mark.parametrize(
    "body",
    [
        "[home_assistant]\nalow = []\n",
        '[hardware.sensors.g]\ndriver = "bme280"\nbus = 1\naddress = 0x76\n',  # no i2c bus
        "[[home_assistant]]\n",
        "[web\n",
    ],
)
def test_a_wrong_toml_example_is_found(body: str) -> None:
    assert toml_problem(body, "example") is not None
