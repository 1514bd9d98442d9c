"""The network guard: web requests reach public addresses only, judged after DNS, on every hop.

``NetGuard.check_url`` refuses what can be refused from the URL alone (other
schemes, user info, literal private addresses in any notation, ``localhost``).
Every connection then goes through ``transport.GuardedBackend``, which asks
``NetGuard.addresses``: the host is resolved once, refused if any address it
resolves to is not a public internet address (unless ``allowed_hosts`` names
the host, the address or a network containing it), and the validated address
is what gets dialled, so DNS rebinding between check and connect does not work.

``fetch`` follows redirects itself, hop by hop through the same guard, caps the
body while reading it and bounds the whole exchange by ``timeout_s``. Proxies
from the environment are ignored (``trust_env=False``): through a proxy the
guard would judge the proxy's address, not the destination's.
"""

from __future__ import annotations

import asyncio
import socket
import zlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from ipaddress import ip_address
from ssl import SSLCertVerificationError, SSLContext
from urllib.parse import urlsplit

import httpx

from bot.core.errors import Refused, ToolError
from bot.security.net.addresses import Allowlist, is_localhost, literal_ip, normal_host
from bot.security.net.transport import GuardedTransport

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""(host, port) → the IP addresses the name resolves to, as strings."""

USER_AGENT = "PinClaw/0.1"

_SAFE_ACROSS_ORIGINS = frozenset({"accept", "accept-language", "content-type", "user-agent"})


async def system_resolver(host: str, port: int) -> list[str]:
    """Resolve ``host`` with the event loop's ``getaddrinfo`` (the production resolver)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _standard_ip(host: str) -> bool:
    try:
        ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _split_host(url: str) -> str:
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


@dataclass(frozen=True, slots=True)
class Fetched:
    """One response as the web tools see it: where it ended, status, headers, a capped body."""

    url: str
    status: int
    reason: str
    headers: httpx.Headers
    body: bytes
    cut: bool
    redirects: tuple[str, ...] = ()

    @property
    def media_type(self) -> str:
        """The content type without parameters, lower case ("" when the server sent none)."""
        content_type: str = self.headers.get("content-type", "")
        return content_type.split(";", maxsplit=1)[0].strip().lower()


