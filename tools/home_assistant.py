"""Home Assistant tools: read entity states and call services over its REST API.

``ha_states`` reads; ``ha_call_service`` changes things, and only for entities
in ``[home_assistant] allow`` (entity ids such as ``switch.porch`` or whole
domains such as ``light``). An empty allow list lets the agent read every
entity and control none; a non-empty one limits reading to the same entities.
A service must belong to its entity's own domain (``light.turn_on`` for
``light.kitchen``), so an allowed entity cannot carry a call to an unrelated
service such as ``homeassistant.restart``.

The URL is the owner's own server, so it is reached directly, on a private
address too: the web tools' network guard is for addresses the model picks.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

import httpx
from pydantic import Field

from bot.config import LoadedConfig
from bot.config.hardware import HomeAssistantConfig
from bot.core.errors import Refused, ToolError
from bot.core.tls import shared_ssl_context
from bot.core.tool_api import Assessment, Tool, ToolContext, tool
from bot.security.kit import SecurityKit

MAX_LISTED = 50
MAX_ATTRIBUTES = 40
MAX_VALUE_CHARS = 300
_NAME = re.compile(r"^[a-z0-9_]+$")
_ENTITY = re.compile(r"^[a-z0-9_]+\.[a-z0-9_]+$")
# Keys that would point a call at other entities than the checked one.
_TARGET_KEYS = frozenset({"entity_id", "device_id", "area_id", "floor_id", "label_id", "target"})

State = dict[str, Any]
"""A state object as Home Assistant sends it (entity_id, state, attributes, ...)."""


def build(loaded: LoadedConfig, security: SecurityKit) -> list[Tool]:
    """``ha_states`` and ``ha_call_service``, or nothing when no Home Assistant URL is set."""
    config = loaded.config.home_assistant
    if not config.url or config.token is None:
        return []
    allow = Allowlist(config.allow)
    client = HomeAssistant(config)
    tool_timeout_s = config.timeout_s * 3 + 5  # a service call makes two requests

    def assess_call(
        ctx: ToolContext,
        domain: str,
        service: str,
        entity_id: str,
        data: dict[str, Any] | None,
    ) -> Assessment:
        domain, service, target = allow.check_call(domain, service, entity_id, data)
        return Assessment("medium", f"{domain}.{service} on {target} in Home Assistant")

    @tool(untrusted_output=True, timeout_s=tool_timeout_s)
    async def ha_states(
        ctx: ToolContext,
        entity_id: Annotated[
            str | None, Field(description="one entity, e.g. 'sensor.outdoor_temperature'")
        ] = None,
        domain: Annotated[
            str | None, Field(description="only this kind of entity, e.g. 'light' or 'sensor'")
        ] = None,
        search: Annotated[
            str | None, Field(description="words to find in entity ids and names")
        ] = None,
    ) -> str:
        """Read Home Assistant: one entity's state and attributes, or a list of entities.

        Without entity_id, lists entity ids with their state and name (filter with
        domain and search). Use it to find the exact entity_id before ha_call_service.
        """
        if entity_id:
            target = checked(entity_id, "entity id")
            if not allow.readable(target):
                raise Refused(f"{target} is not among the Home Assistant entities PinClaw may use")
            state = await client.request("GET", f"/api/states/{target}", entity_id=target)
            return describe_entity(_as_state(state, client.url), control=allow.covers(target))
        kind = checked(domain, "domain") if domain else None
        states = await client.request("GET", "/api/states")
        if not isinstance(states, list):
            raise client.unreadable()
        shown = [s for s in states if isinstance(s, dict) and allow.readable(_id(s))]
        return describe_list(shown, kind, (search or "").strip(), limited=bool(allow))

    @tool(
        risk="medium",
        effect="actuate",
        untrusted_output=True,
        assess=assess_call,
        approval_fields=("domain", "service", "entity_id"),
        timeout_s=tool_timeout_s,
    )
    async def ha_call_service(
        ctx: ToolContext,
        domain: Annotated[str, Field(description="the service's domain, e.g. 'light'")],
        service: Annotated[str, Field(description="the service, e.g. 'turn_on' or 'toggle'")],
        entity_id: Annotated[str, Field(description="the entity to act on, e.g. 'light.porch'")],
        data: Annotated[
            dict[str, Any] | None,
            Field(description='extra service data, e.g. {"brightness_pct": 40}'),
        ] = None,
    ) -> str:
        """Call a Home Assistant service on one entity: switch lights, covers, scenes...

        The service belongs to the entity's domain: light.turn_on for light.porch,
        cover.open_cover for cover.garage. Returns what changed.
        """
        domain, service, target = allow.check_call(domain, service, entity_id, data)
        before = _as_state(
            await client.request("GET", f"/api/states/{target}", entity_id=target), client.url
        )
        body = {**(data or {}), "entity_id": target}
        changed = await client.request("POST", f"/api/services/{domain}/{service}", body=body)
        if not isinstance(changed, list):
            raise client.unreadable()
        return describe_change(f"{domain}.{service}", before, changed, data or {}, allow)

    return [ha_states, ha_call_service]


def checked(value: str, what: str) -> str:
    """A domain, service or entity id (``what``), tidied; ``ToolError`` unless well formed."""
    text = value.strip().lower()
    if not (_ENTITY if what == "entity id" else _NAME).match(text):
        hint = "it looks like 'light.kitchen'" if what == "entity id" else "use a-z, 0-9 and _"
        raise ToolError(f"{value!r} is not a Home Assistant {what}: {hint}")
    return text


class Allowlist:
    """The owner's ``allow`` entries: entity ids and whole domains."""

    def __init__(self, entries: list[str]) -> None:
        cleaned = {e.strip().lower() for e in entries if e.strip()}
        self.entities = {e for e in cleaned if "." in e}
        self.domains = {e for e in cleaned if "." not in e}

    def __bool__(self) -> bool:
        return bool(self.entities or self.domains)

    def covers(self, entity_id: str) -> bool:
        """Whether the entity may be controlled."""
        return entity_id in self.entities or entity_id.split(".", 1)[0] in self.domains

    def readable(self, entity_id: str) -> bool:
        """Whether the entity may be read: everything while the allow list is empty."""
        return not self or self.covers(entity_id)

    def check_call(
        self, domain: str, service: str, entity_id: str, data: dict[str, Any] | None
    ) -> tuple[str, str, str]:
        """Domain, service and target, tidied; ``Refused`` when the call may not run."""
        domain, service = checked(domain, "domain"), checked(service, "service")
        target = checked(entity_id, "entity id")
        if not self:
            raise Refused(
                "controlling Home Assistant is not enabled: the owner has not allowed any "
                "entity yet, so only reading (ha_states) is possible"
            )
        if not self.covers(target):
            raise Refused(f"{target} is not among the Home Assistant entities PinClaw may control")
        if domain != (own := target.split(".", 1)[0]):
            raise Refused(
                f"{domain}.{service} is not a service of {target}'s domain; "
                f"call a {own} service such as {own}.turn_on"
            )
        retarget = sorted(_TARGET_KEYS & set(data or {}))
        if retarget:
            raise ToolError(
                f"data may not contain {', '.join(retarget)}: the target is entity_id alone"
            )
        return domain, service, target


