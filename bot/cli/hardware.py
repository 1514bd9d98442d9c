"""``pinclaw hardware``: check the wiring before involving the agent.

Lists the configured GPIO devices with their live state, scans the allowed I2C
buses (marking the configured sensors and reading them), and lists the serial
ports: the configured ones (present or not) and every port this machine has.
Only argparse is imported at the top: the parser is built for every command.
"""

from __future__ import annotations

import argparse
from typing import Any

Subparsers = argparse._SubParsersAction  # the type argparse gives add_subparsers


def add_hardware_commands(
    sub: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Register ``pinclaw hardware``."""
    hardware = sub.add_parser(
        "hardware", parents=[common], help="configured devices, live states, I2C scan, ports"
    )
    hardware.add_argument(
        "--no-sensors", action="store_true", help="do not take a reading from each sensor"
    )
    hardware.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    import asyncio

    from bot.config import load_config
    from bot.hardware.report import hardware_report

    loaded: Any = load_config(getattr(args, "config", None))
    return asyncio.run(hardware_report(loaded.config.hardware, sensors=not args.no_sensors))
