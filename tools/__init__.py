"""PinClaw's agent tools: one module per family, each with ``build(config) -> list[Tool]``."""
