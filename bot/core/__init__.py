"""Ports and shared types: messages, the channel port, errors, tool API, delivery."""
