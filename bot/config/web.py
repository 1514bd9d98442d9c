"""``[web]``: the daemon's HTTP endpoint (health, metrics, status for the CLI) and the
web panel served on it."""

from __future__ import annotations

import ipaddress
import re

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from bot.config.base import Section, empty_is_none

DEFAULT_LISTEN = "127.0.0.1:8765"
_ADDRESS = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^:\s\[\]]+)):(?P<port>\d{1,5})$")


class WebConfig(Section):
    """Where the daemon listens for `/healthz`, `/metrics`, `pinclaw status` and
    the web panel.

    `listen = "off"` turns the endpoint off. Any address other than loopback
    needs a `token`, which every request to the three API paths must then send
    as `Authorization: Bearer TOKEN` (with a token set, loopback requests need
    it too), and, while the panel is on, TLS: `tls_cert` and `tls_key`, or
    `behind_proxy` for a reverse proxy that speaks HTTPS.
    """

    listen: str = Field(
        default=DEFAULT_LISTEN,
        description="`HOST:PORT` where the daemon serves `/healthz`, `/metrics`, `/status` (what "
        "`pinclaw status` reads), the web panel and webhook triggers, e.g. `0.0.0.0:8765` for "
        "the whole network. `off` turns all of it off. If the port is taken, the daemon logs "
        "it and runs without them.",
    )
    token: SecretStr | None = Field(
        default=None,
        validate_default=True,
        description="Once set, every request to `/healthz`, `/metrics` and `/status` must send "
        "`Authorization: Bearer TOKEN` (loopback ones too; `pinclaw status` reads it from "
        "here). Required when `listen` is not a loopback address; not set: only requests "
        "addressed to a loopback name are answered. Wrong tokens are not rate limited: make "
        "it long and random (`openssl rand -hex 32`). The panel has its own login.",
    )
    health_grace_s: float = Field(
        default=120.0,
        ge=0,
        description="Seconds a chat channel may be down (reconnecting) before `/healthz` answers "
        "503 and `pinclaw status` reports it down too long.",
    )
    panel: bool = Field(
        default=True,
        description="Serve the web panel at `/` on the same address (log in with "
        "`pinclaw web token`). Off the loopback it needs TLS: `tls_cert` and `tls_key`, or "
        "`behind_proxy`. `false`: only `/healthz`, `/metrics` and `/status`.",
    )
    behind_proxy: bool = Field(
        default=False,
        description="Set when a reverse proxy that speaks HTTPS (nginx, Caddy) is in front: the "
        "panel's cookie is then sent over HTTPS only, the login limit counts the last address "
        "in `X-Forwarded-For`, and any host name is served.",
    )
    tls_cert: str | None = Field(
        default=None,
        description="The certificate (PEM file) for serving HTTPS, e.g. `/etc/pinclaw/cert.pem`; "
        "set together with `tls_key`. Not set: plain HTTP, which off the loopback needs "
        "`behind_proxy` or `panel = false`.",
    )
    tls_key: str | None = Field(
        default=None,
        validate_default=True,
        description="The private key (PEM file) of `tls_cert`, e.g. `/etc/pinclaw/key.pem`.",
    )
    session_lifetime_s: float = Field(
        default=7 * 86400.0,
        gt=0,
        description="How long a web panel login lasts, in seconds. "
        "`pinclaw web token --rotate` ends every login at once.",
    )

    _empty_token_is_none = field_validator("token", mode="before")(empty_is_none)

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, value: str) -> str:
        value = value.strip()
        if value.lower() == "off":
            return "off"
        match = _ADDRESS.match(value)
        if match is None or not 0 < int(match["port"]) < 65536:
            raise ValueError(
                f'expected HOST:PORT like {DEFAULT_LISTEN!r} (or "off"), got {value!r}'
            )
        return value

    @field_validator("token", mode="after")
    @classmethod
    def _remote_needs_token(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        listen = info.data.get("listen", DEFAULT_LISTEN)
        where = _address(listen)
        if where is not None and not is_loopback(where[0]) and value is None:
            raise ValueError(
                f"required when listen is not a loopback address ({listen}); "
                "set [web] token, or listen on 127.0.0.1"
            )
        return value

    @field_validator("tls_key", mode="after")
    @classmethod
    def _remote_needs_tls(cls, value: str | None, info: ValidationInfo) -> str | None:
        cert = info.data.get("tls_cert")
        if (cert is None) != (value is None):
            raise ValueError("set both [web] tls_cert and tls_key (the certificate and its key)")
        listen = info.data.get("listen", DEFAULT_LISTEN)
        where = _address(listen)
        remote = where is not None and not is_loopback(where[0])
        proxied = info.data.get("behind_proxy", False)
        if remote and value is None and not proxied and info.data.get("panel", True):
            raise ValueError(
                f"required with tls_cert when listen is not a loopback address ({listen}) "
                "and the panel is on: its login must not cross a network in clear text; "
                "set [web] tls_cert and tls_key, or [web] behind_proxy = true when a TLS "
                "reverse proxy is in front, or [web] panel = false, or listen on 127.0.0.1"
            )
        return value

    @property
    def tls(self) -> bool:
        """Whether the daemon itself serves HTTPS."""
        return self.tls_key is not None

    @property
    def address(self) -> tuple[str, int] | None:
        """(host, port) to listen on, or None when the endpoint is off."""
        return _address(self.listen)

    @property
    def url(self) -> str:
        """The base URL a local client uses ("" when off)."""
        where = self.address
        if where is None:
            return ""
        host = where[0]
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1" if host == "0.0.0.0" else "::1"
        scheme = "https" if self.tls else "http"
        return f"{scheme}://[{host}]:{where[1]}" if ":" in host else f"{scheme}://{host}:{where[1]}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _address(listen: str) -> tuple[str, int] | None:
    match = _ADDRESS.match(listen)
    if match is None:
        return None
    return (match["v6"] or match["host"]), int(match["port"])
