"""Every module or file a docstring names in double backticks exists.

Read from the source with plain ``ast`` (nothing is imported). A span in double
backticks in a module, class or function docstring is checked when it names
something of ours:

- a path (it ends in ``.py``, or its first part is a folder that is there) must
  exist beside the module, in a folder above it, or at the top of the checkout;
- a dotted name that starts with one of our packages (``bot.security.shell.risk``)
  must be a module, or a module and names defined in it
  (``bot.security.shell.risk.Walker``);
- a dotted name whose first part is a module or package beside the module or in
  a package above it (``shell.lexer`` from ``bot.security.net``) must resolve the
  same way from there;
- a bare snake_case name that starts with the name of one of our packages, the
  way files were named before their regroup into folders, must be a module of
  ours or a name the code defines or uses somewhere (a function, a class, an
  attribute, an argument, a key): a file renamed away leaves its old name
  dangling here.

A dotted configuration key (``hardware.pin_factory``) is a key, not a module.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("bot", "channels", "tools", "tests", "bench", "scripts", ".ci")
PACKAGES = ("bot", "channels", "tools", "tests")

SPAN = re.compile(r"``([^`]+?)``")
PATH = re.compile(r"[\w.-]+(?:/[\w.-]+)*/?")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
BARE = re.compile(r"[a-z][a-z0-9]*_[a-z0-9_]*")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
PLACEHOLDERS = frozenset({"NAME", "ID", "KEY", "x", "y"})
"""Parts that stand for any name in a span (``channels.NAME.check``, ``bot.x.y``)."""


@cache
def python_files() -> tuple[Path, ...]:
    """Every Python file of ours, in a stable order."""
    return tuple(sorted(path for folder in FOLDERS for path in (ROOT / folder).rglob("*.py")))


@dataclass(frozen=True, slots=True)
class Read:
    """What the check needs of one file, gathered in one walk of its syntax tree,
    which is then let go (holding every file's tree makes the garbage collector
    the slowest part)."""

    spans: tuple[tuple[int, str], ...]
    """Each span in double backticks in a docstring: (line, text)."""
    defined: frozenset[str]
    """What ``module.NAME`` can reach: classes, functions, assignment targets
    (``self.x`` too), imports (re-exports), outside tests/ names in strings
    (``__all__``, a module's ``__getattr__``)."""
    used: frozenset[str]
    """Every name defined or used and, outside tests/, every word of a string
    constant but a docstring (a config key, a dict key, a table in SQL); the tests'
    strings are left out, as they list old module names on purpose."""


@cache
def read(path: Path) -> Read:
    """The file at ``path``, read once."""
    module = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    shipped = path.parts[len(ROOT.parts)] != "tests"
    spans: list[tuple[int, str]] = []
    defined: set[str] = set()
    used: set[str] = set()
    prose: set[int] = set()  # docstrings, and strings standing alone as comments
    for node in ast.walk(module):  # a parent comes before its children
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            spans.extend(spans_of(node))
            if not isinstance(node, ast.Module):
                defined.add(node.name)
        elif isinstance(node, ast.Name):
            used.add(node.id)
            if isinstance(node.ctx, ast.Store):
                defined.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
            if isinstance(node.ctx, ast.Store):
                defined.add(node.attr)
        elif isinstance(node, ast.arg):
            used.add(node.arg)
        elif isinstance(node, ast.keyword):
            used.add(node.arg or "")  # None: a ``**mapping``
        elif isinstance(node, ast.alias):
            used.update(node.name.split("."))
            defined.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            prose.add(id(node.value))
        elif shipped and isinstance(node, ast.Constant) and id(node) not in prose:
            words = IDENTIFIER.findall(node.value) if isinstance(node.value, str) else []
            used.update(words)
            defined.update(words if words == [node.value] else [])
    return Read(
        spans=tuple(spans),
        defined=frozenset(defined),
        used=frozenset(used | defined),
    )


def spans_of(
    node: ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef,
) -> Iterator[tuple[int, str]]:
    """Each span in double backticks in the docstring of ``node``: (line, text)."""
    doc = node.body[0].value if node.body and isinstance(node.body[0], ast.Expr) else None
    if isinstance(doc, ast.Constant) and isinstance(doc.value, str):
        for match in SPAN.finditer(doc.value):
            line = doc.lineno + doc.value.count("\n", 0, match.start())
            yield line, " ".join(match.group(1).split())


def dotted(path: Path) -> str:
    """The module name of a file under the checkout (``bot.security.net``)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    """Every module and package of ours, by dotted name."""
    return {dotted(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")}


@cache
def package_words() -> frozenset[str]:
    """The names of our packages (``telegram``, ``shell``, ``net``): a bare name that
    starts with one, as telegram_polling did, is how a module was named before its
    regroup into that package."""
    packages = (path for path in modules().values() if path.name == "__init__.py")
    return frozenset(path.parent.name for path in packages)


@cache
def vocabulary() -> frozenset[str]:
    """Every module, package and identifier of the codebase, and the key-like strings
    of the code that ships: not the tests', which list old module names on purpose
    (``tests/test_architecture.py``)."""
    names = {path.stem for path in python_files()}
    names.update(part for name in modules() for part in name.split("."))
    for path in python_files():
        names.update(read(path).used)
    return frozenset(names)


@cache
def config_keys() -> frozenset[str]:
    """The table and key names of the configuration (``hardware``, ``pin_factory``,
    ``telegram`` of ``[channels.telegram]``), from the configuration reference."""
    from bot.config.reference import tables

    paths = [path for t in tables() for path in (t.path, *(e.path for e in t.entries))]
    return frozenset(part for path in paths for part in path.split("."))


def resolves(name: str) -> bool:
    """Whether ``name`` is a module of ours, or a module and names defined in it."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        if module in modules():
            for part in parts[cut:]:
                if part in PLACEHOLDERS:
                    return True  # past a placeholder, anything goes
                if part not in read(modules()[module]).defined:
                    return False
            return True
    return False


def packages_above(path: Path) -> list[str]:
    """The packages that hold the module at ``path``, nearest first, short of the top.

    Not the top package itself: the names one level below it (``discord``,
    ``telegram``, ``hardware``, ``security``) are also libraries and config tables
    (``discord.Client``, ``hardware.pin_factory``).
    """
    parts = dotted(path).split(".")
    if path.name != "__init__.py":
        parts = parts[:-1]
    return [".".join(parts[:cut]) for cut in range(len(parts), 1, -1)]


def folders_above(path: Path) -> list[Path]:
    """The module's folder and every folder above it up to the checkout's top."""
    folders = [path.parent]
    while folders[-1] != ROOT:
        folders.append(folders[-1].parent)
    return folders


def stale_path(path: Path, span: str) -> bool:
    """Whether a path-like span names a file of ours that is not there."""
    folders = folders_above(path)
    first = span.split("/", maxsplit=1)[0]
    if not span.endswith(".py") and not any((folder / first).exists() for folder in folders):
        return False  # not ours: a media type, a URL path, a folder in the data directory
    named = (span, f"{span}.py")  # ``tests/fake_llm`` is the package or the module
    return not any((folder / name).exists() for folder in folders for name in named)


def stale_dotted(path: Path, span: str) -> bool:
    """Whether a dotted span names a module of ours (or names in one) that is not there."""
    parts = span.split(".")
    if all(part in config_keys() or part in PLACEHOLDERS for part in parts):
        return False  # a configuration key written with dots (``hardware.pin_factory``)
    if parts[0] in PACKAGES:
        return not resolves(span)
    near = [f"{package}.{parts[0]}" for package in packages_above(path)]
    bases = [package for package in near if package in modules()]
    if not bases:
        return False  # not ours: another library's attribute, an API method, a config key
    return not any(resolves(".".join([base, *parts[1:]])) for base in bases)


def is_stale(path: Path, span: str) -> bool:
    """Whether one span of a docstring in the file at ``path`` names nothing of ours."""
    if span.startswith(("/", "~", ".")):
        return False  # an absolute path, a path under home, a dot file
    if span.endswith(".py") and span[: -len(".py")] in sys.stdlib_module_names:
        return False  # a file that shadows the standard library: a planted one, not ours
    if PATH.fullmatch(span) and ("/" in span or span.endswith(".py")):
        return stale_path(path, span)
    if DOTTED.fullmatch(span):
        return stale_dotted(path, span)
    if BARE.fullmatch(span) and span.split("_", maxsplit=1)[0] in package_words():
        return span not in vocabulary()
    return False


def test_every_module_or_file_a_docstring_names_exists() -> None:
    stale = [
        f"{path.relative_to(ROOT)}:{line}: {span}"
        for path in python_files()
        for line, span in read(path).spans
        if is_stale(path, span)
    ]
    assert stale == [], "\n".join(stale)


def stale_in(path: Path, docstring: str) -> list[tuple[int, str]]:
    """The dangling names of ``docstring`` as the module docstring of ``path``: (line, text)."""
    spans = spans_of(ast.parse(f'"""{docstring}"""'))
    return [(line, span) for line, span in spans if is_stale(path, span)]


def test_the_check_finds_names_from_before_the_regroups() -> None:
    telegram = ROOT / "channels" / "telegram" / "channel.py"
    # ``shell_lexer`` is also a string in tests/test_architecture.py, which lists old names.
    docstring = """Polling in ``telegram_polling``, updates in ``telegram_updates``,
    sending in ``telegram_send``, presses in ``telegram_presses``.
    Discord sends in ``discord_send.py``; Slack retries as ``slack_delivery`` says.
    Old homes: ``bot.security.shell_risk``, ``channels/telegram/poller.py``,
    ``channels.telegram.polling.Polling``, ``send.Sending``, ``shell_lexer``.
    """
    assert stale_in(telegram, docstring) == [
        (1, "telegram_polling"),
        (1, "telegram_updates"),
        (2, "telegram_send"),
        (2, "telegram_presses"),
        (3, "discord_send.py"),
        (3, "slack_delivery"),
        (4, "bot.security.shell_risk"),
        (4, "channels/telegram/poller.py"),
        (5, "channels.telegram.polling.Polling"),
        (5, "send.Sending"),
        (5, "shell_lexer"),
    ]


def test_the_check_reads_names_from_where_the_module_stands() -> None:
    egress = ROOT / "bot" / "security" / "net" / "egress.py"
    docstring = """``bot.security.shell.risk``, ``bot.security.shell.risk.Walker``,
    ``shell.lexer``, ``transport.GuardedBackend``, ``net/egress.py``, ``tests/fake_llm``,
    ``tests/fake_serial.py``, ``channels.telegram.polling.Poller``, ``bot.x.y``,
    ``text/plain``, ``chat.postMessage``, ``/proc/self``, ``json.py``, ``allowed_hosts``.
    """
    assert stale_in(egress, docstring) == []
    relay = ROOT / "bot" / "security" / "sandbox" / "relay.py"
    assert stale_in(relay, "``net/egress.py``, ``net.egress``, ``wire.py``") == []
    assert stale_in(relay, "``net/egres.py``, ``shell.lexers``, ``wires.py``") == [
        (1, "net/egres.py"),
        (1, "shell.lexers"),
        (1, "wires.py"),
    ]


def test_libraries_and_configuration_keys_are_not_taken_for_modules() -> None:
    discord = ROOT / "channels" / "discord" / "channel.py"
    assert stale_in(discord, "``discord.Client``, ``send.classify``, ``GIVE_UP_S``") == []
    assert stale_in(discord, "``send.classified``") == [(1, "send.classified")]
    heartbeat = ROOT / "bot" / "cron" / "heartbeat.py"
    keys = "``heartbeat.interval``, ``channels.telegram.token``, ``channels.NAME.check``"
    assert stale_in(heartbeat, keys) == []
    assert stale_in(heartbeat, "``heartbeat.intervals``") == [(1, "heartbeat.intervals")]
