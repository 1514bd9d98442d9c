"""Discord: discord.py behind PinClaw's channel port."""
