"""PinClaw's chat channel adapters, one module per platform, loaded by name."""
