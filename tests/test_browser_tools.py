"""The browser tools on Debian's chromium, against a site served by another process.

``browser_open`` and ``browser_screenshot`` run through the registry with a
real ``BrowserService`` (Playwright driving ``/usr/bin/chromium``), the real
egress proxy and a scripted resolver (``other.test`` is 127.0.0.2); the
screenshot also runs end to end, through the daemon, the fake model and the
fake Telegram. The site (``tests/browser_site.py``) runs in a process of its
own, like any service on the machine that is not PinClaw, with a listener on
127.0.0.2 that counts every connection it accepts: a refused request must
never reach it, and a control run with 127.0.0.2 allowed shows the count moves.
"""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.agent.tool_registry import ToolRegistry
from bot.browser import processes
from bot.browser.service import BrowserService
from bot.cli.doctor.browser import browser as doctor_browser
from bot.config import LoadedConfig, parse_config
from bot.config.browser import BrowserConfig
from bot.core.conversation import ToolCall
from bot.core.errors import ConfigError
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext, ToolResult
from bot.security.kit import build_security
from tests.browser import chromium_path
from tests.browser_site import BrowserSite
from tests.channel_tables import telegram_table
from tests.daemon_harness import running_daemon
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.fake_telegram import FakeTelegram
from tests.fake_web import FakeDns
from tools import web
from tools.browser import browser_tools, build, png_size

ONLY_WEB = "only http:// and https:// URLs can be fetched"
OWNER = 7001
ADA = FakeTelegram.user(OWNER, "Ada", "ada")


@pytest.fixture(scope="module")
def site() -> Iterator[BrowserSite]:
    server = BrowserSite()
    try:
        yield server
    finally:
        server.close()


def loaded_config(tmp_path: Path, allowed: list[str], browser: dict[str, Any]) -> LoadedConfig:
    raw = {
        "provider": {"kind": "ollama", "model": "m"},
        "security": {"allowed_hosts": allowed},
        "browser": {"executable": chromium_path(), **browser},
    }
    loaded = LoadedConfig(parse_config(raw, {}), tmp_path / "c.toml", tmp_path)
    loaded.workspace.mkdir(parents=True, exist_ok=True)
    return loaded


@asynccontextmanager
async def browsing(
    tmp_path: Path, allowed: tuple[str, ...] = ("127.0.0.1",), **browser: Any
) -> AsyncIterator[tuple[ToolRegistry, BrowserService]]:
    """The browser tools and ``web_fetch`` in a registry, on a service the test can watch."""
    loaded = loaded_config(tmp_path, list(allowed), browser)
    dns = FakeDns({"other.test": [["127.0.0.2"]], "site.test": [["127.0.0.1"]]})
    kit = build_security(loaded, resolver=dns)
    service = BrowserService(
        loaded.config.browser,
        chromium_path(),
        egress=lambda: kit.egress,
        check_url=kit.net.check_url,
        profiles=tmp_path / "browser",
    )
    kit.close_with(service.aclose)
    tools = [*browser_tools(service, kit, kit.paths), *web.build(loaded, kit)]
    try:
        yield ToolRegistry(tools, max_output_chars=100_000), service
    finally:
        await kit.aclose()


async def call(registry: ToolRegistry, tmp_path: Path, name: str, **args: Any) -> ToolResult:
    ctx = ToolContext(SessionKey("test", "1"), tmp_path / "workspace", ZoneInfo("UTC"))
    return await registry.execute(ToolCall("1", name, args), ctx)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] != b"Z"


async def test_a_page_built_by_javascript_is_empty_to_web_fetch_and_read_by_browser_open(
    tmp_path: Path, site: BrowserSite
) -> None:
    async with browsing(tmp_path) as (registry, _):
        fetched = await call(registry, tmp_path, "web_fetch", url=f"{site.url}/js")
        opened = await call(registry, tmp_path, "browser_open", url=f"{site.url}/js")
    assert fetched.ok and "Hello from JavaScript" not in fetched.output
    assert "[the page has no readable text]" in fetched.output
    assert opened.ok, opened.error
    assert opened.output.startswith(f"Title: Built by script\nURL: {site.url}/js\n\n")
    assert "Hello from JavaScript: the greenhouse is at 21.5 degrees." in opened.output
    assert opened.output.endswith(f"Links:\n[1] the box → {site.url}/box")


