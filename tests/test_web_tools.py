"""``http_request`` and ``web_fetch`` through the registry, against a fake site on 127.0.0.1.

The tools are built the way the daemon builds them: a config, ``build_security``
with a scripted resolver (the DNS boundary), ``tools.web.build`` and a
``ToolRegistry``. ``site.test`` is allowlisted and resolves to the fake.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.agent.tool_registry import ToolRegistry
from bot.config import LoadedConfig, parse_config
from bot.core.conversation import ToolCall
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext, ToolResult
from bot.security.kit import build_security
from tests.fake_web import FakeDns, FakeSite
from tools.web import build


@pytest.fixture(scope="module")
def site() -> Iterator[FakeSite]:
    with FakeSite.running() as server:
        yield server


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(SessionKey("test", "1"), tmp_path, ZoneInfo("UTC"))


@pytest.fixture
def registry(tmp_path: Path) -> ToolRegistry:
    raw = {
        "provider": {"kind": "ollama", "model": "m"},
        "security": {"allowed_hosts": ["site.test"]},
    }
    loaded = LoadedConfig(parse_config(raw, {}), tmp_path / "c.toml", tmp_path)
    resolver = FakeDns({"site.test": [["127.0.0.1"]], "intranet.test": [["192.168.1.20"]]})
    kit = build_security(loaded, resolver=resolver)
    return ToolRegistry(build(loaded, kit), max_output_chars=1_000_000)


async def call(registry: ToolRegistry, ctx: ToolContext, name: str, **args: Any) -> ToolResult:
    return await registry.execute(ToolCall("1", name, args), ctx)


async def test_web_fetch_reads_a_page_as_tidy_text(
    registry: ToolRegistry, ctx: ToolContext, site: FakeSite
) -> None:
    base = f"http://site.test:{site.port}"
    result = await call(registry, ctx, "web_fetch", url=f"{base}/page")
    assert result.ok, result.error
    text = result.output
    assert text.startswith(f"Title: Test page\nURL: {base}/page\n\n")
    assert "# Main heading" in text
    assert "\n\n## Section\n" in text
    assert f"relative link ({base}/other)" in text
    assert "absolute one (https://example.org/x)." in text
    assert "- first item\n- second item" in text
    assert "Café & more" in text
    assert "line one\n  indented line" in text
    assert "back to top\n" in text or text.endswith("back to top")
    for boilerplate in ("alert", "color: red", "Home", "About", "Sponsored", "Copyright", "Enable"):
        assert boilerplate not in text
    assert "  " not in text.replace("  indented", "")
    assert "\n\n\n" not in text


async def test_web_fetch_passes_json_through_and_describes_binary(
    registry: ToolRegistry, ctx: ToolContext, site: FakeSite
) -> None:
    base = f"http://site.test:{site.port}"
    data = await call(registry, ctx, "web_fetch", url=f"{base}/data.json")
    assert json.loads(data.output.split("\n\n", 1)[1]) == {"temperature": 21.5, "unit": "C"}
    image = await call(registry, ctx, "web_fetch", url=f"{base}/image.png")
    assert image.ok
    assert "[binary body: 1032 bytes of image/png, not shown]" in image.output


async def test_web_fetch_cuts_a_big_page_and_says_so(
    registry: ToolRegistry, ctx: ToolContext, site: FakeSite
) -> None:
    result = await call(registry, ctx, "web_fetch", url=f"http://site.test:{site.port}/big")
    assert result.ok
    assert "[cut: only the first 2097152 bytes of the body were read]" in result.output
    assert "THE END" not in result.output
    assert result.output.count("words") > 100_000


async def test_web_fetch_follows_redirects_and_reports_where_it_ended(
    registry: ToolRegistry, ctx: ToolContext, site: FakeSite
) -> None:
    base = f"http://site.test:{site.port}"
    result = await call(registry, ctx, "web_fetch", url=f"{base}/redirect?to=/page")
    assert f"URL: {base}/page (after 1 redirect(s))" in result.output
    assert "# Main heading" in result.output


async def test_web_fetch_reports_http_errors(
    registry: ToolRegistry, ctx: ToolContext, site: FakeSite
) -> None:
    result = await call(registry, ctx, "web_fetch", url=f"http://site.test:{site.port}/missing")
    assert result.error == f"http://site.test:{site.port}/missing answered HTTP 404 Not Found"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://10.0.0.5/", "http://10.0.0.5/ is refused: 10.0.0.5 is a private network address"),
        (
            "http://169.254.169.254/latest/meta-data/",
            "http://169.254.169.254/latest/meta-data/ is refused: "
            "169.254.169.254 is the cloud metadata address",
        ),
        ("http://intranet.test/", "the host intranet.test resolves to 192.168.1.20, a private"),
        ("file:///etc/passwd", "file:///etc/passwd is refused: only http:// and https:// URLs"),
    ],
)
async def test_refusals_are_plain_and_do_not_say_how_to_widen_access(
    registry: ToolRegistry, ctx: ToolContext, url: str, message: str
) -> None:
    for name in ("web_fetch", "http_request"):
        result = await call(registry, ctx, name, url=url)
        assert not result.ok
        assert message in (result.error or "")
        for hint in ("allowed_hosts", "config", "allowlist", "permission"):
            assert hint not in (result.error or "")


async def test_a_redirect_into_the_private_range_is_refused(
    registry: ToolRegistry, ctx: ToolContext, site: FakeSite
) -> None:
    url = f"http://site.test:{site.port}/redirect?to=http://127.0.0.1:{site.port}/"
    result = await call(registry, ctx, "http_request", url=url)
    assert result.error == (
        f"http://127.0.0.1:{site.port}/ is refused: 127.0.0.1 is a loopback address "
        f"(reached by a redirect from {url})"
    )


async def test_http_request_sends_method_headers_and_body(
    registry: ToolRegistry, ctx: ToolContext, site: FakeSite
) -> None:
    url = f"http://site.test:{site.port}/echo"
    result = await call(
        registry,
        ctx,
        "http_request",
        url=url,
        method="POST",
        headers='{"X-Trace": "abc"}',
        body='{"on": true}',
    )
    assert result.ok, result.error
    head, body = result.output.split("\n\n", 1)
    assert head.startswith("HTTP 200 OK\n")
    assert "content-type: application/json" in head
    seen = json.loads(body)
    assert seen["method"] == "POST"
    assert seen["headers"]["x-trace"] == "abc"
    assert seen["body"] == '{"on": true}'


async def test_http_request_head_and_binary_bodies(
    registry: ToolRegistry, ctx: ToolContext, site: FakeSite
) -> None:
    base = f"http://site.test:{site.port}"
    head = await call(registry, ctx, "http_request", url=f"{base}/echo", method="HEAD")
    assert head.output.startswith("HTTP 200 OK")
    assert "\n\n" not in head.output
    image = await call(registry, ctx, "http_request", url=f"{base}/image.png")
    assert image.output.endswith("[binary body: 1032 bytes of image/png, not shown]")
    missing = await call(registry, ctx, "http_request", url=f"{base}/missing")
    assert missing.ok
    assert missing.output.startswith("HTTP 404 Not Found")


@pytest.mark.parametrize(
    ("method", "risk"),
    [
        ("GET", "low"),
        ("HEAD", "low"),
        ("POST", "medium"),
        ("PUT", "medium"),
        ("PATCH", "medium"),
        ("DELETE", "medium"),
    ],
)
def test_assess_rates_each_method(
    registry: ToolRegistry, ctx: ToolContext, method: str, risk: str
) -> None:
    tool = registry.get("http_request")
    assert tool is not None
    assessment = tool.assess(ctx, tool.validate({"url": "https://example.com/", "method": method}))
    assert assessment.risk == risk
    assert not assessment.forbidden


@pytest.mark.parametrize("name", ["http_request", "web_fetch"])
@pytest.mark.parametrize("url", ["http://127.0.0.1/", "ftp://example.com/", "not a url"])
def test_assess_forbids_refused_urls_so_nothing_is_sent(
    registry: ToolRegistry, ctx: ToolContext, name: str, url: str
) -> None:
    tool = registry.get(name)
    assert tool is not None
    assessment = tool.assess(ctx, tool.validate({"url": url}))
    assert assessment.forbidden
    assert "refused" in assessment.reason


def test_the_tools_are_network_tools_with_untrusted_output(registry: ToolRegistry) -> None:
    for name in ("http_request", "web_fetch"):
        tool = registry.get(name)
        assert tool is not None
        assert tool.effect == "network"
        assert tool.untrusted_output
    web_fetch = registry.get("web_fetch")
    assert web_fetch is not None
    assert web_fetch.risk == "low"
