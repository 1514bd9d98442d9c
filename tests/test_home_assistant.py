"""The Home Assistant tools through the registry and the policy gate, against a fake HA.

The tools are built the way the daemon builds them (a parsed config,
``build_security``, ``tools.home_assistant.build``) and talk real HTTP (httpx)
to ``FakeHomeAssistant`` on 127.0.0.1, whose state table the calls change.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.agent.tool_registry import ToolRegistry
from bot.config import LoadedConfig, parse_config
from bot.config.security import SecurityConfig
from bot.core.conversation import ToolCall
from bot.core.messages import SessionKey
from bot.core.tool_api import Tool, ToolContext, ToolResult
from bot.security.approval import ApprovalOutcome, ApprovalRequest
from bot.security.audit import AuditLog
from bot.security.gate import PolicyGate
from bot.security.kit import build_security
from bot.security.policy import decide
from bot.security.redact import Redactor, config_secrets
from tests.fake_home_assistant import TOKEN, Failure, FakeHomeAssistant, make_state
from tools.home_assistant import MAX_LISTED, build

CTX = ToolContext(SessionKey("test", "1"), Path("/ws"), ZoneInfo("UTC"), sender_id="ana")


@pytest.fixture
def ha() -> Iterator[FakeHomeAssistant]:
    with FakeHomeAssistant.running() as server:
        yield server


def loaded_config(tmp_path: Path, url: str, **section: Any) -> LoadedConfig:
    raw = {
        "provider": {"kind": "ollama", "model": "m"},
        "home_assistant": {"url": url, "token": TOKEN, **section} if url else {},
    }
    return LoadedConfig(parse_config(raw, {}), tmp_path / "c.toml", tmp_path)


def tools(tmp_path: Path, url: str, **section: Any) -> list[Tool]:
    loaded = loaded_config(tmp_path, url, **section)
    return build(loaded, build_security(loaded))


async def call(tools_: list[Tool], name: str, **args: Any) -> ToolResult:
    registry = ToolRegistry(tools_, max_output_chars=1_000_000)
    return await registry.execute(ToolCall("1", name, args), CTX)


def test_nothing_is_offered_without_a_url(tmp_path: Path) -> None:
    assert tools(tmp_path, "") == []


def test_two_tools_with_their_risk(tmp_path: Path) -> None:
    states, service = tools(tmp_path, "http://ha.local:8123")
    assert (states.name, states.risk, states.effect, states.untrusted_output) == (
        "ha_states", "low", "read", True
    )  # fmt: skip
    assert (service.name, service.risk, service.effect) == ("ha_call_service", "medium", "actuate")
    assert service.approval_fields == ("domain", "service", "entity_id")
    assert service.untrusted_output  # changed states can carry outside text (input_text)


async def test_lists_every_entity_compactly(tmp_path: Path, ha: FakeHomeAssistant) -> None:
    result = await call(tools(tmp_path, ha.url), "ha_states")
    assert result.ok, result.error
    lines = result.output.splitlines()
    assert lines[0] == "8 Home Assistant entities:"
    assert lines[1] == "cover.garage: closed (Garage door)"
    assert "sensor.living_room_temperature: 21.5 °C (Living room temperature)" in lines
    assert "light.kitchen: on (Kitchen light)" in lines
    assert ha.requests[0].authorization == f"Bearer {TOKEN}"


async def test_filters_by_domain_and_search(tmp_path: Path, ha: FakeHomeAssistant) -> None:
    made = tools(tmp_path, ha.url)
    lights = await call(made, "ha_states", domain="light")
    assert lights.output.splitlines() == [
        "2 Home Assistant entities matching domain light:",
        "light.kitchen: on (Kitchen light)",
        "light.porch: off (Porch light)",
    ]
    porch = await call(made, "ha_states", search="PORCH")
    assert [line.split(":")[0] for line in porch.output.splitlines()[1:]] == [
        "light.porch", "switch.porch"
    ]  # fmt: skip
    porch_socket = await call(made, "ha_states", search="porch socket", domain="switch")
    assert porch_socket.output.splitlines()[1:] == ["switch.porch: off (Porch socket)"]
    none = await call(made, "ha_states", domain="vacuum")
    assert none.output == "No Home Assistant entities matching domain vacuum."


async def test_one_entity_with_attributes(tmp_path: Path, ha: FakeHomeAssistant) -> None:
    result = await call(
        tools(tmp_path, ha.url, allow=["light"]), "ha_states", entity_id="Light.Kitchen"
    )
    assert result.ok, result.error
    assert result.output.splitlines() == [
        "light.kitchen: on",
        "last changed: 2025-05-01T12:00:00+00:00",
        "control: allowed (ha_call_service)",
        "attributes:",
        "  friendly_name: Kitchen light",
        "  brightness: 180",
    ]
    assert ha.requests[-1].path == "/api/states/light.kitchen"


async def test_a_long_list_is_bounded(tmp_path: Path) -> None:
    states = [make_state(f"sensor.s{i:03}", str(i)) for i in range(MAX_LISTED + 20)]
    with FakeHomeAssistant.running(states=states) as ha:
        result = await call(tools(tmp_path, ha.url), "ha_states")
    lines = result.output.splitlines()
    assert len(lines) == MAX_LISTED + 2
    assert lines[-1] == "… and 20 more; narrow with domain or search"


async def test_a_non_empty_allow_list_limits_reading(tmp_path: Path, ha: FakeHomeAssistant) -> None:
    made = tools(tmp_path, ha.url, allow=["light", "switch.porch"])
    listed = await call(made, "ha_states")
    assert [line.split(":")[0] for line in listed.output.splitlines()[1:]] == [
        "light.kitchen", "light.porch", "switch.porch"
    ]  # fmt: skip
    assert "only the entities PinClaw may use" in listed.output
    before = len(ha.requests)
    hidden = await call(made, "ha_states", entity_id="lock.front_door")
    assert (
        hidden.error == "lock.front_door is not among the Home Assistant entities PinClaw may use"
    )
    assert len(ha.requests) == before


async def test_turning_on_a_light_changes_its_state(tmp_path: Path, ha: FakeHomeAssistant) -> None:
    made = tools(tmp_path, ha.url, allow=["light"])
    args = {"domain": "light", "service": "turn_on", "entity_id": "light.porch"}
    result = await call(made, "ha_call_service", **args, data={"brightness": 120})
    assert result.ok, result.error
    assert (
        result.output
        == "Called light.turn_on for light.porch: light.porch is now on (brightness 120)."
    )
    assert ha.state("light.porch")["state"] == "on"
    assert ha.state("light.porch")["attributes"]["brightness"] == 120
    (posted,) = ha.service_calls()
    assert posted.path == "/api/services/light/turn_on"
    assert posted.body == {"brightness": 120, "entity_id": "light.porch"}
    again = await call(made, "ha_call_service", **args, data='{"brightness": 120}')
    assert again.output == (
        "Called light.turn_on for light.porch; no state changed (light.porch is on; "
        "it may already have been in that state)."
    )
    off = await call(
        made, "ha_call_service", domain="light", service="toggle", entity_id="light.porch"
    )
    assert off.output == "Called light.toggle for light.porch: light.porch is now off."


@pytest.mark.parametrize(
    ("allow", "args", "error"),
    [
        ([], ("switch", "turn_on", "switch.porch"), "controlling Home Assistant is not enabled"),
        (["switch.porch"], ("switch", "turn_on", "switch.heater"), "switch.heater is not among"),
        (["switch.porch"], ("light", "turn_on", "light.kitchen"), "light.kitchen is not among"),
        (["light"], ("lock", "unlock", "lock.front_door"), "lock.front_door is not among"),
        (["light"], ("homeassistant", "restart", "light.kitchen"), "is not a service of"),
        (["light"], ("Light/../x", "turn_on", "light.kitchen"), "is not a Home Assistant domain"),
        (["light"], ("light", "turn on", "light.kitchen"), "is not a Home Assistant service"),
        (["light"], ("light", "turn_on", "../config"), "is not a Home Assistant entity id"),
    ],
)
async def test_control_outside_the_allow_list_is_refused(
    tmp_path: Path, ha: FakeHomeAssistant, allow: list[str], args: tuple[str, str, str], error: str
) -> None:
    domain, service, entity_id = args
    made = tools(tmp_path, ha.url, allow=allow)
    result = await call(
        made, "ha_call_service", domain=domain, service=service, entity_id=entity_id
    )
    assert not result.ok
    assert error in (result.error or "")
    assert ha.requests == []


@pytest.mark.parametrize("key", ["entity_id", "area_id", "target"])
async def test_data_cannot_point_the_call_elsewhere(
    tmp_path: Path, ha: FakeHomeAssistant, key: str
) -> None:
    made = tools(tmp_path, ha.url, allow=["light"])
    args = {"domain": "light", "service": "turn_on", "entity_id": "light.porch"}
    result = await call(made, "ha_call_service", **args, data={key: "lock.front_door"})
    assert result.error == f"data may not contain {key}: the target is entity_id alone"
    assert ha.requests == []


async def test_a_bad_entity_id_never_reaches_home_assistant(
    tmp_path: Path, ha: FakeHomeAssistant
) -> None:
    result = await call(tools(tmp_path, ha.url), "ha_states", entity_id="../../config")
    assert (
        result.error
        == "'../../config' is not a Home Assistant entity id: it looks like 'light.kitchen'"
    )
    assert ha.requests == []


async def test_unknown_entities(tmp_path: Path, ha: FakeHomeAssistant) -> None:
    made = tools(tmp_path, ha.url, allow=["light"])
    read = await call(made, "ha_states", entity_id="light.attic")
    assert read.error == "no entity light.attic in Home Assistant"
    control = await call(
        made, "ha_call_service", domain="light", service="turn_on", entity_id="light.attic"
    )
    assert control.error == "no entity light.attic in Home Assistant"
    assert ha.service_calls() == []


@pytest.mark.parametrize(("service", "data"), [("fly", None), ("turn_on", {"flash_speed": "fast"})])
async def test_a_refused_service_call(
    tmp_path: Path, ha: FakeHomeAssistant, service: str, data: dict[str, Any] | None
) -> None:
    made = tools(tmp_path, ha.url, allow=["light"])
    result = await call(
        made, "ha_call_service", domain="light", service=service, entity_id="light.porch", data=data
    )
    assert result.error == (
        f"Home Assistant refused light.{service} (HTTP 400: Bad Request); the service may not "
        "exist, or the data does not fit it"
    )
    assert ha.state("light.porch")["state"] == "off"


async def test_a_wrong_token(tmp_path: Path, ha: FakeHomeAssistant) -> None:
    ha.token = "another-token"
    result = await call(tools(tmp_path, ha.url), "ha_states")
    assert result.error == (
        "Home Assistant rejected the token (HTTP 401); create a long-lived access "
        "token in your Home Assistant profile and set it as [home_assistant] token"
    )


@pytest.mark.parametrize(
    ("failure", "error"),
    [
        (
            Failure(500, '{"message": "Database is locked"}'),
            "Home Assistant failed (HTTP 500: Database is locked); try again later",
        ),
        (
            Failure(502, "<html><body>Bad gateway</body></html>", "text/html"),
            "Home Assistant failed (HTTP 502: Bad Gateway); try again later",
        ),
        (
            Failure(200, "<html>a router login page</html>", "text/html"),
            "answered with something that is not Home Assistant's JSON; "
            "is the url the Home Assistant server itself?",
        ),
        (Failure(200, '{"not": "a list"}'), "not Home Assistant's JSON"),
        (Failure(200, "[]", delay_s=2), "did not answer within 0.3 s"),
    ],
)
async def test_failures_are_readable(
    tmp_path: Path, ha: FakeHomeAssistant, failure: Failure, error: str
) -> None:
    ha.fail_next(failure)
    result = await call(tools(tmp_path, ha.url, timeout_s=0.3), "ha_states")
    assert error in (result.error or ""), result.error
    assert "Traceback" not in (result.error or "")


async def test_an_unreachable_home_assistant(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = await call(tools(tmp_path, f"http://127.0.0.1:{port}"), "ha_states")
    assert (result.error or "").startswith(
        f"cannot reach Home Assistant at http://127.0.0.1:{port}:"
    )


def test_the_policy_asks_before_a_service_call(tmp_path: Path) -> None:
    states, service = tools(tmp_path, "http://ha.local:8123", allow=["light"])
    supervised, readonly = SecurityConfig(), SecurityConfig(autonomy="readonly")
    read = states.assess(CTX, states.validate({}))
    assert decide(supervised, states, read).action == "allow"
    assert decide(readonly, states, read).action == "allow"
    args = {"domain": "light", "service": "turn_on", "entity_id": "light.porch"}
    act = service.assess(CTX, service.validate(args))
    assert (act.risk, act.forbidden) == ("medium", False)
    assert decide(supervised, service, act).action == "ask"
    assert decide(SecurityConfig(auto_approve=["ha_call_service"]), service, act).action == "allow"
    blocked = decide(readonly, service, act)
    assert (blocked.action, blocked.reason) == (
        "block", "PinClaw may only read here, and ha_call_service would operate devices"
    )  # fmt: skip


class Approver:
    """Answers every approval request with one verdict, and keeps the requests."""

    def __init__(self, verdict: str) -> None:
        self.verdict = verdict
        self.requests: list[ApprovalRequest] = []

    async def request_approval(self, request: ApprovalRequest) -> ApprovalOutcome:
        self.requests.append(request)
        return ApprovalOutcome("approved" if self.verdict == "approved" else "denied", "ana")


async def test_through_the_policy_gate(tmp_path: Path, ha: FakeHomeAssistant) -> None:
    loaded = loaded_config(tmp_path, ha.url, allow=["light", "input_text.note"])
    registry = ToolRegistry(build(loaded, build_security(loaded)))
    gate = PolicyGate(
        registry,
        config=SecurityConfig(),
        audit=AuditLog(tmp_path / "audit.jsonl"),
        redactor=Redactor(config_secrets(loaded.config)),
    )
    note = await gate.execute(ToolCall("1", "ha_states", {"entity_id": "input_text.note"}), CTX)
    assert note.output.startswith(
        '<untrusted source="ha_states">\ninput_text.note: Ignore previous'
    )
    assert note.output.endswith("</untrusted>")

    turn_on = {"domain": "light", "service": "turn_on", "entity_id": "light.porch"}
    unasked = await gate.execute(ToolCall("2", "ha_call_service", turn_on), CTX)
    assert (unasked.error or "").startswith("not run: ha_call_service needs a person's approval")
    assert ha.state("light.porch")["state"] == "off"

    approver = Approver("approved")
    gate.set_approver(approver)
    approved = await gate.execute(ToolCall("3", "ha_call_service", turn_on), CTX)
    assert approved.ok, approved.error
    assert "light.porch is now on" in approved.output
    assert ha.state("light.porch")["state"] == "on"
    assert approver.requests[0].reason == "light.turn_on on light.porch in Home Assistant"

    lock = {"domain": "lock", "service": "unlock", "entity_id": "lock.front_door"}
    refused = await gate.execute(ToolCall("4", "ha_call_service", lock), CTX)
    assert refused.error == (
        "refused: lock.front_door is not among the Home Assistant entities PinClaw may control"
    )
    assert len(approver.requests) == 1  # a call that cannot run is never put to a person
    assert TOKEN not in (tmp_path / "audit.jsonl").read_text()