async def test_requests_of_a_page_to_a_refused_address_never_reach_it(
    tmp_path: Path, site: BrowserSite
) -> None:
    before = site.contacts()
    async with browsing(tmp_path) as (registry, _):
        result = await call(registry, tmp_path, "browser_open", url=f"{site.url}/leaky")
    assert result.ok, result.error
    assert "A page that reaches for another address." in result.output
    port = site.other.rsplit(":", 1)[1]
    # Literal addresses are refused by the route, names by the proxy after its lookup.
    assert f"http://127.0.0.2:{port}/pixel.png: 127.0.0.2 is a loopback address" in result.output
    assert f"other.test:{port}: the host other.test resolves to 127.0.0.2" in result.output
    assert site.contacts() == before
    # The control: with 127.0.0.2 allowed the same page reaches the listener, by both ways.
    async with browsing(tmp_path, ("127.0.0.1", "127.0.0.2", "other.test")) as (registry, _):
        allowed = await call(registry, tmp_path, "browser_open", url=f"{site.url}/leaky")
    assert allowed.ok and "network policy refused" not in allowed.output
    assert site.contacts() >= before + 4  # two images, two fetches (and the WebSockets)


async def test_file_urls_and_redirects_to_refused_addresses_are_refused(
    tmp_path: Path, site: BrowserSite
) -> None:
    before = site.contacts()
    port = site.other.rsplit(":", 1)[1]
    async with browsing(tmp_path) as (registry, service):
        for url in ("file:///etc/passwd", "chrome://version", "data:text/html,<p>hi</p>"):
            refused = await call(registry, tmp_path, "browser_open", url=url)
            assert refused.error == f"{url} is refused: {ONLY_WEB}"
        assert service.launches == 0  # refused before a browser was needed
        by_address = f"{site.url}/redirect?to={site.other}/"
        redirected = await call(registry, tmp_path, "browser_open", url=by_address)
        by_name = f"{site.url}/redirect?to=http://other.test:{port}/"
        named = await call(registry, tmp_path, "browser_screenshot", url=by_name)
        tunnel = f"{site.url}/redirect?to=https://other.test:{port}/"
        secure = await call(registry, tmp_path, "browser_open", url=tunnel)
    assert redirected.error == (
        f"{by_address} led to {site.other}/, which is refused: "
        "the address 127.0.0.2 is a loopback address"
    )
    assert named.error == (
        f"{by_name} led to http://other.test:{port}/, which is refused: "
        "the host other.test resolves to 127.0.0.2, a loopback address"
    )
    assert secure.error == (
        f"{tunnel} could not be opened: the network policy refused other.test:{port}: "
        "the host other.test resolves to 127.0.0.2, a loopback address"
    )
    assert site.contacts() == before
    assert not list((tmp_path / "workspace").glob("screenshots/*"))


async def test_one_browser_serves_two_calls_and_is_closed_after_idle_s(
    tmp_path: Path, site: BrowserSite
) -> None:
    async with browsing(tmp_path, idle_s=0.5) as (registry, service):
        first = await call(registry, tmp_path, "browser_open", url=f"{site.url}/js")
        pids = service.pids()
        box = f"{site.url}/box"
        second = await call(registry, tmp_path, "browser_screenshot", url=box, send=False)
        assert first.ok and second.ok, (first.error, second.error)
        assert service.launches == 1 and main_process(service.pids()) == main_process(pids)
        pids |= service.pids()  # each call's context may get a renderer of its own
        assert len(pids) >= 2 and alive(main_process(pids))
        for _ in range(200):  # closed 0.5 s after the last call; the wait is only a bound
            if not service.running:
                break
            await asyncio.sleep(0.1)
        assert not service.running
        assert not any(alive(pid) for pid in pids)
        again = await call(registry, tmp_path, "browser_open", url=f"{site.url}/js")
        assert again.ok and service.launches == 2
        pids = service.pids()
    assert pids and not any(alive(pid) for pid in pids)  # closed with the kit (the daemon's stop)


