"""The ``shell`` tool: run one command line with ``/bin/sh`` in the workspace, bounded.

Every call is rated first by ``bot.security.shell.risk.examine`` (the tool's
``assess``), so the policy gate sees each segment, substitution, path and host
of the line. Where the kernel offers one, the command then runs inside the
bubblewrap sandbox (``bot.security.sandbox.bwrap``): its own namespaces, the
workspace writable, secrets not mounted, a network namespace of its own, and
no way out unless the call needed a person's approval (or the owner chose
``full`` autonomy or ``auto_approve``): then only through PinClaw's egress
proxy (``bot.security.net.egress``), which refuses loopback, private addresses and
PinClaw's own ports as ``http_request`` does. Without the sandbox the
classifier is stricter. Either way the
command gets a scrubbed environment (no tokens or API keys), no stdin, a time
limit that stops every process it started, and a cap on the output kept
(``tools.shell_process``). A non-zero exit code is an ordinary result.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, Field

from bot.config import LoadedConfig
from bot.core.errors import ConfigError, Refused, ToolError
from bot.core.taint import listed
from bot.core.tool_api import Assessment, Tool, ToolContext, ToolResult, tool
from bot.security.sandbox.wire import SOCKET_ENV
from tools.shell_process import DRAIN_S, STOP_GRACE_S, run_command

if TYPE_CHECKING:
    from bot.security.kit import SecurityKit
    from bot.security.net.addresses import Allowlist
    from bot.security.sandbox.bwrap import Sandbox, SandboxCheck, SandboxLayout, SandboxMode
    from bot.security.shell.risk import LineVerdict
    from bot.security.shell.state import ShellState

log = logging.getLogger(__name__)

SHELL = "/bin/sh"
KEPT_VARIABLES = frozenset({"PATH", "HOME", "LANG", "TERM", "TZ", "USER", "TMPDIR"})
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
HOST_CHECK_S = 5.0
UNSANDBOXED = (
    "shell commands run WITHOUT a sandbox: %s; commands that run scripts or use the network "
    "ask for approval first"
)
FULL_NEEDS_SANDBOX = (
    'security.autonomy = "full" runs shell commands without asking, so it needs the shell '
    "sandbox (security.shell_sandbox), but {why}; install bubblewrap "
    '(sudo apt install bubblewrap), set security.autonomy = "supervised", '
    'or disable the shell tool with [tools] disabled = ["shell"]'
)


def build(loaded: LoadedConfig, security: SecurityKit) -> list[Tool]:
    """The ``shell`` tool, bound to the kit's guards, its settings and the sandbox.

    With ``shell_sandbox = "auto"`` the sandbox is looked for (a few processes
    started) when the first command is judged, not here: most runs never start one.
    ``"required"`` looks now, so a missing sandbox stops the start.
    """
    if "shell" in loaded.config.tools.disabled:
        return []
    mode = security.config.shell_sandbox
    helper = os.environ.get(SOCKET_ENV, "")
    if security.config.autonomy == "full":
        return shell_tools(security, _full_sandbox(sandbox_layout(security), mode, helper))
    if mode != "auto":
        return shell_tools(security, _sandbox(sandbox_layout(security), mode, helper))
    return shell_tools(security, functools.partial(_auto_sandbox, security, helper))


def _full_sandbox(layout: SandboxLayout, mode: SandboxMode, helper: str) -> Sandbox:
    """``autonomy = "full"`` runs commands unasked, so only inside a working sandbox."""
    if mode == "off":
        raise ConfigError(FULL_NEEDS_SANDBOX.format(why='security.shell_sandbox is "off"'))
    check = sandbox_check(layout, mode, helper)
    if check.sandbox is None:
        raise ConfigError(FULL_NEEDS_SANDBOX.format(why=check.summary))
    sandbox = _sandbox(layout, mode, helper)
    assert sandbox is not None
    return sandbox


def _auto_sandbox(security: SecurityKit, helper: str) -> Sandbox | None:
    return _sandbox(sandbox_layout(security), "auto", helper)


def sandbox_layout(security: SecurityKit) -> SandboxLayout:
    """What a sandboxed command may write and must not see, by the kit's path guard."""
    from bot.security.sandbox.bwrap import SandboxLayout

    guard = security.paths
    return SandboxLayout(  # the forbidden places include PinClaw's own (security.kit)
        workspace=guard.workspace,
        writable=guard.roots[1:],
        hidden=tuple(Path(place) for place in guard.forbidden),
        home=guard.home,
    )


