"""PinClaw's import graph, read from the source with ``ast`` (nothing is imported).

A module's imports are every ``import``/``from ... import`` in it, at any depth:
a function's lazy import counts (it runs), and so does one under
``if TYPE_CHECKING:`` (a type shared both ways is a type in the wrong module).
``from bot.x import y`` is an import of ``bot.x.y`` when that is a module, else
of ``bot.x``. Layers, lowest first, say which way dependencies may point.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bot", "channels", "tools")

LAYERS: tuple[tuple[str, ...], ...] = (
    ("bot", "bot.core"),
    ("bot.config", "bot.store"),
    ("bot.security", "bot.providers", "bot.hardware", "bot.memory", "bot.media"),
    (
        "bot.agent",
        "bot.approvals",
        "bot.cron",
        "bot.triggers",
        "bot.skills",
        "bot.mcp",
        "bot.browser",
    ),
    ("tools", "channels"),
    ("bot.daemon", "bot.panel"),
    ("bot.cli",),
)
"""Each tuple is one layer; a module belongs to the longest prefix that names it."""


def modules() -> dict[str, Path]:
    """Every module of the three packages, by dotted name."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that the file at ``path`` imports when it runs."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(_known(alias.name, known) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                whole = f"{node.module}.{alias.name}"
                found.add(whole if whole in known else _known(node.module, known))
    found.discard("")
    return found


def _known(name: str, known: dict[str, Path]) -> str:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


def graph() -> dict[str, set[str]]:
    """Module -> the modules it imports (itself and its own parent packages left out)."""
    known = modules()
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        targets = imports(path, known) - {name}
        edges[name] = {t for t in targets if not name.startswith(t + ".")}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def layer(module: str) -> int:
    """The layer of ``module``: that of the longest prefix a layer names."""
    best, level = "", -1
    for number, names in enumerate(LAYERS):
        for prefix in names:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, level = prefix, number
    return level


def upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports from a module to one in a higher layer."""
    return sorted(
        (source, target)
        for source, targets in edges.items()
        for target in targets
        if layer(target) > layer(source)
    )
