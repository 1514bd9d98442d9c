"""Slack: slack-bolt behind PinClaw's channel port."""
