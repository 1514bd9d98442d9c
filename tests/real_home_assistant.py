"""A real Home Assistant core for tests, started on 127.0.0.1 in a fresh config folder.

Home Assistant 2024.3.3 (the newest release for Python 3.11) is installed once into a
cached virtual environment, ``~/.cache/pinclaw-tests/homeassistant-2024.3.3`` or
``$PINCLAW_HA_VENV``: the core with ``josepy<2`` (josepy 2 makes every HTTP request a
500), then the requirements of the integrations it always loads (``frontend``,
``backup``, ``recorder``... read from their manifests) and of the MFA modules, so it
starts with ``--skip-pip``. A file lock keeps two pytest processes from installing at
once; a marker file is written only after the whole install succeeded. A failed install
fails the test with the tail of pip's output.

``RealHomeAssistant`` writes ``configuration.yaml``, starts ``hass``, makes an owner
through the onboarding API and a long-lived token over the WebSocket API, flips
``input_boolean`` helpers through the REST API, and stops with SIGTERM (then SIGKILL).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest

from tests.browser import free_port

HA_VERSION = "2024.3.3"
PINS = (f"homeassistant=={HA_VERSION}", "josepy<2")
MARKER = ".pinclaw-installed"
INSTALL_TIMEOUT_S = 1800.0
START_TIMEOUT_S = 120.0
CLIENT_ID = "http://pinclaw.test/"

# Run with the venv's Python: the requirements of the integrations Home Assistant sets
# up for our configuration.yaml (its default integrations and what they depend on) and
# of the MFA modules, which the auth system imports at start.
REQUIREMENTS_SCRIPT = """
import json, pathlib, sys
import homeassistant
from homeassistant import bootstrap
from homeassistant.auth.mfa_modules import notify, totp
root = pathlib.Path(homeassistant.__file__).parent / "components"
todo = [*bootstrap.DEFAULT_INTEGRATIONS, *bootstrap.CORE_INTEGRATIONS, *sys.argv[1:]]
requirements = set(totp.REQUIREMENTS + notify.REQUIREMENTS)
for domain in todo:
    manifest = json.loads((root / domain / "manifest.json").read_text())
    requirements.update(manifest.get("requirements", []))
    todo += [d for d in manifest.get("dependencies", []) if d not in todo]
print(json.dumps(sorted(requirements)))
"""
DOMAINS: tuple[str, ...] = ("recorder", "logger", "system_log", "http", "api")
DOMAINS += ("websocket_api", "onboarding", "input_boolean", "input_number")


def venv_path() -> Path:
    """Where the Home Assistant virtual environment lives (``$PINCLAW_HA_VENV`` wins)."""
    if override := os.environ.get("PINCLAW_HA_VENV"):
        return Path(override)
    return Path.home() / ".cache" / "pinclaw-tests" / f"homeassistant-{HA_VERSION}"


def _python() -> str:
    if found := shutil.which("python3.11"):
        return found
    if sys.version_info[:2] in ((3, 11), (3, 12)):
        return sys.executable
    pytest.fail(f"Home Assistant {HA_VERSION} needs Python 3.11 or 3.12; neither was found")


def _run(command: list[str], log: Path) -> None:
    """Run an install step, its output appended to ``log``; fail the test on error."""
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        try:
            done = subprocess.run(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=INSTALL_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            done = None
    if done is None or done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        why = "took too long" if done is None else f"exited with {done.returncode}"
        pytest.fail(f"installing Home Assistant failed: {' '.join(command)} {why}\n{tail}")


def _requirements(python: Path) -> list[str]:
    """What the integrations and MFA modules need, read from the installed core."""
    listed = subprocess.run(
        [str(python), "-c", REQUIREMENTS_SCRIPT, *DOMAINS],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if listed.returncode != 0:
        pytest.fail(f"reading Home Assistant's requirements failed:\n{listed.stderr[-3000:]}")
    requirements: list[str] = json.loads(listed.stdout)
    return requirements


def ensure_installed() -> Path:
    """The ``hass`` command of the cached install, installing it first if needed."""
    venv = venv_path()
    hass = venv / "bin" / "hass"
    if (venv / MARKER).exists():
        return hass
    venv.parent.mkdir(parents=True, exist_ok=True)
    with (venv.parent / f"{venv.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another pytest process may be installing
        if (venv / MARKER).exists():
            return hass
        log = venv.parent / f"{venv.name}.install.log"
        log.write_text(f"installing Home Assistant {HA_VERSION} into {venv}\n")
        started = time.monotonic()
        pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
        _run([_python(), "-m", "venv", str(venv)], log)
        _run([*pip, "install", *PINS], log)
        requirements = _requirements(venv / "bin" / "python")
        _run([*pip, "install", *PINS, *requirements], log)
        seconds = time.monotonic() - started
        (venv / MARKER).write_text(
            json.dumps({"pins": PINS, "requirements": requirements, "seconds": round(seconds)})
        )
    return hass


def configuration(port: int, *, garage_initially_on: bool = False) -> str:
    """A minimal configuration.yaml: HTTP on 127.0.0.1, the APIs, two helpers."""
    initial = "\n    initial: true" if garage_initially_on else ""
    return f"""\
