"""The network guard against an SSRF corpus, rebinding DNS, redirects, caps and timeouts.

Fakes sit at the process boundary only: DNS is a scripted resolver passed to
``NetGuard(resolver=...)`` and the web is a real aiohttp server on 127.0.0.1,
so the real httpx/httpcore stack runs every request. Refusal cases point at the
fake's own port wherever they can: a guard that let one through would visibly
reach the server, and each test also checks the server saw nothing.
"""

from __future__ import annotations

import shutil
import ssl
from collections.abc import Iterator
from ipaddress import ip_address
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from bot.core.errors import ConfigError, Refused, ToolError
from bot.core.tls import shared_ssl_context
from bot.security.net.addresses import address_problem
from bot.security.net.policy import NetGuard, system_resolver
from bot.security.net.transport import GuardedBackend
from tests.fake_web import FakeDns, FakeSite, self_signed_certificate

PUBLIC = "93.184.215.14"


@pytest.fixture(scope="module")
def site() -> Iterator[FakeSite]:
    with FakeSite.running() as server:
        yield server


@pytest.fixture(scope="module")
def elsewhere() -> Iterator[FakeSite]:
    with FakeSite.running() as server:
        yield server


def dns() -> FakeDns:
    return FakeDns(
        {
            "site.test": [["127.0.0.1"]],
            "internal.test": [["10.0.0.5"]],
            "mixed.test": [[PUBLIC, "192.168.0.10"]],
            "mapped.test": [["::ffff:127.0.0.1"]],
            "public.test": [[PUBLIC, "2606:2800:21f:cb07:6820:80da:af6b:8b2c"]],
        }
    )


def make_guard(
    allowed: list[str] | None = None,
    resolver: FakeDns | None = None,
    *,
    timeout_s: float = 5.0,
    max_bytes: int = 4096,
    max_redirects: int = 3,
) -> NetGuard:
    resolver = resolver or dns()
    return NetGuard(
        allowed or [],
        ssl=shared_ssl_context(),
        resolver=resolver,
        timeout_s=timeout_s,
        max_bytes=max_bytes,
        max_redirects=max_redirects,
    )


SSRF = [
    ("http://localhost:{port}/", "localhost is a loopback address"),
    ("http://LOCALHOST.:{port}/", "localhost is a loopback address"),
    ("http://api.localhost:{port}/", "api.localhost is a loopback address"),
    ("http://127.0.0.1:{port}/", "127.0.0.1 is a loopback address"),
    ("http://127.0.0.2:{port}/", "127.0.0.2 is a loopback address"),
    ("http://0.0.0.0:{port}/", "0.0.0.0 is an unspecified address"),
    ("http://[::]:{port}/", ":: is an unspecified address"),
    ("http://[::1]:{port}/", "::1 is a loopback address"),
    ("http://[::ffff:127.0.0.1]:{port}/", "IPv4-mapped form of 127.0.0.1, a loopback"),
    ("http://[::ffff:7f00:1]:{port}/", "IPv4-mapped form of 127.0.0.1, a loopback"),
    ("http://2130706433:{port}/", "2130706433 (that is 127.0.0.1) is a loopback address"),
    ("http://0177.0.0.1:{port}/", "0177.0.0.1 (that is 127.0.0.1) is a loopback address"),
    ("http://0x7f000001:{port}/", "0x7f000001 (that is 127.0.0.1) is a loopback address"),
    ("http://0x7f.1:{port}/", "0x7f.1 (that is 127.0.0.1) is a loopback address"),
    ("http://127.1:{port}/", "127.1 (that is 127.0.0.1) is a loopback address"),
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is the cloud metadata"),
    ("http://169.254.1.1/", "169.254.1.1 is a link-local address"),
    ("http://10.0.0.1/", "10.0.0.1 is a private network address"),
    ("http://172.16.0.1/", "172.16.0.1 is a private network address"),
    ("http://192.168.1.1/", "192.168.1.1 is a private network address"),
    ("http://100.64.0.1/", "100.64.0.1 is a carrier-grade NAT address"),
    ("http://224.0.0.1/", "224.0.0.1 is a multicast address"),
    ("http://255.255.255.255/", "the broadcast address"),
    ("http://[fd00::1]/", "fd00::1 is a private network address (IPv6 unique local)"),
    ("http://[fe80::1]/", "fe80::1 is a link-local address"),
    ("http://[ff02::1]/", "ff02::1 is a multicast address"),
    ("http://[64:ff9b::a00:1]/", "a NAT64 address for 10.0.0.1, a private network address"),
    ("http://[2002:7f00:1::]/", "a 6to4 address for 127.0.0.1, a loopback address"),
    ("http://internal.test:{port}/", "internal.test resolves to 10.0.0.5, a private network"),
    ("http://mixed.test:{port}/", "mixed.test resolves to 192.168.0.10, a private network"),
    ("http://mapped.test:{port}/", "mapped.test resolves to ::ffff:7f00:1, the IPv4-mapped"),
]


