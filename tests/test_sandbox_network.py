"""In the sandbox, the host's loopback, private networks and PinClaw's own ports are out of reach.

Every call runs through the real policy gate and the real ``shell`` tool in real
bubblewrap (CI installs it) at ``full`` autonomy, where the classifier lets
nearly everything run, so the sandbox and the egress proxy are the only walls.
The lines compute their addresses at run time (``echo BASE64 | base64 -d |
bash``, strings glued together in Python) so that the classifier cannot see them.

The listeners that stand for other services on this machine run in a process
of their own and count connections; the one that stands for PinClaw's own port
runs in this process, as the daemon's own servers do. Counts are exact: a
refused destination is never connected to, an allowed one exactly once per
request.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.agent.tool_registry import ToolRegistry
from bot.config import LoadedConfig, parse_config
from bot.core.conversation import ToolCall
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext, ToolResult
from bot.security.approval import ApprovalOutcome, ApprovalRequest
from bot.security.audit import AuditLog
from bot.security.gate import PolicyGate
from bot.security.kit import SecurityKit, build_security
from bot.security.net.egress import EgressProxy, ProxyError, parse_head
from bot.security.net.own_ports import is_local
from bot.security.net.policy import Resolver
from bot.security.sandbox.net import SYSTEM_PYTHON, find_relay
from bot.security.sandbox.wire import SOCKET_ENV
from tests.test_shell_gate import Listener
from tests.test_shell_sandbox import SocketActivation
from tools.shell import build

COUNTING = r"""
import socket, sys, threading
server = socket.create_server((sys.argv[1], 0))
count, lock = 0, threading.Lock()
def answer(conn):
    with conn:
        conn.settimeout(10)
        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        except OSError:
            pass
def serve():
    global count
    while True:
        conn, _ = server.accept()
        with lock:
            count += 1
        threading.Thread(target=answer, args=(conn,), daemon=True).start()
threading.Thread(target=serve, daemon=True).start()
print(server.getsockname()[1], flush=True)
for _ in sys.stdin:
    with lock:
        print(count, flush=True)
