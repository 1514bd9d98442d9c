"""What ``pinclaw agent -m`` does before its turn: little, and only what the config uses.

A one-shot command pays for every import and every start-up step, so each part
is loaded or done when it is first needed: a command's own module when it runs,
a table's validator when the file has the table, a tool's argument model when
a call is validated, the CA bundle before the first TLS connection, the
sandbox probe before the first shell command. These tests pin that down, and
that the shortcuts give what the long way gives.
"""

from __future__ import annotations

import argparse
import copy
import os
import ssl
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from bot.cli.main import _COMMANDS, _command_in, build_parser
from bot.config import Config, _tables_in_file, parse_config
from bot.config.env_refs import UnsetVariable, interpolate
from bot.core.errors import ConfigError
from bot.core.tls import pending_ssl_context
from tests.cli_helpers import local_config, write_config
from tests.fake_llm import FakeLLM

ROOT = Path(__file__).resolve().parents[1]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_each_command_parses_the_same_with_only_its_own_parser() -> None:
    full = _subcommands(build_parser())
    assert list(full) == [name for names, _ in _COMMANDS for name in names]
    for name, whole in full.items():
        alone = _subcommands(build_parser(name))
        assert name in alone
        assert alone[name].format_help() == whole.format_help()


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["agent", "-m", "hi"], "agent"),
        (["--config", "agent", "chat"], "chat"),
        (["--config=x.toml", "--log-level", "debug", "sandbox-exec"], "sandbox-exec"),
        (["--conf", "x.toml", "agent"], None),  # an abbreviation: argparse's to judge
        (["--help"], None),
        (["--version"], None),
        (["agnet", "-m", "hi"], None),
        ([], None),
        (["--config"], None),
    ],
)
def test_the_command_is_found_only_where_it_is_plain(argv: list[str], command: str | None) -> None:
    assert _command_in(argv) == command


def _probe(home: Path, code: str) -> str:
    environ = {"PATH": os.environ["PATH"], "HOME": str(home), "TZ": "UTC"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=environ,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1]


def test_one_turn_loads_only_what_it_uses(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url))
    code = (
        "import sys\n"
        "from bot.cli.main import main\n"
        "from bot.core import tls\n"
        "assert main(['agent', '-m', 'hi']) == 0\n"
        "unused = ['bot.cli.service', 'bot.cli.doctor', 'bot.cli.status', 'bot.daemon.router',\n"
        "          'bot.media.prepare', 'bot.hardware.gpio', 'bot.hardware.serial_io',\n"
        "          'bot.hardware.sensors', 'bot.store.pairing', 'bot.security.sandbox.bwrap',\n"
        "          'bot.security.approval', 'bot.agent.xml_tools', 'tools.sensor_chart',\n"
        "          'tools.delegate', 'html.parser', 'logging.handlers']\n"
        "from bot.config import HardwareConfig, WebConfig\n"
        "print(sorted(m for m in unused if m in sys.modules),\n"
        "      bool(tls._loaded), HardwareConfig.__pydantic_complete__,\n"
        "      WebConfig.__pydantic_complete__)\n"
    )
    assert _probe(home, code) == "[] False False False"


def test_the_collector_is_paused_for_start_up_and_comes_back_frozen(tmp_path: Path) -> None:
    code = (
        "import gc\n"
        "from bot.cli.startup import pause_collector, resume_collector\n"
        "resume_collector()\n"  # nothing was paused: nothing happens
        "assert gc.isenabled() and gc.get_freeze_count() == 0\n"
        "pause_collector()\n"
        "assert not gc.isenabled()\n"
        "resume_collector()\n"
        "print(gc.isenabled(), gc.get_freeze_count() > 0)\n"
    )
    assert _probe(tmp_path, code) == "True True"


def test_the_ca_bundle_waits_for_the_first_tls_request(tmp_path: Path) -> None:
    code = (
        "import asyncio, httpx\n"
        "from bot.core import tls\n"
        "from bot.daemon.app import _tls_ready, core_client\n"
        "async def main():\n"
        "    async with core_client() as client:\n"
        "        context = tls.pending_ssl_context()\n"
        "        await _tls_ready(httpx.Request('GET', 'http://127.0.0.1:1/'))\n"
        "        before = context.cert_store_stats()['x509_ca']\n"
        "        await _tls_ready(httpx.Request('GET', 'https://example.org/'))\n"
        "        after = context.cert_store_stats()['x509_ca']\n"
        "        print(before, after > 100, tls.shared_ssl_context() is context)\n"
        "asyncio.run(main())\n"
    )
    assert _probe(tmp_path, code) == "0 True True"


def test_the_shared_context_has_the_default_client_settings() -> None:
    ours, default = pending_ssl_context(), ssl.create_default_context()
    for setting in ("protocol", "verify_mode", "check_hostname", "options", "verify_flags"):
        assert getattr(ours, setting) == getattr(default, setting), setting
    assert (ours.minimum_version, ours.maximum_version) == (
        default.minimum_version,
        default.maximum_version,
    )


def _model_state(model: BaseModel, path: str = "config") -> dict[str, Any]:
    """Each table's values, type and the keys set in it, all the way down."""
    found: dict[str, Any] = {path: (type(model), model.model_fields_set, repr(model))}
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            found |= _model_state(value, f"{path}.{name}")
    return found


@pytest.mark.parametrize(
    "raw",
    [
        tomllib.loads((ROOT / "pinclaw.example.toml").read_text()),
        {"provider": {"kind": "ollama", "model": "m"}},
        {
            "provider": {"kind": "openai", "model": "m", "base_url": "http://x/v1"},
            "hardware": {
                "i2c": {"buses": [1]},
                "sensors": {"t": {"driver": "bme280", "address": 0x76}},
            },
            "web": {"listen": "off"},
            "memory": {"enabled": False},
            "security": {"forbidden_paths": ["/srv"]},
        },
        {"provider": {"kind": "ollama", "model": "m"}, "hardware": {}, "mcp": {"servers": []}},
    ],
)
def test_validating_only_the_tables_in_the_file_gives_the_whole_validation(
    raw: dict[str, Any],
) -> None:
    env = {"OPENAI_API_KEY": "sk-test-key", "TELEGRAM_BOT_TOKEN": "1:abc", "HA_TOKEN": "token"}
    unset: list[UnsetVariable] = []
    data = interpolate(copy.deepcopy(raw), env, unset)
    assert unset == []
    data.pop("channels", None)
    quick = _tables_in_file(copy.deepcopy(data), {})
    assert quick is not None
    whole = Config.model_validate(data).model_copy(update={"channels": {}})
    assert quick == whole
    assert _model_state(quick) == _model_state(whole)
    assert quick.model_dump() == whole.model_dump()


@pytest.mark.parametrize(
    "raw",
    [
        {},  # no provider
        {"provider": 3},
        {"provider": {"kind": "ollama", "model": "m"}, "nope": 1},
        {"provider": {"kind": "ollama", "model": ""}},
        {"provider": {"kind": "ollama", "model": "m"}, "agents": {"a": {"description": "d"}}},
    ],
)
def test_anything_unusual_goes_the_whole_way(raw: dict[str, Any]) -> None:
    assert _tables_in_file(copy.deepcopy(raw), {}) is None


def test_an_error_in_a_table_names_the_key_as_before() -> None:
    raw = {"provider": {"kind": "ollama", "model": "m"}, "agent": {"max_tool_iterations": 0}}
    with pytest.raises(ConfigError, match=r"^c\.toml: agent\.max_tool_iterations: ") as caught:
        parse_config(raw, {}, source="c.toml")
    assert "\n" not in str(caught.value)
