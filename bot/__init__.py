"""PinClaw daemon core: configuration, providers, the agent loop, storage and the CLI."""

from bot.core.lean_imports import skip_unused_optional_imports

__version__ = "0.1.0"

skip_unused_optional_imports()