"""


class OutsideListener:
    """A TCP server on ``host`` in another process (not PinClaw's), counting connections."""

    def __init__(self, host: str) -> None:
        self.host = host
        self._proc = subprocess.Popen(
            [sys.executable, "-c", COUNTING, host],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        self.port = int(self._proc.stdout.readline())

    @property
    def count(self) -> int:
        """Connections accepted so far."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write("count\n")
        self._proc.stdin.flush()
        return int(self._proc.stdout.readline())

    def close(self) -> None:
        """Stop the process."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=10)
        self._proc.stdout.close()


@pytest.fixture(scope="module")
def outside() -> Iterator[dict[str, OutsideListener]]:
    """Local services that are not PinClaw: on 127.0.0.1, 127.0.0.2 and 127.0.0.3."""
    listeners = {host: OutsideListener(host) for host in ("127.0.0.1", "127.0.0.2", "127.0.0.3")}
    try:
        yield listeners
    finally:
        for listener in listeners.values():
            listener.close()


@pytest.fixture
def own() -> Iterator[Listener]:
    """A server in this process: it stands for the daemon's status endpoint or panel."""
    listener = Listener()
    try:
        yield listener
    finally:
        listener.close()


class Approving:
    """Approves every request, recording it (a person tapping "Allow once")."""

    def __init__(self) -> None:
        self.requests: list[ApprovalRequest] = []

    async def request_approval(self, request: ApprovalRequest) -> ApprovalOutcome:
        self.requests.append(request)
        return ApprovalOutcome("approved", by="ana")


def make_gate(
    data: Path,
    *,
    autonomy: str = "full",
    allowed: Sequence[str] = ("127.0.0.2",),
    listen: str = "off",
    resolver: Resolver | None = None,
) -> tuple[PolicyGate, SecurityKit]:
    raw: dict[str, Any] = {
        "provider": {"kind": "ollama", "model": "m"},
        "security": {
            "autonomy": autonomy,
            "shell_sandbox": "required",
            "shell_timeout_s": 20,
            "max_tool_calls_per_hour": 0,
            "allowed_hosts": list(allowed),
        },
        "web": {"listen": listen},
    }
    loaded = LoadedConfig(parse_config(raw, {}), data / "config.toml", data)
    kit = build_security(loaded, resolver=resolver)
    registry = ToolRegistry(build(loaded, kit), max_output_chars=100_000)
    audit = AuditLog(data.parent / f"audit-{data.name}.jsonl")
    return PolicyGate(registry, config=kit.config, audit=audit, redactor=kit.redactor), kit


@pytest.fixture
async def kits() -> Any:
    """Every kit a test made is closed after it: its egress proxy stops."""
    made: list[SecurityKit] = []
    yield made
    for kit in made:
        await kit.aclose()


async def shell(gate: PolicyGate, data: Path, command: str) -> ToolResult:
    ctx = ToolContext(
        SessionKey("test", "net"), data / "workspace", ZoneInfo("UTC"), sender_id="ana"
    )
    return await gate.execute(ToolCall("net", "shell", {"command": command}), ctx)


def hidden(script: str) -> str:
    """``script`` run by bash, unreadable to the classifier: as if computed at run time."""
    return f"echo {base64.b64encode(script.encode()).decode()} | base64 -d | bash"


def refusal(host: str, port: int, reason: str) -> str:
    return f"PinClaw's sandbox proxy refused {host}:{port}: {reason}"


RAW_CONNECT = """python3 - <<'EOF'
import os, socket, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["http_proxy"])
with socket.create_connection((proxy.hostname, proxy.port), 10) as conn:
    conn.sendall(b"CONNECT {host}:{port} HTTP/1.1\\r\\nHost: {host}:{port}\\r\\n\\r\\n")
    print(conn.recv(4096).decode().replace("\\r", ""))
EOF"""

WITHOUT_PROXY = {  # the command ignores or drops the proxy: there is no route at all
    "python socket": (
        "python3 -c \"import socket; socket.create_connection(('{a}.' + '{b}', {port}), 5); "
        "print('CONNECTED')\"",
        "ConnectionRefusedError",
    ),
    "bash /dev/tcp": ("exec 3<>/dev/tcp/{host}/{port} && echo CONNECTED", "Connection refused"),
    "curl --noproxy": (
        "curl -sS -m 10 --noproxy '*' http://{host}:{port}/ && echo CONNECTED",
        "curl: (7) Failed to connect",
    ),
    "env -u http_proxy": (
        "env -u http_proxy -u HTTP_PROXY -u ALL_PROXY -u all_proxy curl -sS -m 10 "
        "http://{host}:{port}/ && echo CONNECTED",
        "curl: (7) Failed to connect",
    ),
    "unset in the shell": (
        "unset http_proxy HTTP_PROXY ALL_PROXY all_proxy; curl -sS -m 10 http://{host}:{port}/ "
        "&& echo CONNECTED",
        "curl: (7) Failed to connect",
    ),
}
THROUGH_PROXY = {  # the command uses the proxy: it answers 403 and names the reason
    "curl": "curl -sS -m 10 http://{host}:{port}/; echo",
    "curl CONNECT": "curl -sS -m 10 -p http://{host}:{port}/; echo",
    "raw CONNECT": RAW_CONNECT,
}


def fill(script: str, host: str, port: int) -> str:
    """``script`` for ``host``:``port``, hidden from the classifier (python -c is already)."""
    a, b = host.rsplit(".", 1)
    line = script.replace("{host}", host).replace("{port}", str(port))
    line = line.replace("{a}", a).replace("{b}", b)
    return line if line.startswith("python3 -c") else hidden(line)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.3"])
@pytest.mark.parametrize("name", list(WITHOUT_PROXY))
async def test_a_computed_loopback_address_has_no_route_at_full_autonomy(
    tmp_path: Path,
    outside: dict[str, OutsideListener],
    kits: list[SecurityKit],
    name: str,
    host: str,
) -> None:
    gate, kit = make_gate(tmp_path / "data")
    kits.append(kit)
    target = outside[host]
    before = target.count
    script, failure = WITHOUT_PROXY[name]
    result = await shell(gate, tmp_path / "data", fill(script, host, target.port))
    assert result.ok, result.error
    assert failure in result.output and "CONNECTED" not in result.output, result.output
    assert target.count == before


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.3"])
@pytest.mark.parametrize("name", list(THROUGH_PROXY))
async def test_the_proxy_refuses_a_loopback_address_with_403(
    tmp_path: Path,
    outside: dict[str, OutsideListener],
    kits: list[SecurityKit],
    name: str,
    host: str,
) -> None:
    gate, kit = make_gate(tmp_path / "data")
    kits.append(kit)
    target = outside[host]
    before = target.count
    result = await shell(gate, tmp_path / "data", fill(THROUGH_PROXY[name], host, target.port))
    assert result.ok, result.error
    why = f"the address {host} is a loopback address"
    if name == "curl CONNECT":  # curl shows only the status of a refused tunnel
        assert "CONNECT tunnel failed, response 403" in result.output, result.output
    else:
        assert refusal(host, target.port, why) in result.output, result.output
    if name == "raw CONNECT":
        assert "HTTP/1.1 403 Forbidden" in result.output
    assert target.count == before


async def test_an_allowed_loopback_address_is_reached_through_the_proxy_only(
    tmp_path: Path, outside: dict[str, OutsideListener], kits: list[SecurityKit]
) -> None:
    gate, kit = make_gate(tmp_path / "data", allowed=["127.0.0.2"])
    kits.append(kit)
    target = outside["127.0.0.2"]
    urllib = (
        'python3 -c "import urllib.request as u; '
        "print(u.urlopen('http://127.0.0.2:{port}/', timeout=10).read().decode())\""
    )
    before = target.count
    for line in (
        "curl -sS -m 10 http://127.0.0.2:{port}/",
        "curl -sS -m 10 -p http://127.0.0.2:{port}/",  # a CONNECT tunnel
        urllib,
    ):
        result = await shell(gate, tmp_path / "data", line.format(port=target.port))
        assert result.ok, result.error
        assert result.output.split("\n")[1:3] == ["exit code 0 (", "ok"] or (
            result.output.split("\n")[1].startswith("exit code 0 (")
            and result.output.split("\n")[2] == "ok"
        ), result.output
    assert target.count == before + 3
    direct = await shell(
        gate, tmp_path / "data", f"curl -sS -m 10 --noproxy '*' http://127.0.0.2:{target.port}/"
    )
    assert direct.ok and "exit code 7" in direct.output, direct.output  # no route: not reached
    assert target.count == before + 3


async def test_pinclaw_own_port_is_refused_even_when_allowed_hosts_names_loopback(
    tmp_path: Path, own: Listener, kits: list[SecurityKit]
) -> None:
    gate, kit = make_gate(tmp_path / "data", allowed=["127.0.0.1", "::1", "localhost"])
    kits.append(kit)
    why = f"port {own.port} is PinClaw's own"
    for host in ("127.0.0.1", "localhost"):
        line = f"curl -sS -m 10 http://{host}:{own.port}/; echo"
        result = await shell(gate, tmp_path / "data", line)
        assert result.ok, result.error
        assert refusal(host, own.port, why) in result.output, result.output
    connect = await shell(gate, tmp_path / "data", fill(RAW_CONNECT, "127.0.0.1", own.port))
    assert refusal("127.0.0.1", own.port, why) in connect.output, connect.output
    assert own.count == 0


async def test_the_configured_web_port_counts_as_pinclaw_own_in_any_process(
    tmp_path: Path, outside: dict[str, OutsideListener], kits: list[SecurityKit]
) -> None:
    """Another PinClaw process of this config (the daemon, beside ``pinclaw chat``)."""
    target = outside["127.0.0.1"]
    listen = f"127.0.0.1:{target.port}"
    gate, kit = make_gate(tmp_path / "data", allowed=["127.0.0.1"], listen=listen)
    kits.append(kit)
    before = target.count
    result = await shell(gate, tmp_path / "data", f"curl -sS -m 10 http://{listen}/; echo")
    assert refusal("127.0.0.1", target.port, f"port {target.port} is PinClaw's own") in (
        result.output
    ), result.output
    assert target.count == before


async def test_a_name_that_leads_to_loopback_is_refused_by_the_proxy(
    tmp_path: Path, outside: dict[str, OutsideListener], kits: list[SecurityKit]
) -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return {"sneaky.test": ["127.0.0.3"]}[host]

    gate, kit = make_gate(tmp_path / "data", resolver=resolver)
    kits.append(kit)
    target = outside["127.0.0.3"]
    before = target.count
    fetch = (
        'python3 -c "import urllib.request as u; '
        "u.urlopen('http://' + '{name}' + ':{port}/', timeout=10)\" 2>&1 | tail -n 1"
    )
    local = await shell(gate, tmp_path / "data", fetch.format(name="local' + 'host", port=1))
    assert "HTTP Error 403: Forbidden" in local.output, local.output
    pages = await shell(
        gate,
        tmp_path / "data",
        hidden(
            f"curl -sS -m 10 http://localhost:{target.port}/; echo; "
            f"curl -sS -m 10 http://sneaky.test:{target.port}/"
        ),
    )
    assert refusal("localhost", target.port, "the host localhost is a loopback address") in (
        pages.output
    ), pages.output
    assert (
        refusal(
            "sneaky.test",
            target.port,
            "the host sneaky.test resolves to 127.0.0.3, a loopback address",
        )
        in pages.output
    ), pages.output
    assert target.count == before


async def test_an_approved_call_at_supervised_gets_the_same_namespace(
    tmp_path: Path, outside: dict[str, OutsideListener], kits: list[SecurityKit]
) -> None:
    gate, kit = make_gate(tmp_path / "data", autonomy="supervised", allowed=["127.0.0.2"])
    kits.append(kit)
    approver = Approving()
    gate.set_approver(approver)
    allowed, other = outside["127.0.0.2"], outside["127.0.0.1"]
    before = allowed.count, other.count
    reached = await shell(
        gate, tmp_path / "data", f"curl -sS -m 10 http://127.0.0.2:{allowed.port}/"
    )
    assert reached.ok and reached.output.split("\n")[2] == "ok", reached.output
    direct = await shell(
        gate, tmp_path / "data", f"curl -sS -m 10 --noproxy '*' http://127.0.0.2:{allowed.port}/"
    )
    assert direct.ok and "exit code 7" in direct.output, direct.output
    computed = await shell(
        gate, tmp_path / "data", f"curl -sS -m 10 http://127.0.0.$((0+1)):{other.port}/"
    )
    why = "the address 127.0.0.1 is a loopback address"
    assert refusal("127.0.0.1", other.port, why) in computed.output, computed.output
    assert len(approver.requests) == 3
    assert (allowed.count, other.count) == (before[0] + 1, before[1])


async def test_only_a_networked_call_gets_a_way_out_and_only_while_it_runs(
    tmp_path: Path, kits: list[SecurityKit]
) -> None:
    data = tmp_path / "data"
    gate, kit = make_gate(data)
    kits.append(kit)
    quiet = await shell(gate, data, "printenv | grep -ci '^[a-z]*_proxy='")  # low risk
    assert quiet.ok and quiet.output.split("\n")[2] == "0", quiet.output
    assert kit.__dict__.get("egress") is None  # never built
    listing = "env | grep -i '^[a-z]*_proxy=' | LC_ALL=C sort; ls -A /run/pinclaw; ls -A /run"
    networked = await shell(gate, data, hidden(listing))
    assert networked.ok, networked.error
    lines = networked.output.split("\n")[2:-2]
    assert [line.split("=")[0] for line in lines[:6]] == [
        "ALL_PROXY",
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "all_proxy",
        "http_proxy",
        "https_proxy",
    ]
    assert len({line.split("=")[1] for line in lines[:6]}) == 1  # all the relay
    assert lines[6:] == ["egress.sock", "relay.py", "pinclaw"]  # nothing else in /run
    assert not list(data.glob("egress-*"))  # the command's door closed with it
    await kit.aclose()
    await kit.aclose()  # idempotent


async def test_the_relay_leaves_the_command_as_a_shell_would(
    tmp_path: Path, kits: list[SecurityKit]
) -> None:
    """Signals at their defaults (Python, which runs the relay, ignores SIGPIPE), the exit
    status passed on."""
    gate, kit = make_gate(tmp_path / "data")
    kits.append(kit)
    result = await shell(gate, tmp_path / "data", hidden("yes abc | head -n 2; exit 7"))
    assert result.ok, result.error
    assert result.output.split("\n")[1].startswith("exit code 7 (")
    assert result.output.split("\n")[2:4] == ["abc", "abc"], result.output
    assert "Broken pipe" not in result.output
    killed = await shell(gate, tmp_path / "data", hidden("kill -TERM $$"))
    assert killed.output.split("\n")[1].startswith("exit code 143 ("), killed.output


async def test_a_connection_is_cut_when_its_command_ends(
    tmp_path: Path, outside: dict[str, OutsideListener]
) -> None:
    """A tunnel left open (a background process, a silent server) does not outlive the call."""

    async def judge(host: str, port: int) -> list[str]:
        return [host]

    target = outside["127.0.0.2"]
    proxy = EgressProxy(judge, tmp_path)
    async with proxy.door() as path:
        reader, writer = await asyncio.open_unix_connection(path)
        writer.write(f"CONNECT 127.0.0.2:{target.port} HTTP/1.1\r\n\r\n".encode())
        assert await reader.readuntil(b"\r\n\r\n") == (
            b"HTTP/1.1 200 Connection established\r\n\r\n"
        )
    # The listener waits for a request it never gets: only the cut ends the tunnel now.
    assert await reader.read() == b""
    writer.close()
    assert not await asyncio.to_thread(lambda: list(tmp_path.glob("egress-*")))


async def test_under_systemd_the_helper_sandbox_reaches_the_proxy(
    tmp_path: Path, outside: dict[str, OutsideListener], monkeypatch: pytest.MonkeyPatch
) -> None:
    sockets = Path(tempfile.mkdtemp(prefix="pc-", dir="/tmp"))  # AF_UNIX paths must be short
    activation = SocketActivation(sockets / "sandbox.sock")
    monkeypatch.setenv(SOCKET_ENV, str(activation.path))
    gate, kit = make_gate(tmp_path / "data", allowed=["127.0.0.2"])
    try:
        allowed, other = outside["127.0.0.2"], outside["127.0.0.1"]
        before = allowed.count, other.count
        line = (
            f"curl -sS -m 10 http://127.0.0.2:{allowed.port}/; echo; "
            f"curl -sS -m 10 http://127.0.0.$((0+1)):{other.port}/"
        )
        result = await shell(gate, tmp_path / "data", line)
        assert result.ok, result.error
        assert result.output.split("\n")[2] == "ok", result.output
        why = "the address 127.0.0.1 is a loopback address"
        assert refusal("127.0.0.1", other.port, why) in result.output, result.output
        assert (allowed.count, other.count) == (before[0] + 1, before[1])
        assert activation.connections >= 2  # the check at start, then the command
    finally:
        await kit.aclose()
        activation.close()
        shutil.rmtree(sockets)


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"CONNECT example.com:443 HTTP/1.1\r\nHost: e.com\r\n\r\n", ("example.com", 443)),
        (b"CONNECT [::1]:22 HTTP/1.1\r\n\r\n", ("::1", 22)),
        (b"GET http://Example.COM/a?b=1 HTTP/1.1\r\nHost: e.com\r\n\r\n", ("example.com", 80)),
    ],
)
def test_a_proxy_request_names_its_destination(head: bytes, expected: tuple[str, int]) -> None:
    request = parse_head(head)
    assert (request.host, request.port) == expected