async def test_only_a_profiles_hosts_keep_cookies_between_calls(
    tmp_path: Path, site: BrowserSite
) -> None:
    port = site.url.rsplit(":", 1)[1]
    profiled, fresh = f"http://site.test:{port}/cookie", f"{site.url}/cookie"
    profiles = {"home": {"hosts": ["site.test"]}}
    async with browsing(tmp_path, ("127.0.0.1", "site.test"), profiles=profiles) as (registry, _):
        seen = [
            (await call(registry, tmp_path, "browser_open", url=url)).output
            for url in (profiled, profiled, fresh, fresh)
        ]
    assert ["cookie: none" in seen[0], "cookie: flavour=oat" in seen[1]] == [True, True]
    assert ["cookie: none" in seen[2], "cookie: none" in seen[3]] == [True, True]
    stored = tmp_path / "browser" / "home.json"
    assert stored.stat().st_mode & 0o777 == 0o600
    assert "flavour" in stored.read_text() and "127.0.0.1" not in stored.read_text()


async def test_a_page_that_takes_more_memory_than_allowed_stops_the_browser(
    tmp_path: Path, site: BrowserSite
) -> None:
    async with browsing(tmp_path, max_memory_mib=128, page_timeout_s=120) as (registry, service):
        result = await call(registry, tmp_path, "browser_open", url=f"{site.url}/hog")
        assert not service.running or not service.pids()
    assert result.error == (
        "the page needed more than the 128 MiB of memory the browser may use, so the browser "
        "was stopped; try a lighter page, or web_fetch"
    )


async def test_a_screenshot_reaches_telegram_as_a_photo_of_the_page_size(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, site: BrowserSite
) -> None:
    url = f"{site.url}/box"
    llm.queue(CallTools([("browser_screenshot", {"url": url})]), Say("Here it is."))
    tables = {"browser": {"executable": chromium_path(), "width": 640, "height": 480}}
    async with running_daemon(
        tmp_path,
        llm,
        {"telegram": telegram_table(telegram)},
        security={"allowed_hosts": ["127.0.0.1"]},
        tables=tables,
    ) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        telegram.user_sends(OWNER, ADA, "show me the box page")
        await telegram.await_call("sendMessage")
        browsers = own_browsers()
        workspace = daemon.app.loaded.workspace
    (photo,) = telegram.calls("sendPhoto")
    (upload,) = photo.files.values()
    assert png_size(upload.data) == (640, 480)
    assert photo.params["caption"] == url and photo.params["chat_id"] == OWNER
    (saved,) = (workspace / "screenshots").glob("*.png")
    assert saved.read_bytes() == upload.data
    (result,) = llm.tool_results()
    assert f"(640x480 pixels) saved as screenshots/{saved.name}" in result
    assert result.startswith('<untrusted source="browser_screenshot" from="127.0.0.1:')
    assert result.endswith("and sent to this chat.\n</untrusted>")
    assert browsers and not any(alive(pid) for pid in browsers)  # the daemon's stop closed it


def main_process(pids: set[int]) -> int:
    """The browser process of a tree: the one alive whose parent is not in it."""
    live = {pid for pid in pids if alive(pid)}
    (root,) = {pid for pid in live if _parent(pid) not in live and alive(pid)}
    return root


def _parent(pid: int) -> int:
    """The parent of ``pid``; 0 once it has exited (a renderer may end meanwhile)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return 0
    return int(stat[stat.rfind(b")") + 2 :].split()[1])


def own_browsers() -> set[int]:
    """Chromium processes this test process started (any browser id)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.startswith(processes.MARKER.encode()) for a in arguments):
            found.add(int(entry.name))
    return {pid for pid in found if _descends_from_us(pid)}


def _descends_from_us(pid: int) -> bool:
    while pid > 1:
        if pid == os.getpid():
            return True
        try:
            pid = _parent(pid)
        except OSError:
            return False
    return False