homeassistant:
  latitude: 52.37
  longitude: 4.89
  unit_system: metric
  time_zone: UTC
http:
  server_host: 127.0.0.1
  server_port: {port}
api:
websocket_api:
logger:
  default: warning
  logs:  # every WebSocket frame, so a failing test's log tail shows the conversation
    homeassistant.components.websocket_api: debug
input_boolean:
  garage_door:
    name: Garage door{initial}
input_number:
  greenhouse:
    name: Greenhouse
    min: -20
    max: 50
    step: 0.5
"""


class RealHomeAssistant:
    """One Home Assistant core in ``folder``; ``start`` it, then use ``url`` and ``token``."""

    def __init__(self, hass: Path, folder: Path) -> None:
        self.hass = hass
        self.folder = folder
        self.port = free_port()
        self.token = ""
        self.started_in_s = 0.0
        self.proc: asyncio.subprocess.Process | None = None
        folder.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        """The HTTP root, e.g. ``http://127.0.0.1:8123``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        """The WebSocket API."""
        return f"ws://127.0.0.1:{self.port}/api/websocket"

    def log_tail(self, lines: int = 60) -> str:
        """The end of Home Assistant's output."""
        path = self.folder / "hass-output.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    async def start(self, *, garage_initially_on: bool = False) -> None:
        """Start (or start again) and return once HA runs and a token works."""
        config = configuration(self.port, garage_initially_on=garage_initially_on)
        (self.folder / "configuration.yaml").write_text(config)
        began = time.monotonic()
        with (self.folder / "hass-output.log").open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                *(str(self.hass), "-c", str(self.folder), "--skip-pip", "--log-no-color"),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        async with httpx.AsyncClient(base_url=self.url, timeout=10) as client:
            await self._until(client, lambda r: r.status_code in (200, 401), "/api/")
            if not self.token:
                self.token = await self._onboard(client)
            auth = {"Authorization": f"Bearer {self.token}"}
            await self._until(
                client,
                lambda r: r.status_code == 200 and r.json().get("state") == "RUNNING",
                "/api/config",
                headers=auth,
            )
        self.started_in_s = time.monotonic() - began

    async def _until(self, client: httpx.AsyncClient, ok: Any, path: str, **kw: Any) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.returncode is not None:
                pytest.fail(f"Home Assistant exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                if ok(await client.get(path, **kw)):
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)
        pytest.fail(f"Home Assistant did not answer GET {path} in time:\n{self.log_tail()}")

    async def _onboard(self, client: httpx.AsyncClient) -> str:
        """The owner through onboarding, then a long-lived token over the WebSocket API."""
        owner = {"name": "Ada", "username": "ada", "password": "a-long-test-password"}
        owner |= {"client_id": CLIENT_ID, "language": "en"}
        user = await client.post("/api/onboarding/users", json=owner)
        assert user.status_code == 200, f"{user.status_code} {user.text}\n{self.log_tail()}"
        grant = {"grant_type": "authorization_code", "code": user.json()["auth_code"]}
        answer = await client.post("/auth/token", data={**grant, "client_id": CLIENT_ID})
        assert answer.status_code == 200, f"{answer.status_code} {answer.text}"
        access = str(answer.json()["access_token"])
        made = await self.ws_call(
            access,
            {"type": "auth/long_lived_access_token", "client_name": "pinclaw", "lifespan": 30},
        )
        assert made["success"], made
        return str(made["result"])

    async def ws_call(self, token: str, command: dict[str, Any]) -> dict[str, Any]:
        """One command over the WebSocket API after the auth handshake; its result frame."""
        async with aiohttp.ClientSession() as session, session.ws_connect(self.ws_url) as ws:
            hello = await ws.receive_json(timeout=10)
            assert hello["type"] == "auth_required", hello
            await ws.send_json({"type": "auth", "access_token": token})
            auth = await ws.receive_json(timeout=10)
            assert auth["type"] == "auth_ok", auth
            await ws.send_json({"id": 1, **command})
            result: dict[str, Any] = await ws.receive_json(timeout=10)
            return result

    async def set_boolean(self, entity_id: str, on: bool) -> None:
        """Turn an ``input_boolean`` on or off through the REST API."""
        service = "turn_on" if on else "turn_off"
        await self._rest("POST", f"/api/services/input_boolean/{service}", entity_id)

    async def state(self, entity_id: str) -> str:
        """An entity's state through the REST API."""
        return str((await self._rest("GET", f"/api/states/{entity_id}"))["state"])

    async def _rest(self, method: str, path: str, entity_id: str = "") -> Any:
        async with httpx.AsyncClient(base_url=self.url, timeout=10) as client:
            answer = await client.request(
                method,
                path,
                json={"entity_id": entity_id} if entity_id else None,
                headers={"Authorization": f"Bearer {self.token}"},
            )
        assert answer.status_code == 200, f"{method} {path}: {answer.status_code} {answer.text}"
        return answer.json()

    async def stop(self) -> None:
        """SIGTERM, and SIGKILL if it has not stopped in 30 s; idempotent."""
        proc, self.proc = self.proc, None
        if proc is None or proc.returncode is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