@functools.cache
def sandbox_check(layout: SandboxLayout, mode: SandboxMode, helper: str) -> SandboxCheck:
    """The sandbox for ``layout`` (and helper socket), looked for once, and why not if none."""
    from bot.security.sandbox.bwrap import find_sandbox

    return find_sandbox(layout, mode)


def shell_state(loaded: LoadedConfig, security: SecurityKit) -> ShellState:
    """Where shell commands run, for the log, ``status``, ``doctor`` and the panel (blocks)."""
    from bot.security.shell.state import ShellState

    if "shell" in loaded.config.tools.disabled:
        return ShellState("disabled")
    mode, helper = security.config.shell_sandbox, os.environ.get(SOCKET_ENV, "")
    check = sandbox_check(sandbox_layout(security), mode, helper)  # the shell tool's own
    return ShellState("sandboxed" if check.sandbox is not None else "unsandboxed", check.summary)


def announce_sandbox(security: SecurityKit) -> None:
    """Look for the sandbox now and say in the log, once, where shell commands will run."""
    layout, helper = sandbox_layout(security), os.environ.get(SOCKET_ENV, "")
    mode = security.config.shell_sandbox
    if security.config.autonomy == "full":
        _full_sandbox(layout, mode, helper)
    else:
        _sandbox(layout, mode, helper)


@functools.cache
def _sandbox(layout: SandboxLayout, mode: SandboxMode, helper: str) -> Sandbox | None:
    """Find the sandbox once per layout (and helper socket); say once where commands run."""
    check = sandbox_check(layout, mode, helper)
    if mode == "off":
        log.warning(UNSANDBOXED, check.summary)
    elif check.sandbox is not None:
        log.info("shell commands run in the kernel sandbox: %s", check.summary)
    elif mode == "required":
        raise ConfigError(
            f'security.shell_sandbox is "required", but {check.summary}; install bubblewrap '
            'or set shell_sandbox = "auto"'
        )
    else:
        log.warning(UNSANDBOXED + "; to confine them, install bubblewrap", check.summary)
    return check.sandbox


def shell_tools(
    security: SecurityKit, sandbox: Sandbox | Callable[[], Sandbox | None] | None
) -> list[Tool]:
    """The ``shell`` tool judging with ``security`` and running in ``sandbox`` (if any);
    a function there is asked for it when the first command is judged (and must cache)."""
    config, guard = security.config, security.paths
    find = sandbox if callable(sandbox) else lambda: sandbox

    @functools.cache
    def hosts() -> Allowlist:
        from bot.security.net.addresses import Allowlist

        return Allowlist(config.allowed_hosts)

    def verdict_for(ctx: ToolContext, command: str) -> LineVerdict:
        from bot.security.shell.risk import examine  # loaded on the first shell call

        return examine(
            command,
            guard=guard,
            allowlist=config.shell_allowlist,
            cwd=ctx.workspace,
            sandboxed=find() is not None,
            hosts=hosts(),
        )

    def assess(ctx: ToolContext, command: str, timeout_s: int | None = None) -> Assessment:
        found = verdict_for(ctx, command).assessment
        if found.risk == "low" and ctx.taint and find() is not None:
            # In the sandbox running a workspace script is low risk, but it changes
            # things: after untrusted content it asks like any other acting call.
            from bot.security.shell.risk import examine

            bare = examine(command, guard=guard, allowlist=config.shell_allowlist,
                           cwd=ctx.workspace, hosts=hosts())  # fmt: skip
            return dataclasses.replace(found, acts=bare.assessment.risk != "low")
        return found

    # The registry's own timeout must leave room for stopping the process group.
    @tool(
        effect="shell",
        risk="medium",
        untrusted_output=True,
        assess=assess,
        timeout_s=config.shell_timeout_s + 2 * STOP_GRACE_S + DRAIN_S + 5,
        approval_fields=("command",),
        approval_key=rule_key,
    )
    async def shell(
        ctx: ToolContext,
        command: Annotated[str, Field(min_length=1, description="the command line to run")],
        timeout_s: Annotated[
            int | None,
            Field(ge=1, description="seconds before the command is stopped; omit for the default"),
        ] = None,
    ) -> ToolResult:
        """Run a command line with /bin/sh in the workspace folder; see the exit code and output.

        Stdout and stderr come back together; a non-zero exit code is a normal result.
        There is no input (stdin is closed), processes left in the background are
        stopped when the command ends, and a command running past its time limit is
        stopped. Risky commands need a person's approval or are refused.
        """
        verdict = verdict_for(ctx, command)
        if verdict.assessment.forbidden:  # the gate refuses these first; never run one
            raise Refused(f"refused: {verdict.assessment.reason}")
        # Only a call someone approved (or the owner's autonomy let through) reaches
        # the network; what runs without asking never does.
        network = verdict.assessment.risk != "low"
        if network and verdict.hosts:
            await _judge_hosts(security, verdict.hosts)
        limit = (
            config.shell_timeout_s if timeout_s is None else min(timeout_s, config.shell_timeout_s)
        )
        env = scrubbed_environment(os.environ, config.shell_env_passthrough)
        if verdict.assessment.risk == "low":  # unasked: what the workspace's settings name is off
            from bot.security.shell.neutral import neutralised

            env = neutralised(env, guard.roots)
        argv = [SHELL, "-c", command]
        sandbox = find()
        linked = await _forbidden_links(security, sandbox is not None)
        reached: list[str] = []  # the hosts the proxy let the command reach
        async with contextlib.AsyncExitStack() as doors:  # a way out lasts as long as the call
            if sandbox is not None:
                env["TMPDIR"] = "/tmp"  # the host's may not be mounted; the sandbox's is empty
                await asyncio.to_thread(ctx.workspace.mkdir, parents=True, exist_ok=True)
                egress = security.egress if network else None
                way_out = (
                    None
                    if egress is None
                    else await doors.enter_async_context(egress.door(reached))
                )
                argv = sandbox.command(argv, cwd=ctx.workspace, egress=way_out, hide=linked)
            outcome = await run_command(
                argv,
                cwd=ctx.workspace,
                env=env,
                limit_s=limit,
                max_bytes=config.shell_max_output_bytes,
                via=sandbox.via if sandbox is not None else None,
                contained=sandbox is not None,  # its PID namespace ends all; else a subreaper does
            )
        # What came back from the network is in the output: the turn has read it. The
        # hosts the line names, and those the sandbox's proxy let it reach.
        if network and (verdict.hosts or reached):
            ctx.taint.add(listed([*(host for host, _ in verdict.hosts), *reached]))
        elif network and "network" in verdict.assessment.reason:
            ctx.taint.add("the network (a shell command)")
        text = outcome.render()
        if linked:
            shown = ", ".join(guard.display(Path(path)) for path in linked[:3])
            text += (
                f"\n[{shown}: a hard link to a file in a forbidden location, hidden from "
                "commands; ask the owner to remove it]"
            )
        if outcome.timed_out:
            stopped = f"the command did not finish within {limit:g} s and was stopped"
            return ToolResult.failure(f"{stopped}, with every process it started", text)
        return ToolResult.success(text)

    return [shell]


