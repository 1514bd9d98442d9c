"""``serial_list`` and ``serial_send`` through the registry, against fake boards.

The boards are real kernel ttys (a pty pair, ``tests.fake_serial.PtyDevice``)
or a TCP socket on 127.0.0.1, and PinClaw talks to them with the real pyserial;
``loop://`` is pyserial's own loopback. Only the list of the machine's USB ports
is faked (pyserial reads it from /sys).
"""

from __future__ import annotations

import asyncio
import os
import pwd
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.agent.tool_registry import ToolRegistry
from bot.config import LoadedConfig, parse_config
from bot.config.hardware import HardwareConfig, SerialPort
from bot.config.security import SecurityConfig
from bot.core.conversation import ToolCall
from bot.core.errors import ToolError
from bot.core.messages import SessionKey
from bot.core.tool_api import Tool, ToolContext, ToolResult
from bot.hardware import serial_io
from bot.security.kit import build_security
from bot.security.policy import decide
from tests.fake_serial import FLOOD_BYTES, PtyDevice, TcpDevice
from tools.serial_port import MAX_LINE, build

ROOT = Path(__file__).resolve().parents[1]


def loaded(tmp_path: Path, ports: dict[str, dict[str, Any]]) -> LoadedConfig:
    raw = {"provider": {"kind": "ollama", "model": "m"}, "hardware": {"serial": ports}}
    return LoadedConfig(parse_config(raw, {}), tmp_path / "c.toml", tmp_path)


def tools(tmp_path: Path, **ports: dict[str, Any]) -> ToolRegistry:
    config = loaded(tmp_path, ports)
    return ToolRegistry(build(config, build_security(config)))


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(SessionKey("test", "1"), tmp_path, ZoneInfo("UTC"))


async def send(registry: ToolRegistry, ctx: ToolContext, port: str, line: str) -> ToolResult:
    return await registry.execute(ToolCall("1", "serial_send", {"port": port, "line": line}), ctx)


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
async def test_a_line_gets_its_reply_with_each_line_ending(
    tmp_path: Path, ctx: ToolContext, ending: str
) -> None:
    with PtyDevice(ending) as board:
        registry = tools(tmp_path, board={"port": board.path, "line_ending": ending})
        pong = await send(registry, ctx, "board", "PING")
        temperature = await send(registry, ctx, "board", "TEMP?")
    assert (pong.ok, pong.output) == (True, "PONG")
    assert (temperature.ok, temperature.output) == (True, "21.5")
    assert board.sensor.received == ["PING", "TEMP?"]


async def test_println_replies_work_with_the_default_line_ending(
    tmp_path: Path, ctx: ToolContext
) -> None:
    with PtyDevice() as board:
        result = await send(tools(tmp_path, board={"port": board.path}), ctx, "board", "PRINTLN")
    assert (result.ok, result.output) == (True, "OK")


async def test_a_silent_device_gives_a_timeout_result(tmp_path: Path, ctx: ToolContext) -> None:
    with PtyDevice() as board:
        registry = tools(tmp_path, board={"port": board.path, "timeout_s": 0.3})
        result = await send(registry, ctx, "board", "SILENT")
        after = await send(registry, ctx, "board", "PING")
    assert not result.ok
    assert result.error == (
        f"no answer from {board.path} within 0.3 s "
        "(check that the device knows this command and runs at 9600 baud)"
    )
    assert after.output == "PONG"


async def test_a_reply_with_the_wrong_line_ending_says_so(tmp_path: Path, ctx: ToolContext) -> None:
    with PtyDevice("\r\n", reply_ending="\n") as board:
        registry = tools(
            tmp_path, board={"port": board.path, "line_ending": "\r\n", "timeout_s": 0.3}
        )
        result = await send(registry, ctx, "board", "PING")
    assert not result.ok
    assert result.error == (
        "the reply did not end with \\r\\n (CR LF) within 0.3 s; this is what arrived "
        "(it contains \\n (LF) line endings: check line_ending for this port)"
    )
    assert result.output == "PONG\n"


async def test_a_flood_is_cut_at_max_bytes(tmp_path: Path, ctx: ToolContext) -> None:
    with PtyDevice() as board:
        registry = tools(tmp_path, board={"port": board.path, "max_bytes": 64})
        result = await send(registry, ctx, "board", "FLOOD")
    assert FLOOD_BYTES > 64
    assert not result.ok
    assert result.error == (
        "the reply was cut at 64 bytes (max_bytes) before a line ending; this is its start"
    )
    assert result.output == "x" * 64


async def test_a_missing_or_unplugged_port_says_so(tmp_path: Path, ctx: ToolContext) -> None:
    missing = tmp_path / "ttyUSB0"
    result = await send(tools(tmp_path, board={"port": str(missing)}), ctx, "board", "PING")
    assert result.error == f"{missing} is not there; is the device plugged in?"

    with PtyDevice() as board:
        registry = tools(tmp_path, board={"port": board.path})
        assert (await send(registry, ctx, "board", "PING")).output == "PONG"
    unplugged = await send(registry, ctx, "board", "PING")
    assert unplugged.error == f"{board.path} is not there; is the device plugged in?"