@pytest.mark.parametrize(("url", "reason"), SSRF, ids=[case[0] for case in SSRF])
async def test_ssrf_corpus_is_refused(site: FakeSite, url: str, reason: str) -> None:
    before = len(site.hits)
    with pytest.raises(Refused) as caught:
        await make_guard().fetch("GET", url.format(port=site.port))
    assert reason in str(caught.value)
    assert len(site.hits) == before


@pytest.mark.parametrize(
    "host", ["2130706433", "0x7f000001", "127.1", "0", "::ffff:7f00:1", "localhost", "LocalHost."]
)
async def test_the_connect_step_judges_the_host_itself(host: str) -> None:
    # Whatever parsed the URL, the backend sees the host as written and still refuses it.
    with pytest.raises(Refused, match=r"loopback|unspecified"):
        await make_guard().addresses(host, 80)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("file:///etc/passwd", "only http:// and https://"),
        ("ftp://example.com/file", "only http:// and https://"),
        ("gopher://127.0.0.1:70/_stats", "only http:// and https://"),
        ("javascript:alert(1)", "only http:// and https://"),
        ("example.com/page", "only http:// and https://"),
        ("http:///no-host", "names no host"),
        ("http://example.com@10.0.0.1/", "user name or password"),
        ("http://user:secret@example.com/", "user name or password"),
        ("http://[fe80::1%25eth0]/", "not a plain host name"),
        ("http://[::1/", "not a valid http or https URL"),
    ],
)
def test_other_schemes_and_url_tricks_are_refused(url: str, reason: str) -> None:
    with pytest.raises(Refused) as caught:
        make_guard().check_url(url)
    assert reason in str(caught.value)


@pytest.mark.parametrize(
    "address",
    ["8.8.8.8", "1.1.1.1", PUBLIC, "2606:4700:4700::1111", "::ffff:8.8.8.8", "2002:808:808::"],
)
def test_public_addresses_are_judged_public(address: str) -> None:
    assert address_problem(ip_address(address)) is None
    make_guard().check_url(f"https://[{address}]/" if ":" in address else f"https://{address}/")


async def test_a_public_name_is_allowed_with_every_address_it_resolves_to() -> None:
    resolver = dns()
    guard = make_guard(resolver=resolver)
    guard.check_url("https://public.test/path")
    assert await guard.addresses("public.test", 443) == [
        PUBLIC,
        "2606:2800:21f:cb07:6820:80da:af6b:8b2c",
    ]
    assert resolver.calls == ["public.test"]


