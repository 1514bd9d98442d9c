"""MCP servers as tools, end to end: real servers written with the SDK's ``MCPServer``
(tests/mcp_servers.py) over stdio pipes and Streamable HTTP on 127.0.0.1, the real
``pinclaw`` command or daemon, and the fake LLM calling ``mcp_<server>_<tool>``."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.agent.tool_registry import ToolRegistry
from bot.cli.status import describe
from bot.config.mcp import McpServerConfig
from bot.core.conversation import ToolCall
from bot.core.errors import ToolError
from bot.core.messages import SessionKey
from bot.core.tool_api import Tool, ToolContext
from bot.mcp.manager import McpManager
from bot.mcp.tools import tool_name
from tests.cli_helpers import local_config, one_line, run, write_config
from tests.daemon_harness import running_daemon
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.fake_telegram import FakeTelegram
from tests.telegram_taps import button, request_in, said, tap

ROOT = Path(__file__).resolve().parent.parent
OWNER = 7001
ADA = FakeTelegram.user(OWNER, "Ada", "ada")


def stdio_table(name: str = "local", **extra: Any) -> dict[str, Any]:
    """A ``[[mcp.servers]]`` table running the test server as a subprocess."""
    return {
        "name": name,
        "command": sys.executable,
        "args": ["-m", "tests.mcp_servers", "stdio"],
        "env": {"PYTHONPATH": str(ROOT)},
        "disabled_tools": ["delete-everything"],
        **extra,
    }


def toml_table(table: dict[str, Any]) -> str:
    """The table as TOML (JSON strings, lists and inline tables are valid TOML values)."""
    lines = ["[[mcp.servers]]"]
    for key, value in table.items():
        if isinstance(value, dict):
            inner = ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items())
            lines.append(f"{key} = {{ {inner} }}")
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def http_server() -> Iterator[str]:
    """The test server over Streamable HTTP on 127.0.0.1; its endpoint URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.mcp_servers", "http", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("the MCP test server did not start listening")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


def test_stdio_tool_result_reaches_the_model(llm: FakeLLM, home: Path) -> None:
    table = stdio_table(auto_approve=["echo"])
    write_config(home, local_config(llm.url, toml_table(table)))
    llm.queue(CallTools([("mcp_local_echo", {"text": "hello pipes"})]), Say("Done."))
    done = run(home, "agent", "-m", "say hello through MCP")
    assert (done.returncode, done.stdout) == (0, "Done.\n"), done.stderr
    offered = llm.requests[0].view.tool_names
    assert {"mcp_local_echo", "mcp_local_add", "mcp_local_slow", "mcp_local_crash"} <= set(offered)
    assert "mcp_local_delete_everything" not in offered  # disabled_tools hides it
    [result] = llm.tool_results()
    assert "echo from mcp: hello pipes" in result
    # An MCP result is read from outside: it taints the turn, and says where from.
    assert result.startswith('<untrusted source="mcp_local_echo" from="the MCP server \'local\'">')
    tools = {t["function"]["name"]: t["function"] for t in llm.requests[0].body["tools"]}
    echo = tools["mcp_local_echo"]
    assert echo["description"].startswith("[from the MCP server 'local'] Repeat the text")
    assert echo["parameters"]["required"] == ["text"]
    assert "title" not in echo["parameters"]  # cleaned like our own tools' schemas


def test_streamable_http_tool_result_reaches_the_model(
    llm: FakeLLM, home: Path, http_server: str
) -> None:
    table = {"name": "remote", "url": http_server, "auto_approve": True}
    write_config(home, local_config(llm.url, toml_table(table)))
    llm.queue(CallTools([("mcp_remote_add", {"a": 2, "b": 40})]), Say("It is 42."))
    done = run(home, "agent", "-m", "add 2 and 40")
    assert (done.returncode, done.stdout) == (0, "It is 42.\n"), done.stderr
    assert "sum is 42" in llm.tool_results()[0]


def test_a_tool_not_auto_approved_is_refused_where_nobody_can_approve(
    llm: FakeLLM, home: Path
) -> None:
    write_config(home, local_config(llm.url, toml_table(stdio_table(auto_approve=["echo"]))))
    llm.queue(CallTools([("mcp_local_add", {"a": 1, "b": 2})]), Say("I could not."))
    done = run(home, "agent", "-m", "add 1 and 2")
    assert done.returncode == 0, done.stderr
    [result] = llm.tool_results()
    assert "needs a person's approval" in result and "MCP server 'local'" in result
    assert "sum is" not in result