def test_a_forwarded_request_goes_in_origin_form_without_proxy_headers() -> None:
    head = (
        b"POST http://example.com:8080/a/b?c=d HTTP/1.1\r\nHost: example.com:8080\r\n"
        b"Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\n"
        b"Content-Length: 2\r\n\r\n"
    )
    request = parse_head(head)
    assert request.first == (
        b"POST /a/b?c=d HTTP/1.1\r\nHost: example.com:8080\r\nContent-Length: 2\r\n"
        b"Connection: close\r\n\r\n"
    )


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (b"GET /index.html HTTP/1.1\r\n\r\n", 405),
        (b"GET https://example.com/ HTTP/1.1\r\n\r\n", 400),
        (b"CONNECT example.com HTTP/1.1\r\n\r\n", 400),
        (b"\x16\x03\x01 hello\r\n\r\n", 400),
    ],
)
def test_what_the_proxy_cannot_forward_is_answered_plainly(head: bytes, status: int) -> None:
    with pytest.raises(ProxyError) as caught:
        parse_head(head)
    assert caught.value.status == status
    assert caught.value.response().startswith(f"HTTP/1.1 {status} ".encode())


def test_local_addresses_are_told_from_others() -> None:
    assert is_local("127.0.0.5") and is_local("0.0.0.0") and is_local("::ffff:127.0.0.1")
    assert not is_local("8.8.8.8") and not is_local("192.0.2.1")


def test_a_python_inside_a_forbidden_place_is_never_mounted() -> None:
    stdlib = os.path.realpath(os.path.dirname(os.__file__))
    relay = find_relay(hidden=[stdlib], forbidden=[stdlib])
    if not os.access(SYSTEM_PYTHON, os.X_OK) or os.path.realpath(SYSTEM_PYTHON).startswith(
        stdlib + "/"
    ):
        assert relay is None
        return
    assert relay is not None
    assert relay.python == os.path.realpath(SYSTEM_PYTHON)
    assert not any(stdlib in option for option in relay.mounts)
