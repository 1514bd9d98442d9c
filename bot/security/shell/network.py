"""Commands that reach the network, and the hosts a command line names.

Any command that can open a connection needs a person's approval at
``supervised`` (and only an approved command gets the network inside the
kernel sandbox). The hosts it names, wherever they can be read from the line
(URLs, ``host:path``, ``user@host``, ``--registry``/``--index-url`` style
options, proxies, ``/dev/tcp/HOST/PORT``, ``curl --resolve``...), go through
the same policy as ``http_request``: a loopback, private, link-local or cloud
metadata address in any notation, or ``localhost``, is refused outright unless
``allowed_hosts`` names it; a host name is resolved and judged before the
command runs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from bot.security.net.addresses import Allowlist, address_problem, is_localhost, literal_ip
from bot.security.shell.lexer import Word
from bot.security.shell.tables import words

if TYPE_CHECKING:
    from bot.security.shell.call import Call, Walker

NETWORK: dict[str, str] = {
    **dict.fromkeys(
        words(
            """
            curl wget fetch aria2c axel lynx w3m links elinks http https xh httpie
            yt-dlp youtube-dl rclone s3cmd gsutil websocat grpcurl
            """
        ),
        "downloads or sends data over the network",
    ),
    **dict.fromkeys(
        words(
            """
            nc netcat ncat socat telnet ftp tftp lftp ncftp ssh scp sftp ssh-keyscan
            ssh-copy-id openssl mosquitto_pub mosquitto_sub smbclient ldapsearch mysql psql
            redis-cli mongo mongosh nmap whois iperf iperf3 torsocks proxychains proxychains4
            """
        ),
        "opens network connections",
    ),
    **dict.fromkeys(
        words("ping ping6 traceroute tracepath mtr dig host nslookup drill arping"),
        "sends packets over the network",
    ),
}
"""Commands whose purpose is the network (git and package managers have their own rules)."""

URL_OPTIONS = frozenset(
    {
        "--registry",
        "--index-url",
        "--extra-index-url",
        "--find-links",
        "--proxy",
        "--preproxy",
        "--url",
        "--remote",
        "--server",
        "--host",
        "--trusted-host",
        "--socks4",
        "--socks4a",
        "--socks5",
        "--socks5-hostname",
        "-connect",
    }
)
"""Options whose value names a host or URL the command talks to."""
_SHORT_URL_OPTIONS = {"pip": {"-i", "-f"}, "uv": {"-i", "-f"}, "curl": {"-x"}}
"""Short options that name a URL only for some commands (``pip -i``, ``curl -x``)."""

PROXY_VARIABLES = words(
    """
    http_proxy https_proxy ftp_proxy all_proxy HTTP_PROXY HTTPS_PROXY FTP_PROXY ALL_PROXY
    RSYNC_PROXY npm_config_registry NPM_CONFIG_REGISTRY npm_config_proxy PIP_INDEX_URL
    PIP_EXTRA_INDEX_URL PIP_PROXY UV_INDEX_URL GIT_PROXY_COMMAND
    """
)
"""Variables that send a command's traffic somewhere else."""

_PORTS = {"http": 80, "https": 443, "ftp": 21, "ssh": 22, "git": 9418, "rsync": 873}
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_PORT_ONLY = re.compile(r"^[^:]+:[0-9]{1,5}$")  # host:port, not host:path
_BRACKETED = re.compile(r"^\[([^\]]+)\](?::([0-9]{1,5}))?$")
_REMOTE_PATH = re.compile(r"^(?:[^@/\s]+@)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?!//)")
_SOCAT = re.compile(
    r"^(?:tcp[46]?|tcp[46]?-connect|udp[46]?|udp[46]?-connect|udp-sendto|openssl|openssl-connect|"
    r"sctp-connect|socks4a?|proxy|proxy-connect):([^:,]+)(?::([0-9]+))?",
    re.IGNORECASE,
)
_BARE_HOST_COMMANDS = frozenset(
    {"nc", "netcat", "ncat", "telnet", "ping", "ping6", "traceroute", "tracepath", "mtr"}
    | {"ssh", "ssh-keyscan", "ssh-copy-id", "host", "nslookup", "whois", "nmap", "arping"}
    | {"iperf", "iperf3", "ftp", "tftp", "lftp"}
)
"""Commands whose plain arguments are hosts (``nc HOST PORT``, ``ssh pi@HOST``)."""
_BARE_URL_COMMANDS = frozenset({"curl", "wget", "http", "https", "xh", "fetch", "aria2c"})
"""Commands that take ``127.0.0.1:8080/x`` as a URL: judged as written, not looked up."""
Contact = tuple[str, int, str, bool]
"""(host, port, as written, whether to look the name up before the command runs)"""
_VALUE_OPTIONS = frozenset({"-p", "-P", "-o", "-O", "-e", "-l", "-w", "-c", "-t", "-W", "-q"})
_COMMAND_VALUE_OPTIONS = {
    "curl": words(
        """
        -m --max-time -d --data --data-binary --data-raw --data-urlencode --json -H --header
        -A --user-agent -u --user -X --request -o --output -w --write-out -e --referer
        -b --cookie -c --cookie-jar -T --upload-file -F --form -r --range -K --config
        -C --continue-at -E --cert --key --cacert -D --dump-header --connect-timeout
        --retry --retry-delay --retry-max-time --limit-rate -Y -y -z --time-cond
        --max-filesize --oauth2-bearer --proto --proto-redir -U --proxy-user
        """
    ),
    "wget": words(
        """
        -O -o -a -P -t --tries -T --timeout -w --wait -e --execute -U --user-agent
        --header --post-data --post-file --body-data --body-file -Q --quota -l --level
        -A -R -D --user --password --http-user --http-password --method -B --base
        """
    ),
}