async def test_an_mcp_tool_pauses_for_a_telegram_button(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(CallTools([("mcp_local_add", {"a": 20, "b": 22})]), Say("Done."))
    table = {
        "token": telegram.token,
        "api_base_url": telegram.url,
        "allowed_users": [OWNER],
        "poll_timeout_s": 1,
    }
    mcp = {"servers": [stdio_table()]}
    async with running_daemon(tmp_path, llm, {"telegram": table}, tables={"mcp": mcp}) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        status = await daemon.reporter.status()
        assert status["mcp"]["local"]["state"] == "connected"
        assert "  local  connected, 5 tools" in describe(status).splitlines()
        telegram.user_sends(OWNER, ADA, "add 20 and 22")
        request = await request_in(telegram, OWNER)
        assert "Approval needed" in request.text and "mcp_local_add" in request.text
        assert len(llm.requests) == 1  # paused: the model has not seen a result
        await tap(telegram, OWNER, ADA, button(request, "once"), request.message_id)
        await said(telegram, OWNER, "Done.")
    assert "sum is 42" in llm.tool_results()[-1]


async def test_timeouts_pictures_and_resources(tmp_path: Path) -> None:
    tools: list[Tool] = []
    config = McpServerConfig.model_validate(stdio_table(timeout_s=1), strict=False)
    manager = McpManager([config], tmp_path / "logs", tools.append)
    ctx = ToolContext(SessionKey("test", "1"), tmp_path, ZoneInfo("UTC"))
    await manager.start()
    try:
        registry = ToolRegistry(tools)
        slow = await registry.execute(ToolCall("1", "mcp_local_slow", {"seconds": 5}), ctx)
        assert not slow.ok and slow.error == "mcp_local_slow did not finish within 1 s"
        picture = await registry.execute(ToolCall("2", "mcp_local_picture", {}), ctx)
        assert picture.ok, picture.error
        assert picture.output.splitlines() == [
            "[image (image/png, about 300 bytes): not shown to you]",
            "[resource memo://today]",
            "buy soil",
        ]
        missing = await registry.execute(ToolCall("3", "mcp_local_echo", {}), ctx)
        assert not missing.ok and "'text' required" in (missing.error or "")
    finally:
        await manager.stop()


async def test_a_crashed_server_is_restarted_and_reported(tmp_path: Path) -> None:
    tools: dict[str, Tool] = {}
    config = McpServerConfig.model_validate(stdio_table(), strict=False)

    def add(item: Tool) -> None:
        tools[item.name] = item

    manager = McpManager([config], tmp_path / "logs", add)
    ctx = ToolContext(SessionKey("test", "1"), tmp_path, ZoneInfo("UTC"))
    await manager.start()
    try:
        assert manager.statuses()[0].state == "connected"
        crash = tools["mcp_local_crash"]
        with pytest.raises(ToolError, match="stopped answering"):
            await crash.run(ctx, crash.validate({}))
        down = manager.statuses()[0]
        assert down.state == "failed" and down.reason
        echo = tools["mcp_local_echo"]
        with pytest.raises(ToolError, match="the MCP server local is not running"):
            await echo.run(ctx, echo.validate({"text": "too early"}))
        for _ in range(100):
            if manager.statuses()[0].state == "connected":
                break
            await asyncio.sleep(0.1)
        back = manager.statuses()[0]
        assert (back.state, back.restarts) == ("connected", 1)
        result = await echo.run(ctx, echo.validate({"text": "again"}))
        assert result.output == "echo from mcp: again"
    finally:
        await manager.stop()


def test_mcp_list_shows_each_server_and_a_broken_one_does_not_stop_the_rest(
    llm: FakeLLM, home: Path
) -> None:
    broken = {"name": "broken", "command": str(home / "no-such-server")}
    servers = toml_table(stdio_table(auto_approve=True)) + toml_table(broken)
    write_config(home, local_config(llm.url, servers))
    listing = run(home, "mcp", "list")
    assert listing.returncode == 1
    lines = listing.stdout.splitlines()
    assert lines[0].split() == ["local", "connected,", "5", "tools"]
    assert lines[1].split() == ["tools:", "echo,", "add,", "slow,", "picture,", "crash"]
    assert lines[2].startswith("broken  failed: the command was not found")
    llm.queue(CallTools([("mcp_local_echo", {"text": "still here"})]), Say("Fine."))
    done = run(home, "agent", "-m", "echo this")
    assert (done.returncode, done.stdout) == (0, "Fine.\n"), done.stderr
    assert "echo from mcp: still here" in llm.tool_results()[0]


def test_both_command_and_url_is_a_one_line_config_error(llm: FakeLLM, home: Path) -> None:
    table = {**stdio_table(), "url": "http://127.0.0.1:1/mcp"}
    write_config(home, local_config(llm.url, toml_table(table)))
    done = run(home, "agent", "-m", "hi")
    assert done.returncode != 0
    line = one_line(done.stderr or done.stdout)
    assert "mcp.servers" in line and "both command and url" in line


def test_long_names_are_sanitized_and_capped() -> None:
    name = tool_name("my-server", "read.file/" + "x" * 80)
    assert name.startswith("mcp_my_server_read_file_") and len(name) == 64


def test_doctor_has_a_line_per_server(llm: FakeLLM, home: Path) -> None:
    broken = {"name": "broken", "command": str(home / "no-such-server")}
    write_config(home, local_config(llm.url, toml_table(stdio_table()) + toml_table(broken)))
    report = run(home, "doctor")
    lines = [line for line in report.stdout.splitlines() if "MCP server" in line]
    assert lines[0] == "✓ MCP server local: connects and lists 5 tools"
    assert lines[1].startswith("✗ MCP server broken: does not connect (the command was not found")


def test_without_mcp_servers_the_sdk_is_not_imported(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url))
    probe = (
        "import sys\n"
        "from bot.cli.main import main\n"
        "code = main(['agent', '-m', 'hi'])\n"
        "print(sorted(m for m in ('mcp', 'bot.mcp', 'httpx2') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home), "TZ": "UTC"},
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"
