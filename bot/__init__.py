"""PinClaw daemon core: configuration, providers, the agent loop, storage and the CLI."""

from bot.core.lean_imports import skip_unused_optional_imports

skip_unused_optional_imports()


def __getattr__(name: str) -> str:
    """``bot.__version__``: the package metadata's version, read on first use
    (``bot.core.version``), so importing ``bot`` stays cheap."""
    if name == "__version__":
        from bot.core.version import pinclaw_version

        return pinclaw_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