class NetGuard:
    """Judges URLs and addresses, and makes clients and fetches that obey the judgement."""

    def __init__(
        self,
        allowed_hosts: Iterable[str],
        *,
        ssl: SSLContext,
        timeout_s: float = 20.0,
        max_bytes: int = 2 * 1024 * 1024,
        max_redirects: int = 5,
        resolver: Resolver | None = None,
    ) -> None:
        self._allowed = Allowlist(allowed_hosts)
        self._ssl = ssl
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self._resolve = resolver or system_resolver

    def check_url(self, url: str) -> None:
        """Refuse a URL that is not plain http(s) or names a non-public address outright."""
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError):
            self._refuse_literal(url, _split_host(url))  # e.g. 0177.0.0.1, which httpx rejects
            raise Refused(f"{url!r} is not a valid http or https URL") from None
        if parsed.scheme not in ("http", "https"):
            raise Refused(f"{url} is refused: only http:// and https:// URLs can be fetched")
        if not parsed.host:
            raise Refused(f"{url!r} is not a valid http or https URL: it names no host")
        if parsed.userinfo:
            raise Refused(
                f"{url} is refused: a user name or password before the host is not accepted; "
                "send credentials in a header instead"
            )
        self._refuse_literal(url, parsed.host)

    def _refuse_literal(self, url: str, host: str) -> None:
        host = normal_host(host)
        if "%" in host:
            raise Refused(f"{url} is refused: {host} is not a plain host name or address")
        if self._allowed.has_name(host):
            return
        ip = literal_ip(host)
        if ip is not None:
            problem = self._allowed.problem(ip)
            if problem:
                spelled = host if _standard_ip(host) else f"{host} (that is {ip})"
                raise Refused(f"{url} is refused: {spelled} is {problem}")
        elif is_localhost(host):
            raise Refused(f"{url} is refused: {host} is a loopback address")

    async def addresses(self, host: str, port: int) -> list[str]:
        """Where ``host`` may be dialled (one lookup); ``Refused`` if any address is not public."""
        name = normal_host(host)
        ip = literal_ip(name)
        if ip is not None:
            problem = self._allowed.problem(ip)
            if problem:
                spelled = host if _standard_ip(name) else f"{host} (that is {ip})"
                raise Refused(f"the address {spelled} is {problem}")
            return [str(ip)]
        if not self._allowed.has_name(name) and is_localhost(name):
            raise Refused(f"the host {host} is a loopback address")
        try:
            answers = [ip_address(a) for a in await self._resolve(name, port)]
        except (OSError, ValueError):
            raise ToolError(f"the host {host} could not be found") from None
        if not answers:
            raise ToolError(f"the host {host} has no address")
        if not self._allowed.has_name(name):
            for answer in answers:
                problem = self._allowed.problem(answer)
                if problem:
                    raise Refused(f"the host {host} resolves to {answer}, {problem}")
        return [str(answer) for answer in answers]

    def client(
        self, *, timeout_s: float | None = None, follow_redirects: bool = True
    ) -> httpx.AsyncClient:
        """An httpx client whose every request, redirect hop and connect goes through this guard.

        It does not cap bodies; ``fetch`` does.
        """
        return httpx.AsyncClient(
            transport=GuardedTransport(self.check_url, self.addresses, self._ssl),
            timeout=timeout_s or self.timeout_s,
            follow_redirects=follow_redirects,
            max_redirects=self.max_redirects,
            trust_env=False,
            headers={"user-agent": USER_AGENT, "accept-encoding": "gzip, deflate"},
        )

    async def fetch(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        content: bytes | None = None,
        timeout_s: float | None = None,
    ) -> Fetched:
        """Send one request through the guard; redirects followed hop by hop, the body capped."""
        self.check_url(url)
        timeout = min(timeout_s, self.timeout_s) if timeout_s else self.timeout_s
        try:
            async with (
                asyncio.timeout(timeout),
                self.client(timeout_s=timeout, follow_redirects=False) as client,
            ):
                request = client.build_request(method, url, headers=headers, content=content)
                return await self._follow(client, request, {k.lower() for k in headers or {}})
        except (TimeoutError, httpx.TimeoutException):
            raise ToolError(f"{url} did not answer within {timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise ToolError(f"{url} could not be fetched: {_describe(exc)}") from None

    async def _follow(
        self, client: httpx.AsyncClient, request: httpx.Request, own_headers: set[str]
    ) -> Fetched:
        visited = [str(request.url)]
        while True:
            try:
                response = await client.send(request, stream=True)
            except Refused as exc:
                if len(visited) == 1:
                    raise
                raise Refused(f"{exc} (reached by a redirect from {visited[-2]})") from None
            try:
                following = response.next_request
                if following is None:
                    body, cut = await self._read_capped(response)
                    return Fetched(
                        str(request.url),
                        response.status_code,
                        response.reason_phrase,
                        response.headers,
                        body,
                        cut,
                        tuple(visited[1:]),
                    )
            finally:
                await response.aclose()
            if len(visited) > self.max_redirects:
                raise ToolError(
                    f"{visited[0]} redirected more than {self.max_redirects} times "
                    f"(the last one to {following.url}); stopped there"
                )
            if (following.url.scheme, following.url.host, following.url.port) != (
                request.url.scheme,
                request.url.host,
                request.url.port,
            ):
                for name in own_headers - _SAFE_ACROSS_ORIGINS:
                    following.headers.pop(name, None)
            request = following
            visited.append(str(following.url))

    async def _read_capped(self, response: httpx.Response) -> tuple[bytes, bool]:
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("identity", "", "gzip", "x-gzip", "deflate"):
            raise ToolError(f"the body is compressed as {encoding!r}, which cannot be read")
        # Decompress with a bound on the output, so a small compressed bomb stays small.
        inflater = None if encoding in ("identity", "") else zlib.decompressobj(47)
        chunks: list[bytes] = []
        size = 0
        async for raw in response.aiter_raw():
            room = self.max_bytes - size
            try:
                part = raw if inflater is None else inflater.decompress(raw, room + 1)
            except zlib.error:
                raise ToolError(f"the {encoding} body could not be decompressed") from None
            if len(part) > room:
                chunks.append(part[:room])
                return b"".join(chunks), True
            chunks.append(part)
            size += len(part)
        return b"".join(chunks), False


def _describe(exc: httpx.HTTPError) -> str:
    cause: BaseException | None = exc
    for _ in range(8):  # the certificate error sits a few causes down
        if cause is None:
            break
        if isinstance(cause, SSLCertVerificationError):
            return "the server's TLS certificate is not valid for this host"
        cause = cause.__cause__ or cause.__context__
    if isinstance(exc, httpx.ConnectError):
        return "the connection failed (refused, unreachable, or a TLS certificate problem)"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the server broke the HTTP protocol"
    if isinstance(exc, httpx.NetworkError):
        return "the connection broke while talking to the server"
    return "the request failed"
