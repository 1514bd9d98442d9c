"""The triggers' checks, from the config alone (no daemon needed): one line per
``[[triggers]]`` table, and one for Home Assistant's WebSocket API when a trigger
follows an entity.

Each trigger is checked as ``pinclaw run`` checks it at the start
(``bot.triggers.making.check_trigger``): one that could not work is a failure
naming its table. Then what it needs to be reached: a webhook's URL (a warning
when ``[web] listen`` is off, so nobody can call it, or on the loopback only, so
only this machine can), a GPIO input's pin, a sensor's quantity, a serial port.
For Home Assistant, a connection to ``/api/websocket`` and the ``auth`` handshake
with the token, within ``HA_TIMEOUT_S``: the API the triggers listen on, not the
REST API the tools use.
"""

from __future__ import annotations

import asyncio
import json
from functools import partial
from typing import Any

from bot.cli.doctor.findings import Finding, Probe
from bot.config import LoadedConfig
from bot.config.hardware import HomeAssistantConfig
from bot.config.web import WebConfig, is_loopback
from bot.core.errors import UserError
from bot.triggers.making import check_trigger
from bot.triggers.spec import Trigger, from_config

HA_TIMEOUT_S = 10.0
HA_CHECK = "home_assistant websocket"
TOKEN_FIX = (
    "make a long-lived access token in Home Assistant (your profile, Security tab) "
    "and set [home_assistant] token"
)


def trigger_probes(loaded: LoadedConfig, margin_s: float) -> list[Probe]:
    """A check per config trigger, and the WebSocket check when one follows an entity."""
    config = loaded.config
    triggers = [from_config(table) for table in config.triggers]
    probes = [
        Probe(f"trigger {t.name}", partial(trigger_check, loaded, index, t))
        for index, t in enumerate(triggers)
    ]
    if any(t.enabled and t.kind == "ha" for t in triggers) and config.home_assistant.url:
        check = partial(home_assistant, config.home_assistant)
        probes.append(Probe(HA_CHECK, check, HA_TIMEOUT_S + margin_s))
    return probes


async def trigger_check(loaded: LoadedConfig, index: int, trigger: Trigger) -> Finding:
    """Whether ``trigger`` could work with this config, and how it is reached."""
    check, config = f"trigger {trigger.name}", loaded.config
    try:
        check_trigger(trigger, config)
    except UserError as exc:
        return Finding(
            check, "fail", f"trigger {trigger.name}: {exc}",
            f"fix triggers[{index}] in {loaded.path}; `pinclaw run` refuses to start with it",
        )  # fmt: skip
    if not trigger.enabled:
        return Finding(check, "info", f"trigger {trigger.name}: disabled (enabled = false)")
    kind, what = trigger.kind, trigger.subject
    text = f"trigger {trigger.name}: "
    if kind == "webhook":
        return _webhook(check, text, trigger, config.web)
    hardware = config.hardware
    if kind == "gpio":
        device = hardware.gpio[what]
        when = trigger.when or "on"
        text += f"gpio:{what}, pin {device.pin}, an input; fires when it turns {when}"
    elif kind == "sensor":
        sensor = hardware.sensors[what.partition(".")[0]]
        text += f"{trigger.on} ({sensor.driver} at {sensor.address:#04x}), {trigger.when}"
    elif kind == "serial":
        text += f"serial:{what} ({hardware.serial[what].port}), lines matching /{trigger.pattern}/"
    else:
        text += f"ha:{what}, may be read under [home_assistant] allow"
    return Finding(check, "ok", text)


def _webhook(check: str, text: str, trigger: Trigger, web: WebConfig) -> Finding:
    """The hook's URL, or why nobody else can call it."""
    path = f"/hooks/{trigger.name}"
    where = web.address
    if where is None:
        return Finding(
            check, "warn",
            f'{text}POST {path}, but the HTTP endpoint is off ([web] listen = "off"), '
            "so nobody can call it",
            'set [web] listen (e.g. "127.0.0.1:8765" behind a reverse proxy)',
        )  # fmt: skip
    url = f"{web.url}{path}"
    if is_loopback(where[0]) and not web.behind_proxy:
        return Finding(
            check, "warn", f"{text}POST {url}, on the loopback: only this machine can call it",
            "to take calls from other devices, listen on a network address with [web] token "
            "and TLS, or put a reverse proxy in front ([web] behind_proxy = true)",
        )  # fmt: skip
    scheme = "https" if web.tls or web.behind_proxy else "http"
    return Finding(check, "ok", f"{text}POST {path} ({scheme}, listening on {web.listen})")


async def home_assistant(ha: HomeAssistantConfig, timeout_s: float = HA_TIMEOUT_S) -> Finding:
    """Connect to the WebSocket API and authenticate with the token, once."""
    import aiohttp

    from bot.triggers.sources.ha.connection import websocket_url

    url = websocket_url(ha.url)
    token = ha.token.get_secret_value() if ha.token else ""
    try:
        async with asyncio.timeout(timeout_s), aiohttp.ClientSession() as session:
            ssl: Any = True
            if url.startswith("wss://"):
                from bot.core.tls import shared_ssl_context

                ssl = shared_ssl_context()
            async with session.ws_connect(url, ssl=ssl, autoping=True) as ws:
                first = await _receive(ws)
                if first.get("type") != "auth_required":
                    return _fail(f"{url} does not speak Home Assistant's WebSocket API")
                await ws.send_json({"type": "auth", "access_token": token})
                answer = await _receive(ws)
    except TimeoutError:
        return _fail(f"no answer from {url} within {timeout_s:.0f} s", "check [home_assistant] url")
    except aiohttp.WSServerHandshakeError as exc:
        return _fail(
            f"{url} answered HTTP {exc.status}, not a WebSocket",
            "check [home_assistant] url, and that Home Assistant loads websocket_api "
            "(default_config does)",
        )
    except (aiohttp.ClientError, OSError) as exc:
        why = getattr(exc, "strerror", None) or type(exc).__name__
        return _fail(f"cannot reach {url} ({why})", "check [home_assistant] url and that HA runs")
    except ValueError:
        return _fail(f"{url} does not speak Home Assistant's WebSocket API")
    kind = answer.get("type")
    if kind == "auth_ok":
        version = answer.get("ha_version")
        named = f"Home Assistant {version}" if isinstance(version, str) else "Home Assistant"
        text = f"Home Assistant WebSocket: {named} at {url} accepts the token"
        return Finding(HA_CHECK, "ok", text)
    if kind == "auth_invalid":
        return _fail(f"Home Assistant at {url} refused the token", TOKEN_FIX)
    return _fail(f"{url} does not speak Home Assistant's WebSocket API")


async def _receive(ws: Any) -> dict[str, Any]:
    """The next JSON message; ``ValueError`` when the server closed or sent something else."""
    import aiohttp

    message = await ws.receive()
    if message.type != aiohttp.WSMsgType.TEXT:
        raise ValueError("not a text message")
    data = json.loads(message.data)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def _fail(text: str, fix: str = "") -> Finding:
    return Finding(HA_CHECK, "fail", f"Home Assistant WebSocket: {text}", fix)
