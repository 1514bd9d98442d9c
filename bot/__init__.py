"""PinClaw daemon core: configuration, providers, the agent loop, storage and the CLI."""

__version__ = "0.1.0"
