"""Telegram: python-telegram-bot behind PinClaw's channel port."""
