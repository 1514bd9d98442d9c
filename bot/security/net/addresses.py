"""What an address is: public or not, in whatever notation it was written, and the allowlist.

``address_problem`` names why an address is not a public internet address; it
uses explicit tables first (their wording reaches the user) and Python's
``is_global`` only as the catch-all, since that attribute's answers have changed
between Python releases. IPv6 forms that carry an IPv4 address (mapped, NAT64,
6to4, Teredo) are judged by the address they carry.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

from bot.core.errors import ConfigError

IPAddress = IPv4Address | IPv6Address

_V4_KINDS: tuple[tuple[IPv4Network, str], ...] = tuple(
    (IPv4Network(net), kind)
    for net, kind in (
        ("0.0.0.0/8", "an unspecified address"),
        ("127.0.0.0/8", "a loopback address"),
        ("169.254.169.254/32", "the cloud metadata address"),
        ("169.254.0.0/16", "a link-local address"),
        ("10.0.0.0/8", "a private network address"),
        ("172.16.0.0/12", "a private network address"),
        ("192.168.0.0/16", "a private network address"),
        ("100.64.0.0/10", "a carrier-grade NAT address"),
        ("224.0.0.0/4", "a multicast address"),
        ("255.255.255.255/32", "the broadcast address"),
        ("240.0.0.0/4", "a reserved address"),
    )
)
_V6_KINDS: tuple[tuple[IPv6Network, str], ...] = tuple(
    (IPv6Network(net), kind)
    for net, kind in (
        ("::/128", "an unspecified address"),
        ("::1/128", "a loopback address"),
        ("::/96", "a deprecated IPv4-compatible address"),
        ("64:ff9b:1::/48", "a local-use NAT64 address"),
        ("fe80::/10", "a link-local address"),
        ("fc00::/7", "a private network address (IPv6 unique local)"),
        ("fec0::/10", "a site-local address"),
        ("ff00::/8", "a multicast address"),
    )
)
_NAT64 = IPv6Network("64:ff9b::/96")
_LOOSE_PART = re.compile(r"0[xX](?P<hex>[0-9a-fA-F]*)|(?P<oct>0[0-7]*)|(?P<dec>[1-9][0-9]*)")
_HOST_NAME = re.compile(r"(\*\.)?[a-z0-9_-]+(\.[a-z0-9_-]+)*")
_NOT_PUBLIC = "a special-purpose address, not a public one"


def address_problem(ip: IPAddress) -> str | None:
    """Why ``ip`` is not a public internet address (a phrase), or None when it is one."""
    if isinstance(ip, IPv4Address):
        for network, kind in _V4_KINDS:
            if ip in network:
                return kind
        return None if ip.is_global else _NOT_PUBLIC
    embedded = _embedded_ipv4(ip)
    if embedded is not None:
        form, inner = embedded
        problem = address_problem(inner)
        if problem:
            return f"{form} {inner}, {problem}"
        if ip.ipv4_mapped is not None:
            return None  # ::ffff:8.8.8.8 is 8.8.8.8, whatever is_global says about ::ffff:0:0/96
        if ip.sixtofour is not None:
            # 2002:808:808:: reaches 8.8.8.8; Python 3.11.2 (Debian Bookworm's and
            # Raspberry Pi OS's) calls all of 2002::/16 private, later releases do not.
            return None
    for network6, kind in _V6_KINDS:
        if ip in network6:
            return kind
    return None if ip.is_global else _NOT_PUBLIC


def _embedded_ipv4(ip: IPv6Address) -> tuple[str, IPv4Address] | None:
    if ip.ipv4_mapped is not None:
        return "the IPv4-mapped form of", ip.ipv4_mapped
    if ip in _NAT64:
        return "a NAT64 address for", IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return "a 6to4 address for", ip.sixtofour
    if ip.teredo is not None:
        return "a Teredo address for", ip.teredo[1]
    return None


def literal_ip(host: str) -> IPAddress | None:
    """The address ``host`` spells, in any form ``inet_aton`` reads (``127.1``, ``0x7f000001``)."""
    try:
        return ip_address(host.strip("[]"))
    except ValueError:
        pass
    parts = host.split(".")
    if len(parts) > 4:
        return None
    values = []
    for part in parts:
        match = _LOOSE_PART.fullmatch(part)
        if match is None:
            return None
        hex_, oct_, dec = match.group("hex", "oct", "dec")
        if hex_ is not None:
            values.append(int(hex_ or "0", 16))
        else:
            values.append(int(oct_, 8) if oct_ else int(dec))
    *head, last = values
    if any(value > 255 for value in head) or last >= 256 ** (4 - len(head)):
        return None
    return IPv4Address(sum(value << (8 * (3 - i)) for i, value in enumerate(head)) + last)


def normal_host(host: str) -> str:
    """``host`` lower-cased, without surrounding space or one trailing dot."""
    host = host.strip().lower()
    return host[:-1] if host.endswith(".") else host


def is_localhost(name: str) -> bool:
    """Whether ``name`` is ``localhost`` or under it (RFC 6761: always loopback)."""
    return name == "localhost" or name.endswith(".localhost")


class Allowlist:
    """``security.allowed_hosts``: names (``*.lan`` for subdomains), addresses and networks."""

    def __init__(self, entries: Iterable[str]) -> None:
        self._names: set[str] = set()
        self._suffixes: list[str] = []
        self._networks: list[IPv4Network | IPv6Network] = []
        for entry in entries:
            self._add(entry)

    def _add(self, entry: str) -> None:
        text = normal_host(entry).strip("[]")
        try:
            self._networks.append(ip_network(text, strict=False))
            return
        except ValueError:
            pass
        if not _HOST_NAME.fullmatch(text):
            raise ConfigError(
                f"security.allowed_hosts: {entry!r} is not a host name, an IP address "
                "or a network such as 192.168.1.0/24"
            )
        if text.startswith("*."):
            self._suffixes.append(text[1:])
        else:
            self._names.add(text)

    def has_name(self, name: str) -> bool:
        """Whether the host name ``name`` (normalised) is allowed whatever it resolves to."""
        return name in self._names or any(name.endswith(s) for s in self._suffixes)

    def problem(self, ip: IPAddress) -> str | None:
        """``address_problem``, except for addresses in an allowed network."""
        mapped = ip.ipv4_mapped if isinstance(ip, IPv6Address) else None
        if any(ip in net or (mapped is not None and mapped in net) for net in self._networks):
            return None
        return address_problem(ip)
