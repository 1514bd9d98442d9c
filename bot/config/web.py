"""``[web]``: the daemon's local HTTP endpoint (health, metrics, status for the CLI)."""

from __future__ import annotations

import ipaddress
import re

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from bot.config.base import Section, empty_is_none

DEFAULT_LISTEN = "127.0.0.1:8765"
_ADDRESS = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^:\s\[\]]+)):(?P<port>\d{1,5})$")


class WebConfig(Section):
    """Where the daemon listens for ``/healthz``, ``/metrics`` and ``pinclaw status``.

    ``listen = "off"`` turns the endpoint off. Any address other than loopback
    needs a ``token``, which every request must then send as ``Authorization:
    Bearer TOKEN`` (with a token set, loopback requests need it too).
    """

    listen: str = DEFAULT_LISTEN
    token: SecretStr | None = Field(default=None, validate_default=True)
    health_grace_s: float = Field(default=120.0, ge=0)

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
        return f"http://[{host}]:{where[1]}" if ":" in host else f"http://{host}:{where[1]}"


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