async def test_the_backend_dials_exactly_the_addresses_it_was_given(site: FakeSite) -> None:
    # The judge said "public.example" may be dialled at the fake's address: the backend
    # connects there, never to the name (which no DNS here could resolve).
    async def judge(host: str, port: int) -> list[str]:
        assert host == "public.example"
        return ["127.0.0.1"]

    stream = await GuardedBackend(judge).connect_tcp("public.example", site.port, timeout=5)
    await stream.write(b"GET / HTTP/1.1\r\nHost: public.example\r\nConnection: close\r\n\r\n")
    assert (await stream.read(65536)).startswith(b"HTTP/1.1 200")
    await stream.aclose()
    assert site.hits[-1].host == "public.example"


async def test_rebinding_cannot_swap_the_address_after_the_check(site: FakeSite) -> None:
    # First lookup: the allowed address; any later lookup: a private one. One lookup per
    # connection, and the connection goes to the address that lookup validated.
    resolver = FakeDns({"rebind.test": [["127.0.0.1"], ["10.0.0.5"]]})
    guard = make_guard(["127.0.0.1"], resolver)
    fetched = await guard.fetch("GET", f"http://rebind.test:{site.port}/")
    assert fetched.status == 200
    assert fetched.body == b"hello from the fake site"
    assert resolver.calls == ["rebind.test"]
    assert site.hits[-1].host == f"rebind.test:{site.port}"
    with pytest.raises(Refused, match=r"rebind\.test resolves to 10\.0\.0\.5, a private"):
        await guard.fetch("GET", f"http://rebind.test:{site.port}/")
    assert resolver.calls == ["rebind.test", "rebind.test"]


@pytest.mark.parametrize("allowed", ["site.test", "*.test", "127.0.0.1", "127.0.0.0/8"])
async def test_allowlisted_hosts_reach_the_fake(site: FakeSite, allowed: str) -> None:
    host = "127.0.0.1" if allowed[0].isdigit() else "site.test"
    fetched = await make_guard([allowed]).fetch("GET", f"http://{host}:{site.port}/")
    assert fetched.status == 200
    assert fetched.body == b"hello from the fake site"


async def test_allowlisted_ipv6_addresses_and_networks() -> None:
    assert await make_guard(["[::1]"]).addresses("::1", 80) == ["::1"]
    assert await make_guard(["fd00::/8"]).addresses("fd00::7", 80) == ["fd00::7"]
    make_guard(["192.168.1.0/24"]).check_url("http://[::ffff:192.168.1.5]/")
    with pytest.raises(Refused):
        make_guard(["192.168.1.0/24"]).check_url("http://192.168.2.5/")


def test_a_bad_allowlist_entry_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="allowed_hosts: 'http://x/' is not a host name"):
        make_guard(["http://x/"])


async def test_a_redirect_into_a_private_address_is_refused_on_the_hop(
    site: FakeSite, elsewhere: FakeSite
) -> None:
    target = f"http://127.0.0.1:{elsewhere.port}/"
    url = f"http://site.test:{site.port}/redirect?to={target}"
    before = len(elsewhere.hits)
    with pytest.raises(Refused) as caught:
        await make_guard(["site.test"]).fetch("GET", url)
    message = str(caught.value)
    assert f"{target} is refused: 127.0.0.1 is a loopback address" in message
    assert f"reached by a redirect from {url}" in message
    assert len(elsewhere.hits) == before

    # The same through a plain client: httpx follows, and each hop meets the guard.
    async with make_guard(["site.test"]).client() as client:
        with pytest.raises(Refused, match=r"127\.0\.0\.1 is a loopback address"):
            await client.get(url)


async def test_a_redirect_to_a_name_that_resolves_privately_is_refused(site: FakeSite) -> None:
    url = f"http://site.test:{site.port}/redirect?to=http://internal.test:{site.port}/"
    with pytest.raises(Refused, match=r"internal\.test resolves to 10\.0\.0\.5"):
        await make_guard(["site.test"]).fetch("GET", url)


async def test_a_redirect_to_a_file_url_is_refused(site: FakeSite) -> None:
    url = f"http://site.test:{site.port}/redirect?to=file:///etc/passwd"
    with pytest.raises(Refused, match="only http:// and https://"):
        await make_guard(["site.test"]).fetch("GET", url)


