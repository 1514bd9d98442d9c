"""The shape of the code: packages that name the architecture, dependencies one way.

Read from the source (``tests/import_graph.py``, plain ``ast``): no module
imports another that imports it back, however far round; channels and tools
never reach into the daemon or the command line; imports running from a lower
layer up to a higher one stay the few exceptions listed here; and the top
level of ``bot/`` and ``channels/`` stays small.
"""

from __future__ import annotations

from tests.import_graph import LAYERS, ROOT, cycles, graph, layer, upward

KNOWN_UPWARD = {
    # The gate wraps the registry (approvals wrap the tool set); the registry only
    # names the security kit's type for the tools it builds.
    ("bot.security.gate", "bot.agent.tool_registry"),
}


def test_no_module_imports_its_way_back_to_itself() -> None:
    assert cycles(graph()) == []


def test_channels_and_tools_never_reach_into_the_daemon_or_the_command_line() -> None:
    reaching = [
        (source, target)
        for source, targets in graph().items()
        if source.startswith(("channels", "tools"))
        for target in targets
        if target.startswith(("bot.daemon", "bot.cli"))
    ]
    assert reaching == []


def test_dependencies_point_down_the_layers_but_for_a_few_known_ones() -> None:
    edges = graph()
    assert all(layer(module) >= 0 for module in edges), [m for m in edges if layer(m) < 0]
    found = set(upward(edges))
    assert found <= KNOWN_UPWARD, sorted(found - KNOWN_UPWARD)
    assert len(KNOWN_UPWARD) <= 6


def test_the_top_levels_stay_small() -> None:
    top = sorted(p.name for p in (ROOT / "bot").glob("*.py"))
    assert len(top) <= 11, top
    channels = sorted(p.name for p in (ROOT / "channels").glob("*.py"))
    assert len(channels) <= 6, channels
    platforms = sorted(
        p.name for p in (ROOT / "channels").iterdir() if (p / "__init__.py").exists()
    )
    assert platforms == ["discord", "slack", "telegram", "web"]


def test_security_is_in_rooms_with_no_folder_names_in_file_names() -> None:
    security = ROOT / "bot" / "security"
    top = sorted(p.name for p in security.glob("*.py"))
    assert len(top) <= 12, top
    rooms = sorted(p.name for p in security.iterdir() if (p / "__init__.py").exists())
    assert rooms == ["files", "net", "sandbox", "shell"]
    prefixed = [
        str(p.relative_to(security))
        for p in security.rglob("*.py")
        if p.name.startswith(("shell_", "net_", "sandbox_"))
    ]
    assert prefixed == []
    # No shims: the old module names are gone, not kept as re-exports.
    old = ("shell_risk", "shell_lexer", "net_addresses", "sandbox_wire", "egress", "paths")
    assert [name for name in old if (security / f"{name}.py").exists()] == []


def test_every_package_has_a_layer() -> None:
    named = {prefix for names in LAYERS for prefix in names}
    packages = {".".join(p.relative_to(ROOT).parts[:-1]) for p in ROOT.glob("bot/*/__init__.py")}
    assert packages <= named, sorted(packages - named)
