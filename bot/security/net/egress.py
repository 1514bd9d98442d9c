"""PinClaw's egress proxy: the only way from a sandboxed command to the network.

Every sandboxed command has a network namespace of its own; one that may use
the network reaches this proxy through the relay in its sandbox
(``sandbox/relay.py``) and a Unix socket bind-mounted in. The proxy speaks
plain HTTP proxying: ``CONNECT host:port`` opens a tunnel (HTTPS, and any TCP
protocol whose client can use an HTTP proxy), and a request with an absolute
``http://`` URI is forwarded (one request per connection, sent with
``Connection: close``).

Every destination is judged like the ``http_request`` tool's
(``NetGuard.addresses``): the name is resolved here, once, every address it
has must be public unless ``security.allowed_hosts`` names it, and the checked
address is the one dialled, so a DNS answer that changes in between is never
used. PinClaw's own listening ports on this machine are refused even when
``allowed_hosts`` opens the loopback (``own_ports``). A refusal is logged and
answered with ``403`` and a sentence naming the address and the reason.

One proxy per security kit (so one per process); each command that may use
the network gets a door of its own, a socket ``DATA_DIR/egress-PID-N.sock``
that listens only while the command runs; when it ends, every connection it
opened is cut. The data folder is hidden from commands, and the systemd
helper (which has its own ``/tmp``) can reach it there.

The browser tools cannot use a Unix socket: Chromium takes an HTTP proxy on
TCP. Their door (``tcp_door``) listens on a loopback port while the browser
runs, and every connection must sign in (``Proxy-Authorization: Basic``) as a
visitor the door admitted: one per browser call, with a random name and
password, so other local processes cannot use the port, and each call learns
what it reached and what was refused.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import functools
import logging
import os
import secrets
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from bot.core.errors import Refused, ToolError
from bot.security.net.own_ports import is_own

log = logging.getLogger(__name__)

Judge = Callable[[str, int], Awaitable[list[str]]]
"""(host, port) → the addresses it may be dialled at; ``Refused`` or ``ToolError`` if none."""

HEAD_LIMIT = 64 * 1024
HEAD_TIMEOUT_S = 30.0
CHUNK = 64 * 1024
_PROXY_ONLY = frozenset({b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive"})
_REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    405: "Method Not Allowed",
    407: "Proxy Authentication Required",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    504: "Gateway Timeout",
}


class ProxyError(Exception):
    """What the proxy answers instead of connecting: an HTTP status and a sentence."""

    def __init__(self, status: int, text: str, *, headers: tuple[str, ...] = ()) -> None:
        super().__init__(text)
        self.status = status
        self.text = text
        self.headers = headers

    def response(self) -> bytes:
        """The whole HTTP response, plain text."""
        body = f"{self.text}\n".encode()
        head = (
            f"HTTP/1.1 {self.status} {_REASONS.get(self.status, 'Error')}\r\n"
            + "".join(f"{header}\r\n" for header in self.headers)
            + "Content-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        return head.encode() + body


@dataclass(frozen=True, slots=True)
class ProxyRequest:
    """Where a client wants to go, and what to send there first (None: a CONNECT tunnel)."""

    host: str
    port: int
    first: bytes | None

    @property
    def where(self) -> str:
        """``host:port`` as a person writes it."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_head(head: bytes) -> ProxyRequest:
    """Read a proxy request's head (through the blank line); ``ProxyError`` if unusable."""
    line, _, rest = head.partition(b"\r\n")
    try:
        method, target, version = line.decode("ascii").split(" ")
    except (UnicodeDecodeError, ValueError):
        raise ProxyError(400, "this is not an HTTP proxy request") from None
    if method == "CONNECT":
        host, port = _host_port(f"//{target}", None)
        return ProxyRequest(host, port, None)
    parts = urlsplit(target)
    if parts.scheme.lower() != "http":
        raise ProxyError(
            400 if parts.scheme else 405,
            f"{target} cannot be forwarded: send http:// URLs in full, and use CONNECT "
            "for https:// and everything else",
        )
    host, port = _host_port(target, 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = [
        field
        for field in rest.split(b"\r\n")
        if field and field.split(b":", 1)[0].strip().lower() not in _PROXY_ONLY
    ]
    first = b"\r\n".join([f"{method} {path} {version}".encode(), *headers, b"Connection: close"])
    return ProxyRequest(host, port, first + b"\r\n\r\n")


def _host_port(url: str, default: int | None) -> tuple[str, int]:
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or default
    except ValueError:
        host, port = None, None
    if not host or not port:
        raise ProxyError(400, f"{url.removeprefix('//')} does not name a host and port")
    return host, port


@dataclass(eq=False)
class Visitor:
    """One caller of a shared door: its credentials, and the hosts it reached or was refused."""

    name: str
    password: str
    reached: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    """A sentence for each refusal: "127.0.0.2:80: the address 127.0.0.2 is …"."""
    unreachable: dict[str, str] = field(default_factory=dict)
    """``host:port`` → why it could not be reached (not found, no answer)."""
    connections: set[asyncio.Task[None]] = field(default_factory=set)

    def refused_at(self, host: str, port: int) -> str | None:
        """Why ``host``:``port`` was refused to this visitor, if it was."""
        where = ProxyRequest(host, port, None).where
        return next((r for r in self.refused if r.startswith(f"{where}: ")), None)


@dataclass(eq=False)
class _Door:
    """One socket, its server and the connections it carries.

    A Unix door serves one command (``visitors`` is None); the TCP door serves
    the visitors it admitted, each signing in with its own credentials.
    """

    path: Path | None
    listening: socket.socket
    who: str = "a sandboxed command"
    proxy: str = "sandbox proxy"
    server: asyncio.Server | None = None
    connections: set[asyncio.Task[None]] = field(default_factory=set)
    reached: list[str] = field(default_factory=list)  # hosts let through, for the caller
    visitors: dict[str, Visitor] | None = None

    async def close(self) -> None:
        """Stop listening, cut the connections, remove the socket file."""
        if self.server is not None:
            self.server.close()
        for task in list(self.connections):
            task.cancel()
        await asyncio.gather(*self.connections, return_exceptions=True)
        self.listening.close()
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()


class TcpDoor:
    """The browser's door: a loopback port; ``visit`` admits one call's credentials."""

    def __init__(self, door: _Door) -> None:
        self._door = door
        host, port = door.listening.getsockname()[:2]
        self.server = f"http://{host}:{port}"
        """The proxy's address as Chromium takes it."""

    @contextlib.asynccontextmanager
    async def visit(self) -> AsyncIterator[Visitor]:
        """Credentials valid inside the block; its connections are cut when it ends."""
        visitors = self._door.visitors
        assert visitors is not None, "a TCP door always has visitors"
        visitor = Visitor(secrets.token_hex(8), secrets.token_urlsafe(24))
        visitors[visitor.name] = visitor
        try:
            yield visitor
        finally:
            visitors.pop(visitor.name, None)
            for task in list(visitor.connections):
                task.cancel()
            await asyncio.gather(*visitor.connections, return_exceptions=True)


class EgressProxy:
    """The HTTP proxy behind every sandboxed command that may use the network.

    Each command gets a door of its own (``door``): a socket that listens
    while the command runs; when it ends, its connections are cut, so nothing
    it opened outlives it.
    """

    def __init__(
        self,
        judge: Judge,
        folder: Path,
        *,
        configured_ports: Collection[int] = (),
        connect_timeout_s: float = 20.0,
    ) -> None:
        self._judge = judge
        self.folder = folder
        self._configured = frozenset(configured_ports)
        self._connect_s = connect_timeout_s
        self._opened = 0
        self._doors: set[_Door] = set()

    @contextlib.asynccontextmanager
    async def door(self, reached: list[str] | None = None) -> AsyncIterator[str]:
        """A socket for one command, listening inside the block; its path.

        ``reached`` collects the hosts the command was let through to (what it read from).
        """
        self._opened += 1
        path = self.folder / f"egress-{os.getpid()}-{self._opened}.sock"
        try:
            listening = await asyncio.to_thread(_listen, path)
        except OSError as exc:
            raise ToolError(
                f"the command's way to the network cannot be opened at {path}: "
                f"{exc.strerror or exc}"
            ) from None
        door = _Door(path, listening, reached=reached if reached is not None else [])
        self._doors.add(door)
        try:
            door.server = await asyncio.start_unix_server(
                functools.partial(self._serve, door), sock=listening, limit=HEAD_LIMIT
            )
            yield os.fspath(path)
        finally:
            self._doors.discard(door)
            await door.close()

    @contextlib.asynccontextmanager
    async def tcp_door(self, who: str = "the browser") -> AsyncIterator[TcpDoor]:
        """A loopback TCP port listening inside the block, for visitors it admits."""
        listening = socket.create_server(("127.0.0.1", 0))
        listening.setblocking(False)
        door = _Door(None, listening, who=who, proxy="network policy", visitors={})
        self._doors.add(door)
        try:
            door.server = await asyncio.start_server(
                functools.partial(self._serve, door), sock=listening, limit=HEAD_LIMIT
            )
            yield TcpDoor(door)
        finally:
            self._doors.discard(door)
            await door.close()

    async def stop(self) -> None:
        """Close every open door and cut its connections; idempotent."""
        doors, self._doors = list(self._doors), set()
        for door in doors:
            await door.close()

    async def _serve(
        self, door: _Door, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            door.connections.add(task)
        visitor: list[Visitor] = []  # who signed in on this connection, once it has
        try:
            await self._exchange(door, reader, writer, visitor)
        except ProxyError as exc:
            with contextlib.suppress(ConnectionError):
                writer.write(exc.response())
                await writer.drain()
        except Exception:  # one broken connection must not take the proxy down
            log.exception("the egress proxy failed on one connection")
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            if task is not None:
                door.connections.discard(task)
                for found in visitor:
                    found.connections.discard(task)

    async def _exchange(
        self,
        door: _Door,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        visitor: list[Visitor],
    ) -> None:
        try:
            async with asyncio.timeout(HEAD_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise ProxyError(431, "the request head is too large") from None
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            return  # the client went away (or never spoke): nothing to answer
        guest = _signed_in(door, head)
        task = asyncio.current_task()
        if guest is not None and task is not None:
            visitor.append(guest)
            guest.connections.add(task)
        request = parse_head(head)
        try:
            addresses = await self._judged(door, request, guest)
            reached = door.reached if guest is None else guest.reached
            if request.host not in reached:
                reached.append(request.host)
            up_reader, up_writer = await self._connect(request, addresses)
        except ProxyError as exc:
            if guest is not None and exc.status != 403:
                guest.unreachable[request.where] = exc.text
            raise
        try:
            if request.first is None:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
            else:  # the request goes up; its body and the answer follow by the splice
                up_writer.write(request.first)
                await up_writer.drain()
            await _splice(reader, writer, up_reader, up_writer)
        finally:
            up_writer.close()
            with contextlib.suppress(OSError):
                await up_writer.wait_closed()

    async def _judged(
        self, door: _Door, request: ProxyRequest, visitor: Visitor | None
    ) -> list[str]:
        """The addresses ``request`` may be dialled at; ``ProxyError`` 403 when none."""
        try:
            addresses = await self._judge(request.host, request.port)
        except Refused as exc:
            raise _refusal(door, request, str(exc), visitor) from None
        except ToolError as exc:
            raise ProxyError(502, f"{request.where} cannot be reached: {exc}") from None
        for address in addresses:
            if await asyncio.to_thread(is_own, address, request.port, self._configured):
                reason = f"port {request.port} is PinClaw's own"
                raise _refusal(door, request, reason, visitor)
        return addresses

    async def _connect(
        self, request: ProxyRequest, addresses: list[str]
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        problem = "it has no address"
        for address in addresses:
            try:
                async with asyncio.timeout(self._connect_s):
                    return await asyncio.open_connection(address, request.port, limit=CHUNK)
            except TimeoutError:
                problem = f"{address} did not answer within {self._connect_s:g} s"
            except OSError as exc:
                problem = f"{address}: {exc.strerror or exc}"
        status = 504 if "did not answer" in problem else 502
        raise ProxyError(status, f"{request.where} cannot be reached: {problem}")


def _refusal(
    door: _Door, request: ProxyRequest, reason: str, visitor: Visitor | None
) -> ProxyError:
    log.warning("%s was refused %s: %s", door.who, request.where, reason)
    if visitor is not None:
        visitor.refused.append(f"{request.where}: {reason}")
    return ProxyError(403, f"PinClaw's {door.proxy} refused {request.where}: {reason}")


def _signed_in(door: _Door, head: bytes) -> Visitor | None:
    """The visitor whose credentials ``head`` carries (None at a Unix door); 407 if none."""
    if door.visitors is None:
        return None
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() != b"proxy-authorization":
            continue
        scheme, _, token = value.strip().partition(b" ")
        if scheme.lower() != b"basic":
            break
        try:
            user, _, password = base64.b64decode(token.strip(), validate=True).partition(b":")
        except (binascii.Error, ValueError):
            break
        found = door.visitors.get(user.decode("utf-8", "replace"))
        if found is not None and secrets.compare_digest(password, found.password.encode()):
            return found
        break
    raise ProxyError(
        407,
        "sign in to PinClaw's proxy with the credentials of the call",
        headers=('Proxy-Authenticate: Basic realm="PinClaw"',),
    )


async def _splice(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    """Copy both ways until the destination is done (or both sides are)."""
    up = asyncio.create_task(_copy(reader, up_writer), name="egress: command to destination")
    down = asyncio.create_task(_copy(up_reader, writer), name="egress: destination to command")
    try:
        done, _ = await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        if down not in done:  # the command has said all it will: wait for the answer
            await down
    finally:
        for task in (up, down):
            task.cancel()
        await asyncio.gather(up, down, return_exceptions=True)


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


def _listen(path: Path) -> socket.socket:
    """A Unix socket listening at ``path``, however long it is (bound through the folder's
    descriptor), readable by this user only; sockets left by dead processes removed."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _remove_stale(path.parent)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        server.bind(f"/proc/self/fd/{folder}/{path.name}")
        os.chmod(path, 0o600)
        server.listen(64)
    except OSError:
        server.close()
        raise
    finally:
        os.close(folder)
    server.setblocking(False)
    return server


def _remove_stale(folder: Path) -> None:
    for found in folder.glob("egress-*-*.sock"):
        pid = found.name.split("-")[1]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                found.unlink()
        except OSError:
            continue  # alive, someone else's
