"""The ``shell`` tool: run one command line with ``/bin/sh`` in the workspace, bounded.

Every call is rated first by ``bot.security.shell_risk.examine`` (the tool's
``assess``), so the policy gate sees each segment, substitution, path and host
of the line. Where the kernel offers one, the command then runs inside the
bubblewrap sandbox (``bot.security.sandbox``): its own namespaces, the
workspace writable, secrets not mounted, and no network unless the call
needed a person's approval (or the owner chose ``full`` autonomy or
``auto_approve``); without it the classifier is stricter. Either way the
command gets a scrubbed environment (no tokens or API keys), no stdin, a time
limit that stops every process it started, and a cap on the output kept
(``tools.shell_process``). A non-zero exit code is an ordinary result.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from bot.core.tool_api import Assessment, Tool, ToolContext, ToolResult, tool
from bot.security.sandbox_wire import SOCKET_ENV
from tools.shell_process import DRAIN_S, STOP_GRACE_S, run_command

if TYPE_CHECKING:
    from bot.security.kit import SecurityKit
    from bot.security.net_addresses import Allowlist
    from bot.security.sandbox import Sandbox, SandboxLayout, SandboxMode
    from bot.security.shell_risk import LineVerdict

log = logging.getLogger(__name__)

SHELL = "/bin/sh"
KEPT_VARIABLES = frozenset({"PATH", "HOME", "LANG", "TERM", "TZ", "USER", "TMPDIR"})
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
HOST_CHECK_S = 5.0


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
    if mode != "auto":
        return shell_tools(security, _sandbox(sandbox_layout(security), mode, helper))
    return shell_tools(security, functools.partial(_auto_sandbox, security, helper))


def _auto_sandbox(security: SecurityKit, helper: str) -> Sandbox | None:
    return _sandbox(sandbox_layout(security), "auto", helper)


def sandbox_layout(security: SecurityKit) -> SandboxLayout:
    """What a sandboxed command may write and must not see, by the kit's path guard."""
    from bot.security.sandbox import SandboxLayout

    guard = security.paths
    return SandboxLayout(  # the forbidden places include PinClaw's own (security.kit)
        workspace=guard.workspace,
        writable=guard.roots[1:],
        hidden=tuple(Path(place) for place in guard.forbidden),
        home=guard.home,
    )


@functools.cache
def _sandbox(layout: SandboxLayout, mode: SandboxMode, helper: str) -> Sandbox | None:
    """Find the sandbox once per layout (and helper socket); say once where commands run."""
    from bot.security.sandbox import find_sandbox

    check = find_sandbox(layout, mode)
    if mode == "off":
        log.info("shell commands run without the kernel sandbox: %s", check.summary)
    elif check.sandbox is not None:
        log.info("shell commands run in the kernel sandbox: %s", check.summary)
    elif mode == "required":
        raise ConfigError(
            f'security.shell_sandbox is "required", but {check.summary}; install bubblewrap '
            'or set shell_sandbox = "auto"'
        )
    else:
        log.warning(
            "shell commands run WITHOUT the kernel sandbox: %s; commands that run scripts or "
            "use the network will ask for approval first",
            check.summary,
        )
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
        from bot.security.net_addresses import Allowlist

        return Allowlist(config.allowed_hosts)

    def verdict_for(ctx: ToolContext, command: str) -> LineVerdict:
        from bot.security.shell_risk import examine  # loaded on the first shell call

        return examine(
            command,
            guard=guard,
            allowlist=config.shell_allowlist,
            cwd=ctx.workspace,
            sandboxed=find() is not None,
            hosts=hosts(),
        )

    def assess(ctx: ToolContext, command: str, timeout_s: int | None = None) -> Assessment:
        return verdict_for(ctx, command).assessment

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
        argv = [SHELL, "-c", command]
        sandbox = find()
        if sandbox is not None:
            env["TMPDIR"] = "/tmp"  # the host's may not be mounted; the sandbox's is empty
            await asyncio.to_thread(ctx.workspace.mkdir, parents=True, exist_ok=True)
            argv = sandbox.command(argv, cwd=ctx.workspace, network=network)
        outcome = await run_command(
            argv,
            cwd=ctx.workspace,
            env=env,
            limit_s=limit,
            max_bytes=config.shell_max_output_bytes,
            via=sandbox.via if sandbox is not None else None,
        )
        text = outcome.render()
        if outcome.timed_out:
            stopped = f"the command did not finish within {limit:g} s and was stopped"
            return ToolResult.failure(f"{stopped}, with every process it started", text)
        return ToolResult.success(text)

    return [shell]


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
    from bot.security.shell_lexer import ShellSyntaxError, shape

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