class HomeAssistant:
    """One REST exchange at a time, every failure mapped to a ``ToolError`` the model reads."""

    def __init__(self, config: HomeAssistantConfig) -> None:
        assert config.token is not None
        self.url = config.url
        self._token = config.token
        self._timeout_s = config.timeout_s

    async def request(
        self, method: str, path: str, *, body: Any = None, entity_id: str | None = None
    ) -> Any:
        """Send one request and return the decoded JSON answer."""
        headers = {"Authorization": f"Bearer {self._token.get_secret_value()}"}
        try:
            async with httpx.AsyncClient(
                base_url=self.url,
                headers=headers,
                timeout=self._timeout_s,
                verify=shared_ssl_context(),
            ) as http:
                response = await http.request(method, path, json=body)
        except httpx.TimeoutException:
            raise ToolError(
                f"Home Assistant at {self.url} did not answer within {self._timeout_s:g} s"
            ) from None
        except httpx.ConnectError:
            raise ToolError(
                f"cannot reach Home Assistant at {self.url}: the connection failed (is it "
                "running, is the address right, and for https is its certificate trusted?)"
            ) from None
        except httpx.HTTPError:
            raise ToolError(
                f"cannot reach Home Assistant at {self.url}: the connection broke off"
            ) from None
        if response.status_code >= 300:
            raise self._status_error(response, method, path, entity_id)
        try:
            return response.json()
        except ValueError:
            raise self.unreadable() from None

    def unreadable(self) -> ToolError:
        """The error for an answer that is not Home Assistant's JSON."""
        return ToolError(
            f"{self.url} answered with something that is not Home Assistant's JSON; "
            "is the url the Home Assistant server itself?"
        )

    def _status_error(
        self, response: httpx.Response, method: str, path: str, entity_id: str | None
    ) -> ToolError:
        status, message = response.status_code, _message(response)
        if status == 401:
            return ToolError(
                "Home Assistant rejected the token (HTTP 401); create a long-lived access "
                "token in your Home Assistant profile and set it as [home_assistant] token"
            )
        if status == 403:
            return ToolError("Home Assistant does not let this token's user do that (HTTP 403)")
        if status == 404 and entity_id:
            return ToolError(f"no entity {entity_id} in Home Assistant")
        if status == 400 and path.startswith("/api/services/"):
            service = path.removeprefix("/api/services/").replace("/", ".")
            return ToolError(
                f"Home Assistant refused {service} (HTTP 400: {message}); the service may not "
                "exist, or the data does not fit it"
            )
        if status >= 500:
            return ToolError(f"Home Assistant failed (HTTP {status}: {message}); try again later")
        return ToolError(f"Home Assistant answered {method} {path} with HTTP {status}: {message}")