def host_problem(host: str, allowed: Allowlist | None) -> str | None:
    """Why a command may never reach ``host`` (a phrase), or None; names are judged later."""
    name = host.strip().strip("[]").lower().rstrip(".")
    if allowed is not None and allowed.has_name(name):
        return None
    ip = literal_ip(name)
    if ip is not None:
        problem = allowed.problem(ip) if allowed is not None else address_problem(ip)
        if problem is None:
            return None
        spelled = name if str(ip) == name else f"{name} (that is {ip})"
        return f"{spelled} is {problem}"
    if is_localhost(name) or name in ("", "0"):
        return f"{name or 'an empty host'} is a loopback address"
    return None


def network_call(w: Walker, call: Call) -> None:
    """Rate a network command: approval needed, and every host it names judged."""
    if call.name == "openssl" and not any(a.text in _OPENSSL_NETWORK for a in call.args):
        return
    remote = (_remote(a.text) or _SCHEME.match(a.text) for a in call.args)
    if call.name == "rsync" and not any(remote):
        return
    w.add("medium", f"{call.name} {NETWORK[call.name]}")
    for contact in contacts(call.name, call.args):
        w.contact(*contact)


_OPENSSL_NETWORK = frozenset({"s_client", "s_server", "s_time", "ocsp"})


def contacts(name: str, args: Sequence[Word]) -> list[Contact]:
    """The hosts a command's arguments name, wherever they can be read."""
    found: list[Contact] = []
    words = list(args)
    seen_host = False
    index = -1
    while index + 1 < len(words):
        index += 1
        text = words[index].text
        option, eq, value = text.partition("=")
        plain = not text.startswith("-") and not _after_value_option(words, index, name)
        url_option = text in URL_OPTIONS or text in _SHORT_URL_OPTIONS.get(name, ())
        if url_option and index + 1 < len(words):
            index += 1
            found += _hosts_in(words[index].text)
        elif eq and option in URL_OPTIONS:
            found += _hosts_in(value)
        elif text in ("--resolve", "--connect-to") and index + 1 < len(words):
            index += 1
            found += _resolve_target(words[index].text)
        elif plain and name in _BARE_URL_COMMANDS and not _SCHEME.match(text):
            found += [(h, p, t, False) for h, p, t, _ in _hosts_in("http://" + text)]
        elif plain and name in ("ssh", "telnet", "nc", "netcat", "ncat") and seen_host:
            continue  # after the host: a port or the remote command
        elif text.startswith("@") and name in ("dig", "drill"):
            found += _hosts_in(text[1:])
        elif name == "socat" and (match := _SOCAT.match(text)):
            found.append((match[1], int(match[2] or 0), text, True))
        elif _SCHEME.match(text) or (
            plain and (_remote(text) or "@" in text or name in _BARE_HOST_COMMANDS)
        ):
            found += _hosts_in(text)
            seen_host = True
    return found


def _after_value_option(words: Sequence[Word], index: int, name: str) -> bool:
    options = _COMMAND_VALUE_OPTIONS.get(name, _VALUE_OPTIONS)
    return index > 0 and words[index - 1].text in options


def _remote(text: str) -> bool:
    return bool(_REMOTE_PATH.match(text)) and not text.startswith(("/", ".", "~"))


def _resolve_target(text: str) -> list[Contact]:
    """``curl --resolve host:port:address`` and ``--connect-to h:p:host:port``: the target."""
    parts = text.split(":")
    if len(parts) < 3:
        return []
    if len(parts) >= 4 and parts[-1].isdigit():  # --connect-to HOST1:PORT1:HOST2:PORT2
        return [(parts[-2].strip("[]"), int(parts[-1]), text, True)]
    port = int(parts[1]) if parts[1].isdigit() else 0
    return [(":".join(parts[2:]).strip("[]"), port, text, True)]


def _hosts_in(text: str) -> list[Contact]:
    """The host (and port) in a URL, ``user@host:path``, ``host:port`` or a plain host."""
    text = text.strip()
    if not text or text.isdigit():
        return []
    scheme = _SCHEME.match(text)
    if scheme:
        if scheme[1].lower() in ("file", "ext"):
            return []
        try:
            parts = urlsplit(text)
            where, number = parts.hostname or "", parts.port
        except ValueError:
            return [(text, 0, text, False)]  # unreadable: judged as written
        return [(where, number or _PORTS.get(scheme[1].lower(), 0), text, True)]
    host = text.rpartition("@")[2]
    if (remote := _REMOTE_PATH.match(text)) and not _PORT_ONLY.match(host):
        return [(remote[1].strip("[]"), 22, text, True)]
    if "/" in host or not host:
        return []
    if bracketed := _BRACKETED.match(host):
        return [(bracketed[1], int(bracketed[2] or 0), text, True)]
    name, colon, port = host.partition(":")
    if colon and ":" not in port:
        return [(name, int(port) if port.isdigit() else 0, text, True)]
    return [(host, 0, text, True)]
