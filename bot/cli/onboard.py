"""``pinclaw onboard``: a short first-run setup that writes a working config.

It asks for the provider (kind, model, key or local server URL), checks the
answers with one real completion, and writes the config readable only by its
owner. Every question has a flag, so scripted installs can run it with
``--non-interactive``.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import httpx

from bot.config import Config, key_env_name, parse_config
from bot.config.provider import DEFAULT_BASE_URLS
from bot.core.conversation import ChatMessage, CompletionRequest
from bot.core.errors import ConfigError, ProviderError, UserError
from bot.providers import build_provider

KINDS = ("openai", "anthropic", "gemini", "ollama")
DEFAULT_MODELS = {
    "openai": "gpt-4o-mini",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
    "ollama": "llama3.2",
}


@dataclass(frozen=True, slots=True)
class Answers:
    """What the config will say about the provider."""

    kind: str
    model: str
    base_url: str | None
    api_key: str | None  # a literal key or a "${ENV_VAR}" reference


@dataclass(frozen=True, slots=True)
class Flags:
    """Answers given on the command line (None: ask, or use the default)."""

    kind: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    interactive: bool = True
    force: bool = False
    check: bool = True


def onboard(path: Path, flags: Flags) -> int:
    """Run the setup; return the process exit code."""
    out = sys.stdout
    if path.exists() and not flags.force:
        out.write(f"A config already exists at {path}; keeping it (use --force to replace it).\n")
        out.write(shell_note(path))
        return 0
    answers = _ask(flags) if flags.interactive else _from_flags(flags)
    text = render_config(answers)
    config = parse_config(tomllib.loads(text), dict(os.environ), source="the new config")
    if flags.check:
        out.write(f"Checking {config.provider.label} at {config.provider.url} ...\n")
        try:
            seconds = asyncio.run(check_provider(config))
        except ProviderError as exc:
            out.write(f"The check failed: {exc}\n")
            if not (flags.interactive and _yes("Save the config anyway?", default=False)):
                out.write(
                    "Nothing was written. Fix the answer above and run `pinclaw onboard` again.\n"
                )
                return 1
        else:
            out.write(f"It answered in {seconds:.2f} s.\n")
    write_private(path, text)
    out.write(
        f"Wrote {path} (readable only by you).\nNext: `pinclaw chat` to talk to it; "
        "you are its owner. Once a chat channel runs, `pinclaw people link` connects "
        "your phone's account, so it remembers you there too.\n"
    )
    out.write(shell_note(path))
    return 0


def shell_note(path: Path) -> str:
    """A line on where shell commands will run; loud when there is no sandbox."""
    from bot.config import load_config
    from bot.security.kit import build_security
    from bot.security.shell.state import INSTALL_HINT
    from tools.shell import shell_state

    try:
        loaded = load_config(path)
        state = shell_state(loaded, build_security(loaded))
    except UserError:  # the config is checked where it is used; this is only a note
        return ""
    if state.sandboxed:
        return f"Note: {state.sentence()}.\n"
    return f"WARNING: {state.sentence()}.\nTo confine them, {INSTALL_HINT}\n"


async def check_provider(config: Config) -> float:
    """Ask the provider for one short completion; return how long it took."""
    started = time.monotonic()
    async with httpx.AsyncClient() as client:
        provider = build_provider(config.provider, client)
        request = CompletionRequest(
            system="", messages=(ChatMessage("user", "Reply with the word: ready"),), max_tokens=32
        )
        await provider.complete(request)
    return time.monotonic() - started


def render_config(answers: Answers) -> str:
    """The config file text for ``answers``, commented for a person."""
    lines = [
        "# PinClaw configuration, written by `pinclaw onboard`.",
        "# Every key is documented in pinclaw.example.toml.",
        "",
        "[provider]",
        f"kind = {_toml(answers.kind)}",
        f"model = {_toml(answers.model)}",
    ]
    if answers.base_url:
        lines.append(f"base_url = {_toml(answers.base_url)}")
    if answers.api_key:
        lines.append(f"api_key = {_toml(answers.api_key)}")
    return "\n".join(lines) + "\n"


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically with mode 0600 (folder 0700 if created)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".toml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _from_flags(flags: Flags) -> Answers:
    kind = flags.kind or "openai"
    if kind not in KINDS:
        raise ConfigError(f"--kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    return Answers(
        kind=kind,
        model=flags.model or DEFAULT_MODELS[kind],
        base_url=flags.base_url,
        api_key=_key_answer(kind, flags.base_url, flags.api_key, flags.api_key_env),
    )


def _key_answer(kind: str, base_url: str | None, key: str | None, env: str | None) -> str | None:
    if key:
        return key
    name = env or key_env_name(kind)
    if env or os.environ.get(name):
        return f"${{{name}}}"
    needs_key = kind in ("anthropic", "gemini") or (kind == "openai" and not base_url)
    if needs_key:
        raise UserError(
            f"{kind} needs an API key: pass --api-key KEY, or set {name} "
            "(or name another variable with --api-key-env)"
        )
    return None


def _ask(flags: Flags) -> Answers:
    out = sys.stdout
    out.write("Let's connect PinClaw to a model. Press Enter to take the value in brackets.\n")
    kind = flags.kind or _choose("Provider kind", KINDS, "openai")
    model = flags.model or _input("Model", DEFAULT_MODELS[kind])
    default_url = DEFAULT_BASE_URLS[kind]
    hint = " (or a local OpenAI-compatible server, e.g. http://localhost:8080/v1)"
    base_url = flags.base_url or _input(f"Base URL{hint if kind == 'openai' else ''}", default_url)
    base = None if base_url == default_url else base_url
    key = flags.api_key
    env_name = flags.api_key_env or key_env_name(kind)
    if key is None and flags.api_key_env is None:
        needs_key = kind in ("anthropic", "gemini") or (kind == "openai" and base is None)
        available = (
            f", Enter to use ${env_name} from the environment" if os.environ.get(env_name) else ""
        )
        optional = ", Enter for none" if not needs_key and not available else ""
        key = _secret(f"API key{available}{optional}") or None
        if key is None and not available and needs_key:
            raise UserError(f"{kind} needs an API key; run `pinclaw onboard` again with one")
    return Answers(kind, model, base, _key_answer(kind, base, key, flags.api_key_env))


def _choose(question: str, options: tuple[str, ...], default: str) -> str:
    while True:
        answer = _input(f"{question} ({' | '.join(options)})", default)
        if answer in options:
            return answer
        sys.stdout.write(f"Please answer one of: {', '.join(options)}\n")


def _input(question: str, default: str) -> str:
    try:
        answer = input(f"{question} [{default}]: ").strip()
    except EOFError:
        _end_prompt()
        raise UserError(
            "onboarding asks its questions on standard input, which ended before an answer: "
            "run it in a terminal, or pass the answers as flags with --non-interactive"
        ) from None
    return answer or default


def _secret(question: str) -> str:
    try:
        if sys.stdin.isatty():
            return getpass.getpass(f"{question}: ").strip()
        return input(f"{question}: ").strip()
    except EOFError:
        _end_prompt()
        return ""


def _yes(question: str, default: bool) -> bool:
    hint = "Y/n" if default else "y/N"
    try:
        answer = input(f"{question} [{hint}]: ").strip().lower()
    except EOFError:
        _end_prompt()
        return default
    return default if not answer else answer.startswith("y")


def _end_prompt() -> None:
    """End the question's line, which input ended without an answer, so what is said
    next (an error on stderr) starts a line of its own."""
    sys.stdout.write("\n")
    sys.stdout.flush()


def _toml(value: str) -> str:
    """A TOML basic string (JSON string escapes are valid TOML escapes)."""
    return json.dumps(value, ensure_ascii=False)