def _message(response: httpx.Response) -> str:
    """HA's ``{"message": ...}``, or its short plain-text reason, kept short."""
    text = response.text.strip()
    try:
        decoded = json.loads(text)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and isinstance(decoded.get("message"), str):
        text = decoded["message"]
    text = re.sub(rf"^{response.status_code}:\s*", "", " ".join(text.split()))
    if not text or text.startswith("<"):
        text = response.reason_phrase
    return _short(text, 200)


def _as_state(value: Any, url: str) -> State:
    if not isinstance(value, dict) or not isinstance(value.get("entity_id"), str):
        raise ToolError(f"{url} answered with a state Home Assistant would not send")
    return value


def _id(state: State) -> str:
    return str(state.get("entity_id", ""))


def _attributes(state: State) -> dict[str, Any]:
    attributes = state.get("attributes")
    return attributes if isinstance(attributes, dict) else {}


def _short(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return _short(text)


def _line(state: State) -> str:
    """``sensor.temp: 21.5 °C (Living room)``: one entity in a list."""
    attributes = _attributes(state)
    unit = attributes.get("unit_of_measurement")
    text = f"{_id(state)}: {_short(str(state.get('state', '')), 80)}"
    text += f" {_short(str(unit), 20)}" if unit else ""
    label = attributes.get("friendly_name")
    return text + (f" ({_short(str(label), 80)})" if label else "")


def describe_list(states: list[State], kind: str | None, search: str, limited: bool) -> str:
    """Matching entities, one per line, at most ``MAX_LISTED`` of them."""
    words = search.lower().split()
    found = []
    for state in sorted(states, key=_id):
        if kind and not _id(state).startswith(kind + "."):
            continue
        haystack = f"{_id(state)} {_attributes(state).get('friendly_name', '')}".lower()
        if all(word in haystack for word in words):
            found.append(state)
    filters = [f"domain {kind}"] * bool(kind) + [f"search {search!r}"] * bool(search)
    where = f" matching {' and '.join(filters)}" if filters else ""
    scope = " (only the entities PinClaw may use are shown)" if limited else ""
    if not found:
        return f"No Home Assistant entities{where}{scope}."
    lines = [f"{len(found)} Home Assistant entities{where}{scope}:"]
    lines += [_line(s) for s in found[:MAX_LISTED]]
    if len(found) > MAX_LISTED:
        lines.append(f"… and {len(found) - MAX_LISTED} more; narrow with domain or search")
    return "\n".join(lines)


def describe_entity(state: State, *, control: bool) -> str:
    """One entity: state, when it changed, whether it may be controlled, its attributes."""
    lines = [f"{_id(state)}: {_short(str(state.get('state', '')))}"]
    if state.get("last_changed"):
        lines.append(f"last changed: {state['last_changed']}")
    lines.append("control: " + ("allowed (ha_call_service)" if control else "not allowed"))
    attributes = list(_attributes(state).items())
    if attributes:
        lines.append("attributes:")
        lines += [f"  {key}: {_value(value)}" for key, value in attributes[:MAX_ATTRIBUTES]]
        if len(attributes) > MAX_ATTRIBUTES:
            lines.append(f"  … and {len(attributes) - MAX_ATTRIBUTES} more")
    return "\n".join(lines)


def describe_change(
    service: str, before: State, changed: list[Any], data: dict[str, Any], allow: Allowlist
) -> str:
    """One sentence: which entities changed state (Home Assistant lists them)."""
    target = _id(before)
    states = [s for s in changed if isinstance(s, dict)]
    shown = [s for s in states if allow.covers(_id(s))]
    if not shown:
        was = _short(str(before.get("state", "")), 80)
        return (
            f"Called {service} for {target}; no state changed ({target} is {was}; "
            "it may already have been in that state)."
        )
    parts = []
    for state in shown:
        attributes = _attributes(state)
        details = [f"{k} {_value(attributes[k])}" for k in data if k in attributes]
        part = f"{_id(state)} is now {_short(str(state.get('state', '')), 80)}"
        parts.append(part + (f" ({', '.join(details)})" if details else ""))
    others = len(states) - len(shown)
    tail = f" ({others} other entities changed too)" if others else ""
    return f"Called {service} for {target}: {'; '.join(parts)}{tail}."