async def test_redirects_are_followed_up_to_the_limit(site: FakeSite) -> None:
    guard = make_guard(["site.test"], max_redirects=2)
    fetched = await guard.fetch("GET", f"http://site.test:{site.port}/chain/2")
    assert fetched.body == b"end of the chain"
    assert fetched.redirects == (
        f"http://site.test:{site.port}/chain/1",
        f"http://site.test:{site.port}/chain/0",
    )
    with pytest.raises(ToolError, match="redirected more than 2 times"):
        await guard.fetch("GET", f"http://site.test:{site.port}/chain/3")


async def test_own_headers_do_not_follow_a_redirect_to_another_origin(
    site: FakeSite, elsewhere: FakeSite
) -> None:
    url = f"http://127.0.0.1:{site.port}/redirect?to=http://127.0.0.1:{elsewhere.port}/echo"
    headers = {"X-Api-Key": "s3cret", "Accept": "application/json"}
    fetched = await make_guard(["127.0.0.1"]).fetch("GET", url, headers=headers)
    seen = httpx.Response(200, content=fetched.body).json()["headers"]
    assert seen["accept"] == "application/json"
    assert "x-api-key" not in seen


async def test_an_endless_body_is_cut_at_max_bytes(site: FakeSite) -> None:
    fetched = await make_guard(["site.test"]).fetch("GET", f"http://site.test:{site.port}/endless")
    assert fetched.cut
    assert len(fetched.body) == 4096


async def test_a_compressed_bomb_is_cut_after_decompression(site: FakeSite) -> None:
    fetched = await make_guard(["site.test"]).fetch("GET", f"http://site.test:{site.port}/bomb")
    assert fetched.cut
    assert fetched.body == bytes(4096)


async def test_a_slow_drip_is_bounded_by_the_whole_timeout(site: FakeSite) -> None:
    guard = make_guard(["site.test"], timeout_s=0.5, max_bytes=1 << 20)
    with pytest.raises(ToolError, match=r"did not answer within 0.5 s"):
        await guard.fetch("GET", f"http://site.test:{site.port}/drip")


async def test_an_unknown_host_is_an_ordinary_error() -> None:
    with pytest.raises(ToolError, match=r"the host nowhere\.test could not be found"):
        await make_guard().fetch("GET", "http://nowhere.test/")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    return self_signed_certificate(tmp_path_factory.mktemp("tls"), "secure.test")


async def test_tls_is_checked_against_the_name_while_the_ip_is_dialled(
    certificate: tuple[Path, Path],
) -> None:
    cert, key = certificate
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    names: list[str | None] = []  # the SNI names the server was asked for
    server_tls.sni_callback = lambda _tls, name, _context: names.append(name)

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="secure hello")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_tls)
    await site.start()
    port = runner.addresses[0][1]
    try:
        client_tls = ssl.create_default_context(cafile=str(cert))
        resolver = FakeDns({"secure.test": [["127.0.0.1"]], "other.test": [["127.0.0.1"]]})
        guard = NetGuard(["*.test"], ssl=client_tls, resolver=resolver)
        fetched = await guard.fetch("GET", f"https://secure.test:{port}/")
        assert fetched.body == b"secure hello"
        assert names == ["secure.test"]
        with pytest.raises(ToolError, match="TLS certificate is not valid for this host"):
            await guard.fetch("GET", f"https://other.test:{port}/")
        assert names == ["secure.test", "other.test"]
    finally:
        await runner.cleanup()


async def test_proxies_from_the_environment_are_ignored(
    site: FakeSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Through a proxy the guard would judge the proxy, not the destination; port 9 is closed.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    fetched = await make_guard(["site.test"]).fetch("GET", f"http://site.test:{site.port}/")
    assert fetched.status == 200


async def test_the_production_resolver_is_getaddrinfo() -> None:
    assert await system_resolver("127.0.0.1", 80) == ["127.0.0.1"]