async def _forbidden_links(security: SecurityKit, sandboxed: bool) -> list[str]:
    """Hard links in the workspace to forbidden files: hidden from a sandboxed command;
    without the sandbox no command runs while one is there (``Refused``)."""
    from bot.security.files.hardlinks import links_in

    guard = security.paths
    roots = [str(root) for root in guard.roots]
    linked, complete = await asyncio.to_thread(links_in, roots, guard.forbidden)
    if not complete:
        log.warning("the workspace is too large to look through for hard links at every command")
    if linked and not sandboxed:
        shown = ", ".join(guard.display(Path(path)) for path in linked[:3])
        raise Refused(
            f"refused: the workspace holds a hard link to a file in a forbidden location "
            f"({shown}); no command runs until the owner removes it"
        )
    return linked


async def _judge_hosts(security: SecurityKit, hosts: Sequence[tuple[str, int]]) -> None:
    """Look up the host names a command names; refuse one that leads to a private address.

    Bounded in time: a slow resolver must not hold an approved command forever
    (the command looks the names up again itself; the approver saw them).
    """
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(HOST_CHECK_S):
            for host, port in hosts:
                try:
                    await security.net.addresses(host, port)
                except Refused as exc:
                    raise Refused(f"refused: the command names {host}: {exc}") from None
                except ToolError:
                    continue  # an unknown name: the command will say so itself


def rule_key(values: BaseModel) -> str:
    """An "always allow" rule's key: the command's argv shape (its exact text if unreadable)."""
    from bot.security.shell.lexer import ShellSyntaxError, shape

    command = str(values.model_dump()["command"])
    try:
        found: object = shape(command)
    except ShellSyntaxError:
        found = command
    return json.dumps({"command": found}, ensure_ascii=False, separators=(",", ":"))


def scrubbed_environment(source: Mapping[str, str], passthrough: Collection[str]) -> dict[str, str]:
    """The variables a command may see: the harmless basics and the configured extras."""
    env = {
        name: value
        for name, value in source.items()
        if name in KEPT_VARIABLES or name.startswith("LC_") or name in passthrough
    }
    env.setdefault("PATH", DEFAULT_PATH)
    return env