async def test_a_file_that_is_not_a_tty_is_not_a_serial_port(
    tmp_path: Path, ctx: ToolContext
) -> None:
    plain = tmp_path / "notes.txt"
    plain.write_text("hello")
    result = await send(tools(tmp_path, board={"port": str(plain)}), ctx, "board", "PING")
    assert result.error == f"{plain} is not a serial port"


async def test_a_port_locked_by_another_program_is_in_use(tmp_path: Path, ctx: ToolContext) -> None:
    import serial  # type: ignore[import-untyped, unused-ignore]

    with PtyDevice() as board:
        registry = tools(tmp_path, board={"port": board.path})
        other = serial.serial_for_url(board.path, exclusive=True)  # e.g. a serial monitor
        try:
            busy = await send(registry, ctx, "board", "PING")
        finally:
            other.close()
        free = await send(registry, ctx, "board", "PING")
    assert busy.error == (
        f"{board.path} is in use by another program; close that program and try again"
    )
    assert free.output == "PONG"


def test_permission_denied_suggests_the_dialout_group(tmp_path: Path) -> None:
    def error_for(path: str) -> str:
        try:
            serial_io.send_line(SerialPort(port=path), "PING")
        except ToolError as exc:
            return str(exc)
        return "no error"

    with PtyDevice() as board:
        if os.geteuid() == 0:  # root opens anything: try as nobody, shut out of root's pty
            path, user = board.path, "nobody"
            said = _as_nobody(lambda: error_for(path))
        else:
            path, user = str(tmp_path / "ttyS0"), pwd.getpwuid(os.geteuid()).pw_name
            Path(path).touch(mode=0)
            said = error_for(path)
    assert said == (
        f"PinClaw may not open {path} (permission denied); add the user it runs as "
        f"to the dialout group (sudo usermod -aG dialout {user}) and restart it"
    )


def _as_nobody(call: Callable[[], str]) -> str:
    """What ``call`` returns in a forked child running as nobody.

    As nobody the child cannot read the interpreter's files, so pyserial is imported first.
    """
    import serial  # type: ignore[import-untyped, unused-ignore]  # noqa: F401

    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        said = "the child failed"
        try:
            os.setgid(65534)
            os.setuid(65534)
            said = call()
        finally:
            os.write(write_end, said.encode())
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        said = pipe.read().decode()
    os.waitpid(child, 0)
    return said


async def test_opening_keeps_dtr_up_after_the_close(tmp_path: Path, ctx: ToolContext) -> None:
    with PtyDevice() as board:
        assert board.hangs_up_on_close()
        await send(tools(tmp_path, board={"port": board.path}), ctx, "board", "PING")
        assert not board.hangs_up_on_close()  # so the next open does not reset an Arduino


async def test_loop_echoes_the_line(tmp_path: Path, ctx: ToolContext) -> None:
    result = await send(tools(tmp_path, loop={"port": "loop://"}), ctx, "loop", "hello ✓")
    assert (result.ok, result.output) == (True, "hello ✓")


async def test_a_socket_port_talks_to_a_tcp_device(tmp_path: Path, ctx: ToolContext) -> None:
    with socket.create_server(("127.0.0.1", 0)) as closed:
        nobody = f"socket://127.0.0.1:{closed.getsockname()[1]}"
    with TcpDevice("\r\n") as board:
        registry = tools(
            tmp_path,
            bridge={"port": board.url, "line_ending": "\r\n"},
            gone={"port": nobody},
        )
        pong = await send(registry, ctx, "bridge", "PING")
        temperature = await send(registry, ctx, "bridge", "TEMP?")
        refused = await send(registry, ctx, "gone", "PING")
    assert (pong.output, temperature.output) == ("PONG", "21.5")
    assert refused.error == f"nothing is listening at {nobody}"


async def test_calls_to_one_port_take_turns(tmp_path: Path, ctx: ToolContext) -> None:
    with PtyDevice() as board:
        registry = tools(tmp_path, board={"port": board.path})
        words = [f"word{i}" for i in range(6)]
        results = await asyncio.gather(*(send(registry, ctx, "board", f"ECHO {w}") for w in words))
    assert [r.output for r in results] == words  # each call got its own reply, none "in use"
    assert sorted(board.sensor.received) == sorted(f"ECHO {w}" for w in words)


def test_names_for_one_device_share_a_gate(tmp_path: Path) -> None:
    link = tmp_path / "by-id-arduino"
    link.symlink_to("/dev/ttyACM0")
    hardware = HardwareConfig(
        serial={
            "a": SerialPort(port="/dev/ttyACM0"),
            "b": SerialPort(port=str(link)),
            "c": SerialPort(port="/dev/ttyACM1"),
        }
    )
    links = serial_io.make_links(hardware)
    assert links["a"].gate is links["b"].gate
    assert links["a"].gate is not links["c"].gate


