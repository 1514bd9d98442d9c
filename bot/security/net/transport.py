"""The plumbing under ``NetGuard``: an httpx transport whose every TCP connect is judged.

httpx 0.28 gives ``AsyncHTTPTransport`` no way to choose httpcore's network
backend, so ``GuardedTransport`` is a small ``httpx.AsyncBaseTransport`` (the
documented seam for custom transports) over an ``httpcore.AsyncConnectionPool``
built with ``network_backend=GuardedBackend(...)`` (httpcore's documented seam
for custom networking). It maps requests, responses and exceptions the way
httpx's own transport does, using public APIs on both sides only.

``GuardedBackend.connect_tcp`` resolves the host once, through the guard, and
dials the validated IP address itself: a DNS answer that changes between the
check and the connect cannot be used. httpcore still passes the original host
name to ``start_tls``, so SNI and certificate checks are on the name.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager

import httpcore
import httpx

from bot.core.errors import ToolError

Judge = Callable[[str, int], Awaitable[list[str]]]
"""(host, port) → the addresses it may be dialled at; raises ``Refused`` otherwise."""

_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
)


@contextmanager
def _mapped_errors(request: httpx.Request) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for core, mapped in _ERRORS:
            if isinstance(exc, core):
                raise mapped(str(exc) or type(exc).__name__, request=request) from exc
        raise


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """Connects only to addresses the judge returned, never to a name."""

    def __init__(self, judge: Judge) -> None:
        self._judge = judge
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Judge ``host`` (one resolution), then dial its validated addresses in turn."""
        addresses = await self._judge(host, port)
        failure: Exception = httpcore.ConnectError(f"{host} has no address to connect to")
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Unix sockets are local by definition: never."""
        raise ToolError("connecting to a local socket is not allowed")

    async def sleep(self, seconds: float) -> None:
        """Sleep (httpcore uses it between connection retries)."""
        await self._inner.sleep(seconds)


class _Body(httpx.AsyncByteStream):
    def __init__(self, stream: AsyncIterable[bytes], request: httpx.Request) -> None:
        self._stream = stream
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _mapped_errors(self._request):
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()


class GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport: every request's URL checked, every connect judged."""

    def __init__(
        self, check_url: Callable[[str], None], judge: Judge, ssl_context: ssl.SSLContext
    ) -> None:
        self._check_url = check_url
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context, network_backend=GuardedBackend(judge)
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send one request (no redirects here; each hop comes through again)."""
        self._check_url(str(request.url))
        if not isinstance(request.stream, httpx.AsyncByteStream):
            raise TypeError("GuardedTransport needs an async request body")
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _mapped_errors(request):
            response = await self._pool.handle_async_request(core_request)
        if not isinstance(response.stream, AsyncIterable):
            raise TypeError("httpcore returned a synchronous body to an async transport")
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream, request),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        """Close every pooled connection."""
        await self._pool.aclose()
