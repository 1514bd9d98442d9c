"""Building the security pieces from the config, once, for every tool factory.

The network guard is built on first use: it brings httpcore's connection
machinery, which a turn that never touches the web should not pay for at start.
So is the egress proxy of sandboxed commands, at the first command that may
use the network; ``aclose`` closes what it still has open, after what tools
asked it to close first (``close_with``: the browser, which uses the proxy).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bot.config import LoadedConfig
from bot.config.security import SecurityConfig
from bot.core.tls import shared_ssl_context
from bot.security.files.paths import PathGuard
from bot.security.redact import Redactor, config_secrets

if TYPE_CHECKING:
    from bot.security.net.egress import EgressProxy
    from bot.security.net.policy import NetGuard, Resolver


class SecurityKit:
    """What tools are given: the policy's settings and its guards."""

    def __init__(
        self,
        *,
        config: SecurityConfig,
        workspace: Path,
        paths: PathGuard,
        redactor: Redactor,
        make_net: Callable[[], NetGuard],
        make_egress: Callable[[NetGuard], EgressProxy] | None = None,
    ) -> None:
        self.config = config
        self.workspace = workspace
        self.paths = paths
        self.redactor = redactor
        self._make_net = make_net
        self._make_egress = make_egress
        self._closers: list[Callable[[], Awaitable[None]]] = []

    @functools.cached_property
    def net(self) -> NetGuard:
        """The network guard, built the first time a tool needs it."""
        return self._make_net()

    @functools.cached_property
    def egress(self) -> EgressProxy | None:
        """The proxy sandboxed commands reach the network through (None: they never do)."""
        return None if self._make_egress is None else self._make_egress(self.net)

    def close_with(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Have ``aclose`` await ``closer`` (something a tool keeps open) before the proxy."""
        self._closers.append(closer)

    async def aclose(self) -> None:
        """Close what tools keep open, then what the egress proxy still has open (if it was
        built); idempotent."""
        for closer in reversed(self._closers):
            await closer()
        egress = self.__dict__.get("egress")
        if egress is not None:
            await egress.stop()


def own_files(loaded: LoadedConfig) -> list[str]:
    """PinClaw's own state, forbidden whatever the config lists: the data folder (but for
    the workspace inside it), the config file and the secrets file next to it."""
    config = loaded.path.expanduser().absolute()
    return [str(loaded.data_dir), str(config), str(config.parent / "pinclaw.env")]


def build_security(loaded: LoadedConfig, *, resolver: Resolver | None = None) -> SecurityKit:
    """The kit for ``loaded``; ``resolver`` replaces DNS (tests point names at fakes)."""
    config = loaded.config.security

    def make_net() -> NetGuard:
        from bot.security.net.policy import NetGuard

        return NetGuard(
            config.allowed_hosts,
            ssl=shared_ssl_context(),
            timeout_s=config.web_timeout_s,
            max_bytes=config.web_max_bytes,
            max_redirects=config.web_max_redirects,
            resolver=resolver,
        )

    def make_egress(net: NetGuard) -> EgressProxy:
        from bot.security.net.egress import EgressProxy

        web = loaded.config.web.address  # another PinClaw process of this config may hold it
        return EgressProxy(
            net.addresses,
            loaded.data_dir,
            configured_ports=() if web is None else (web[1],),
            connect_timeout_s=config.web_timeout_s,
        )

    return SecurityKit(
        config=config,
        workspace=loaded.workspace,
        paths=PathGuard(
            loaded.workspace,
            extra_roots=[Path(p).expanduser() for p in config.extra_roots],
            forbidden=[*config.forbidden_paths, *own_files(loaded)],
        ),
        redactor=Redactor(config_secrets(loaded.config)),
        make_net=make_net,
        make_egress=make_egress,
    )