async def test_only_configured_one_line_sends_are_accepted(
    tmp_path: Path, ctx: ToolContext
) -> None:
    registry = tools(tmp_path, board={"port": "loop://"}, gps={"port": "/dev/ttyUSB1"})
    unknown = await send(registry, ctx, "/dev/ttyUSB0", "PING")
    assert (
        unknown.error == "there is no serial port named '/dev/ttyUSB0'; the ports are: board, gps"
    )
    two_lines = await send(registry, ctx, "board", "PING\nPING")
    assert two_lines.error == (
        "send one line at a time, without line breaks: PinClaw adds the port's line ending itself"
    )
    too_long = await send(registry, ctx, "board", "x" * (MAX_LINE + 1))
    assert too_long.error is not None
    assert f"'line': String should have at most {MAX_LINE} characters" in too_long.error


async def test_list_shows_configured_and_system_ports(
    tmp_path: Path, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    from serial.tools import list_ports  # type: ignore[import-untyped, unused-ignore]
    from serial.tools.list_ports_common import (  # type: ignore[import-untyped, unused-ignore]
        ListPortInfo,
    )

    with PtyDevice() as board:
        arduino = ListPortInfo(board.path, skip_link_detection=True)
        arduino.vid, arduino.pid, arduino.serial_number = 0x2341, 0x43, "8573531303"
        arduino.description, arduino.manufacturer = "Arduino Uno", "Arduino (www.arduino.cc)"
        uart = ListPortInfo("/dev/ttyAMA0", skip_link_detection=True)
        monkeypatch.setattr(list_ports, "comports", lambda: [uart, arduino])
        registry = tools(
            tmp_path,
            uno={"port": board.path, "baud": 115200},
            gps={"port": str(tmp_path / "ttyUSB7"), "line_ending": "\r\n"},
            bridge={"port": "socket://10.0.0.5:4000"},
            loop={"port": "loop://"},
        )
        result = await registry.execute(ToolCall("1", "serial_list", {}), ctx)
    uno = "Arduino Uno, USB 2341:0043, made by Arduino (www.arduino.cc), serial number 8573531303"
    assert result.output.splitlines() == [
        "Configured ports:",
        f"- uno: {board.path} (plugged in, {uno}); 115200 baud, lines end with \\n",
        f"- gps: {tmp_path / 'ttyUSB7'} (NOT PRESENT: unplugged, or the path is wrong); "
        "9600 baud, lines end with \\r\\n",
        "- bridge: socket://10.0.0.5:4000 (network port, reached when used); "
        "9600 baud, lines end with \\n",
        "- loop: loop:// (loopback for tests: answers with what it is sent); "
        "9600 baud, lines end with \\n",
        "Serial ports on this machine:",
        f"- {board.path}: {uno} [configured as uno]",
        "- /dev/ttyAMA0: no description",
    ]


def test_list_ports_reads_the_system(monkeypatch: pytest.MonkeyPatch) -> None:
    real = serial_io.list_ports()  # whatever this machine has; it must not fail
    assert all(isinstance(port, serial_io.PortInfo) for port in real)

    from serial.tools import list_ports  # type: ignore[import-untyped, unused-ignore]
    from serial.tools.list_ports_common import (  # type: ignore[import-untyped, unused-ignore]
        ListPortInfo,
    )

    usb = ListPortInfo("/dev/ttyUSB0", skip_link_detection=True)
    usb.vid, usb.pid, usb.description = 0x1A86, 0x7523, "USB Serial"
    monkeypatch.setattr(list_ports, "comports", lambda: [usb])
    assert serial_io.list_ports() == [
        serial_io.PortInfo("/dev/ttyUSB0", "USB Serial", "1a86", "7523", None, None)
    ]


def test_no_ports_no_tools_and_no_pyserial(tmp_path: Path) -> None:
    config = loaded(tmp_path, {})
    assert build(config, build_security(config)) == []
    code = (
        "import sys, tools.serial_port, bot.hardware.serial_io\n"
        "print(sorted(m for m in sys.modules if m == 'serial' or m.startswith('serial.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_sending_asks_in_supervised_mode_and_listing_does_not(
    tmp_path: Path, ctx: ToolContext
) -> None:
    config = loaded(tmp_path, {"board": {"port": "loop://"}})
    found: dict[str, Tool] = {t.name: t for t in build(config, build_security(config))}
    listing, sending = found["serial_list"], found["serial_send"]

    def action(autonomy: str, item: Tool, arguments: dict[str, Any]) -> str:
        policy = SecurityConfig.model_validate({"autonomy": autonomy})
        return decide(policy, item, item.assess(ctx, item.validate(arguments))).action

    line = {"port": "board", "line": "PING"}
    assert action("supervised", listing, {}) == "allow"
    assert action("supervised", sending, line) == "ask"
    assert action("readonly", sending, line) == "block"
    assert action("full", sending, line) == "allow"
    assert (sending.risk, sending.effect, sending.approval_fields) == (
        "medium",
        "actuate",
        ("port",),
    )
    assert sending.untrusted_output
