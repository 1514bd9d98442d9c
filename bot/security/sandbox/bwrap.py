"""The kernel sandbox around each shell command: bubblewrap (``bwrap``) namespaces.

A command runs in user, PID, IPC, UTS and network namespaces of its own; the
network one holds nothing but its own loopback, and a call that may use the
network reaches out only through PinClaw's egress proxy (``sandbox.net``,
``net.egress``), which refuses loopback, private and PinClaw's own addresses. It
sees the host's file system read-only, its workspace (and the extra roots)
writable, an empty ``/tmp``, a ``/proc`` showing only its own processes and a
minimal ``/dev``; and it does not see at all what holds
secrets: home folders (the workspace and extra roots are mounted back),
PinClaw's data folder and config, every forbidden path, ``/run``, ``/var``,
and ``/etc`` except the files ordinary programs need (users and groups, name
resolution, the time zone, certificates, ...). bwrap dies with its parent and
the PID namespace ends with the command, so nothing it starts can outlive it.

bubblewrap was chosen over ``unshare(1)``: it is made for unprivileged use,
builds the whole mount layout in one step, runs a reaper as PID 1 and kills
the namespace with its parent; with ``unshare`` all of that would be ours.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from bot.security.sandbox.wire import SOCKET_ENV, SandboxUnavailable, run_remote_blocking

if TYPE_CHECKING:
    from bot.security.sandbox.net import Relay

log = logging.getLogger(__name__)

SandboxMode = Literal["auto", "required", "off"]

ETC_KEPT = frozenset(
    """
    passwd group hosts hostname resolv.conf nsswitch.conf host.conf gai.conf ld.so.cache
    ld.so.conf ld.so.conf.d localtime timezone alternatives ssl/certs ssl/openssl.cnf
    ca-certificates ca-certificates.conf mime.types magic magic.mime os-release
    debian_version rpi-issue protocols services networks inputrc locale.alias locale.conf
    manpath.config mtab shells papersize perl vim terminfo
    """.split()  # noqa: SIM905 - a long list reads better as words
)
"""What stays of /etc: what programs need to run, nothing that holds a secret."""

ALWAYS_HIDDEN = ("/home", "/root", "/run", "/var", "/tmp")
"""Replaced by empty folders whatever the config says (the workspace is mounted back)."""

_PRIVATE = frozenset({"/proc", "/dev", "/etc"})  # given a private form, never plainly hidden
PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class SandboxLayout:
    """What a sandboxed command may write, and what it must not see (absolute paths)."""

    workspace: Path
    writable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    home: Path | None = None


class Sandbox:
    """Builds the ``bwrap`` command line that runs one command inside the layout.

    ``via`` is the socket of the helper that runs it (under systemd), else None.
    """

    def __init__(
        self, program: str, layout: SandboxLayout, *, disable_userns: bool, via: str | None = None
    ) -> None:
        self.program = program
        self.layout = layout
        self.via = via
        self._disable_userns = disable_userns

    def command(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        egress: str | None = None,
        hide: Sequence[str] = (),
    ) -> list[str]:
        """``bwrap`` options, then ``--``, then ``argv`` run in ``cwd`` (a writable folder).

        The command's network namespace is its own either way; with ``net.egress``
        (the egress proxy's socket) a relay in it leads to that proxy. ``hide``:
        files in the writable folders to cover as well (hard links to forbidden files).
        """
        options = [
            self.program,
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--unshare-net",
            "--die-with-parent",
            "--new-session",
            *(["--disable-userns"] if self._disable_userns else []),
            "--cap-drop",
            "ALL",
            "--hostname",
            "pinclaw-sandbox",
            "--ro-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
        ]
        options += _mounts(self.layout)
        for place in hide:
            options += _hide(place)
        relay = self.relay if egress is not None else None
        if egress is not None and relay is None:
            log.warning("no Python can run the network relay in the sandbox: no network for it")
        if relay is not None and egress is not None:
            options += relay.options(egress)
            argv = relay.argv(argv)
        options += ["--chdir", os.fspath(cwd), "--"]
        return options + list(argv)

    @functools.cached_property
    def relay(self) -> Relay | None:
        """What leads a command to the egress proxy (None: no Python usable inside)."""
        home = os.path.realpath(self.layout.home) if self.layout.home else "/"
        broad = {*ALWAYS_HIDDEN, home, "/"}  # hidden whole; a Python in them is no secret
        forbidden = [os.path.realpath(p) for p in self.layout.hidden]
        forbidden = [p for p in forbidden if p not in broad and not _within(home, p)]
        from bot.security.sandbox.net import find_relay  # the first networked command

        return find_relay(_hidden_places(self.layout), forbidden)


def _mounts(layout: SandboxLayout) -> list[str]:
    """Hide what must not be seen, give /etc its kept files, bind the writable folders."""
    writable = [os.path.realpath(p) for p in (layout.workspace, *layout.writable)]
    writable = [p for p in dict.fromkeys(writable) if os.path.isdir(p)]
    hidden = _hidden_places(layout)
    inside = [p for p in hidden if any(_within(p, w) for w in writable)]
    outer = _outermost([p for p in hidden if p not in inside])
    mounts: list[str] = []
    for place in outer:
        mounts += _hide(place)
    mounts += ["--tmpfs", "/etc"]
    for kept in _etc_kept():
        mounts += ["--ro-bind", kept, kept]
    for folder in writable:
        mounts += ["--bind", folder, folder]
    for place in _outermost(inside):  # a forbidden folder inside the workspace stays hidden
        mounts += _hide(place)
    return mounts


def _outermost(places: list[str]) -> list[str]:
    """``places`` (sorted outermost first) without those inside another one."""
    kept: list[str] = []
    for place in sorted(dict.fromkeys(places), key=lambda p: (p.count("/"), p)):
        if not any(_within(place, k) for k in kept):
            kept.append(place)
    return kept


def _etc_kept() -> list[str]:
    """The kept entries of /etc that exist here (and Python's own folders, python3.11/...).

    Of /etc/ssl only the certificates and OpenSSL's settings: its private keys stay out.
    """
    try:
        python = [name for name in os.listdir("/etc") if name.startswith("python3")]
    except OSError:
        return []
    names = sorted({*ETC_KEPT, *python})
    return [f"/etc/{name}" for name in names if os.path.exists(f"/etc/{name}")]


def _hidden_places(layout: SandboxLayout) -> list[str]:
    """Every existing place to hide, links resolved."""
    extra = [*([layout.home] if layout.home else []), *layout.hidden]
    real = [os.path.realpath(os.path.abspath(p)) for p in [*ALWAYS_HIDDEN, *map(str, extra)]]
    return [
        place
        for place in dict.fromkeys(real)
        if place != "/" and not any(_within(place, p) for p in _PRIVATE) and os.path.exists(place)
    ]


def _hide(place: str) -> list[str]:
    if os.path.isdir(place):
        return ["--tmpfs", place]
    # A file becomes /dev/null mounted without device access: reading it is refused.
    return ["--ro-bind", "/dev/null", place]


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


@dataclass(frozen=True, slots=True)
class SandboxCheck:
    """The sandbox to use (None: run without one), and a sentence saying so or why not."""

    sandbox: Sandbox | None
    summary: str


def find_sandbox(layout: SandboxLayout, mode: SandboxMode) -> SandboxCheck:
    """Look for a working ``bwrap`` and try the layout once with ``/bin/true``.

    Under systemd (``$PINCLAW_SANDBOX_SOCKET`` set by the unit) the helper
    behind that socket is tried first: the service itself may not create
    namespaces.
    """
    if mode == "off":
        return SandboxCheck(None, "off in the config (security.shell_sandbox)")
    program = shutil.which("bwrap")
    if program is None:
        return SandboxCheck(None, "bubblewrap is not installed (the package is `bubblewrap`)")
    disable_userns = _knows_disable_userns(program)
    via = os.environ.get(SOCKET_ENV, "")
    helper_problem = ""
    if via:
        helper = Sandbox(program, layout, disable_userns=disable_userns, via=via)
        helper_problem = _try(helper)
        if not helper_problem:
            return SandboxCheck(helper, f"bubblewrap ({program}) through {via}")
    local = _local(program, layout, disable_userns)
    if local.sandbox is None and helper_problem:
        return SandboxCheck(None, f"{helper_problem}; and {local.summary}")
    return local


def _knows_disable_userns(program: str) -> bool:
    try:
        usage = subprocess.run(
            [program, "--help"],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "--disable-userns" in usage


def _local(program: str, layout: SandboxLayout, disable_userns: bool) -> SandboxCheck:
    sandbox = Sandbox(program, layout, disable_userns=disable_userns)
    problem = _try(sandbox)
    if problem:
        return SandboxCheck(None, f"bubblewrap ({program}) cannot create a sandbox here: {problem}")
    return SandboxCheck(sandbox, f"bubblewrap ({program})")


def _try(sandbox: Sandbox) -> str:
    """Why a trivial command fails in the sandbox ("" when it runs)."""
    argv = sandbox.command(["/bin/true"], cwd=Path("/"))
    if sandbox.via is not None:
        try:
            status, output = run_remote_blocking(
                sandbox.via, argv, cwd=Path("/"), env={}, timeout_s=PROBE_TIMEOUT_S
            )
        except SandboxUnavailable as exc:
            return str(exc)
        lines = output.decode(errors="replace").strip().splitlines()
        reason = lines[-1].removeprefix("bwrap: ") if lines else f"exit code {status}"
        return "" if status == 0 else f"the sandbox helper at {sandbox.via} failed: {reason}"
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            env={"PATH": "/usr/bin:/bin"},
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if done.returncode == 0:
        return ""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return lines[-1].removeprefix("bwrap: ") if lines else f"exit code {done.returncode}"
