"""Who may reach the panel: the config rules for other addresses, TLS, a proxy, the CLI.

A listen address off the loopback needs TLS (``[web] tls_cert``/``tls_key``) or
``behind_proxy = true`` (and, for the API, ``[web] token``); the daemon then
serves HTTPS with a certificate made here by ``openssl``, and the session cookie
is ``Secure``. Behind a proxy the login rate limit counts the address the proxy
saw. ``pinclaw web token`` is the installed command.
"""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import httpx
import pytest

from bot.core.errors import ConfigError
from tests.browser import csrf_of, panel_daemon
from tests.cli_helpers import run, write_config
from tests.fake_llm import FakeLLM


def config_with(home: Path, llm: FakeLLM, web: str) -> Path:
    """A config file with the fake model and the given ``[web]`` lines."""
    return write_config(
        home,
        f'[provider]\nkind = "openai"\nmodel = "fake"\nbase_url = "{llm.url}/v1"\n[web]\n{web}\n',
    )


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made by openssl."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def test_a_remote_listen_needs_tls_or_a_proxy(tmp_path: Path, llm: FakeLLM) -> None:
    home = tmp_path / "home"
    remote = 'listen = "0.0.0.0:8765"\ntoken = "s3cret-t0ken"'
    checked = run(home, "config", "check", "--config", str(config_with(home, llm, remote)))
    assert checked.returncode == 2
    assert "web.tls_key" in checked.stderr and "behind_proxy = true" in checked.stderr
    proxied = config_with(home, llm, remote + "\nbehind_proxy = true")
    assert run(home, "config", "check", "--config", str(proxied)).returncode == 0
    no_panel = config_with(home, llm, remote + "\npanel = false")  # metrics for a Prometheus
    assert run(home, "config", "check", "--config", str(no_panel)).returncode == 0
    cert, key = self_signed(tmp_path)
    tls = config_with(home, llm, remote + f'\ntls_cert = "{cert}"\ntls_key = "{key}"')
    assert run(home, "config", "check", "--config", str(tls)).returncode == 0
    half = config_with(home, llm, f'tls_cert = "{cert}"')
    checked = run(home, "config", "check", "--config", str(half))
    assert checked.returncode == 2 and "set both [web] tls_cert and tls_key" in checked.stderr


async def test_over_tls_the_cookie_is_secure(tmp_path: Path, llm: FakeLLM) -> None:
    cert, key = self_signed(tmp_path)
    web = {"tls_cert": str(cert), "tls_key": str(key)}
    async with panel_daemon(tmp_path, llm, web=web) as panel:
        url = panel.url.replace("http://", "https://")
        trusted = ssl.create_default_context(cafile=str(cert))
        async with httpx.AsyncClient(base_url=url, verify=trusted, timeout=10) as http:
            form = await http.get("/login")
            assert form.headers["Strict-Transport-Security"].startswith("max-age=")
            answer = await http.post(
                "/login", data={"csrf": csrf_of(form.text), "token": await panel.token()}
            )
            assert answer.status_code == 303
            cookie = answer.headers["Set-Cookie"]
            assert "pinclaw_session=" in cookie and "Secure" in cookie and "HttpOnly" in cookie
            assert (await http.get("/status")).status_code == 200
        async with httpx.AsyncClient(timeout=10) as plain:
            try:
                await plain.get(f"{panel.url}/login")
            except httpx.HTTPError:
                pass  # plain HTTP gets no answer on a TLS port
            else:
                raise AssertionError("the panel answered plain HTTP on its TLS port")


async def test_a_certificate_that_cannot_be_read_stops_the_start(
    tmp_path: Path, llm: FakeLLM
) -> None:
    web = {"tls_cert": str(tmp_path / "missing.pem"), "tls_key": str(tmp_path / "key.pem")}
    with pytest.raises(ConfigError, match=r"\[web\] tls_cert / tls_key: cannot load"):
        async with panel_daemon(tmp_path, llm, web=web):
            pass


async def test_behind_a_proxy_logins_are_counted_per_forwarded_address(
    tmp_path: Path, llm: FakeLLM
) -> None:
    async with panel_daemon(tmp_path, llm, web={"behind_proxy": True}) as panel:
        token = await panel.token()
        async with panel.client() as http:

            async def log_in(client_address: str, sent: str) -> httpx.Response:
                forwarded = {"X-Forwarded-For": f"198.51.100.1, {client_address}"}
                form = await http.get("/login", headers={"Host": "pinclaw.example"})
                # The cookie is Secure (the proxy speaks HTTPS): sent by hand over plain HTTP.
                cookie = {"Cookie": f"pinclaw_login={form.cookies['pinclaw_login']}"}
                return await http.post(
                    "/login",
                    data={"csrf": csrf_of(form.text), "token": sent},
                    headers={**forwarded, **cookie, "Host": "pinclaw.example"},
                )

            for _ in range(5):
                wrong = await log_in("203.0.113.5", "wrong")
                assert wrong.status_code == 401, wrong.text
            assert (await log_in("203.0.113.5", token)).status_code == 429
            allowed = await log_in("203.0.113.6", token)
            assert allowed.status_code == 303
            assert "Secure" in allowed.headers["Set-Cookie"]  # the proxy speaks TLS


async def test_the_token_command_prints_only_the_token_on_stdout(
    tmp_path: Path, llm: FakeLLM
) -> None:
    async with panel_daemon(tmp_path, llm) as panel:
        args = ["web", "token", "--config", str(panel.config)]
        first = run(panel.home, *args)
        assert first.returncode == 0 and len(first.stdout.split()) == 1
        assert f"Open {panel.url}/login and paste the token above." in first.stderr
        rotated = run(panel.home, *args, "--rotate")
        assert rotated.returncode == 0 and rotated.stdout != first.stdout
        assert "Logged out 0 browser session(s)." in rotated.stderr