async def test_the_browser_proxy_admits_only_the_calls_credentials(tmp_path: Path) -> None:
    loaded = loaded_config(tmp_path, ["127.0.0.1"], {})
    kit = build_security(loaded)
    egress = kit.egress
    assert egress is not None

    async def ask(server: str, authorization: str | None) -> bytes:
        host, port = server.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        head = "CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n"
        if authorization:
            head += f"Proxy-Authorization: Basic {authorization}\r\n"
        writer.write((head + "\r\n").encode())
        answer = await reader.readline()
        writer.close()
        return answer

    try:
        async with egress.tcp_door() as door, door.visit() as visitor:
            good = base64.b64encode(f"{visitor.name}:{visitor.password}".encode()).decode()
            wrong = base64.b64encode(f"{visitor.name}:guess".encode()).decode()
            assert (await ask(door.server, None)).startswith(b"HTTP/1.1 407 ")
            assert (await ask(door.server, wrong)).startswith(b"HTTP/1.1 407 ")
            # Signed in, the request is judged: port 9 on 127.0.0.1 has no listener.
            assert (await ask(door.server, good)).startswith(b"HTTP/1.1 502 ")
            assert visitor.unreachable["127.0.0.1:9"].startswith("127.0.0.1:9 cannot be reached")
        async with egress.tcp_door() as door:  # a visit that ended no longer signs in
            assert (await ask(door.server, good)).startswith(b"HTTP/1.1 407 ")
    finally:
        await kit.aclose()


def test_the_tools_are_offered_only_when_enabled_and_a_chromium_is_found(tmp_path: Path) -> None:
    def names(**browser: Any) -> list[str]:
        loaded = loaded_config(tmp_path, [], browser)
        return [t.name for t in build(loaded, build_security(loaded))]

    assert names() == ["browser_open", "browser_screenshot"]
    assert names(enabled=False) == []
    assert names(executable=str(tmp_path / "no-chromium")) == []


def test_profiles_are_named_plainly_and_a_host_belongs_to_one() -> None:
    def problem(profiles: dict[str, Any]) -> str:
        raw = {"provider": {"kind": "ollama", "model": "m"}, "browser": {"profiles": profiles}}
        with pytest.raises(ConfigError) as caught:
            parse_config(raw, {})
        return str(caught.value)

    assert problem({"a": {"hosts": ["grafana.lan"]}, "b": {"hosts": ["Grafana.LAN."]}}) == (
        "config: browser.profiles: grafana.lan is in two profiles: a and b"
    )
    assert "name a profile with lower-case letters" in problem({"My Site": {"hosts": ["x"]}})
    assert "hosts" in problem({"a": {"hosts": []}})
    raw = {
        "provider": {"kind": "ollama", "model": "m"},
        "browser": {"profiles": {"g": {"hosts": ["G.lan"]}}},
    }
    assert parse_config(raw, {}).browser.profile_for("g.LAN") == "g"


async def test_doctor_names_the_chromium_or_says_why_there_is_none(tmp_path: Path) -> None:
    found = await doctor_browser(BrowserConfig(executable=chromium_path()))
    assert found.status == "ok" and found.text.startswith("browser tools: Chromium ")
    assert f"({chromium_path()}), Playwright 1." in found.text
    missing = await doctor_browser(BrowserConfig(executable=str(tmp_path / "chrome")))
    assert missing.status == "fail"
    assert missing.text == (
        f"browser tools: [browser] executable {tmp_path / 'chrome'} is not a program"
    )
    off = await doctor_browser(BrowserConfig(enabled=False))
    assert (off.status, off.text) == ("info", "browser tools: off ([browser] enabled = false)")


UNDER_MDWE = """
import asyncio, ctypes, sys
if ctypes.CDLL(None, use_errno=True).prctl(65, 1, 0, 0, 0) != 0:  # PR_SET_MDWE
    print("no-mdwe"); sys.exit(0)
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from tests.test_browser_tools import browsing, call
async def main():
    folder = Path(sys.argv[3])
    async with browsing(folder) as (registry, service):
        result = await call(registry, folder, "browser_open", url=sys.argv[2] + "/js")
        print("jitless" if service.jitless else "jit", result.ok, result.output or result.error)
asyncio.run(main())
"""


def test_the_browser_works_where_memory_may_not_be_writable_and_executable(
    tmp_path: Path, site: BrowserSite
) -> None:
    """PinClaw's systemd unit sets MemoryDenyWriteExecute=yes: Node.js and V8 must run jitless."""
    root = str(Path(__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(UNDER_MDWE), root, site.url, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.stdout.strip() == "no-mdwe":
        pytest.skip("this kernel has no PR_SET_MDWE (Linux 6.3 and later)")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("jitless True Title: Built by script"), done.stdout
    assert "Hello from JavaScript" in done.stdout
