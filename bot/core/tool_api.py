"""The tool API: a tool is a typed async function plus a little metadata.

Write a tool as ``async def name(ctx: ToolContext, param: Type = default) -> str``
and decorate it with ``@tool(...)``. The docstring is the description the model
reads; ``Annotated[Type, Field(description=...)]`` describes a parameter. The
JSON schema is derived from the signature through pydantic, never written by
hand, and the same model validates the model's arguments with safe coercion.

A tool signals an ordinary failure by raising ``ToolError``; the registry turns
it, a timeout, or a bug into a ``ToolResult`` the model can read.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from bot.core.conversation import ToolCall, ToolSpec
from bot.core.errors import ToolError
from bot.core.messages import OutboundFile, SessionKey
from bot.core.taint import Taint
from bot.core.tool_schema import plain_schema

Risk = Literal["low", "medium", "high"]
Effect = Literal["read", "write", "shell", "network", "actuate"]
"""What a tool does to the world; ``readonly`` autonomy allows only reads."""

RISK_ORDER: dict[Risk, int] = {"low": 0, "medium": 1, "high": 2}


@dataclass(frozen=True, slots=True)
class Assessment:
    """How risky one particular call is, and why.

    ``forbidden`` marks a call refused at every autonomy level (a forbidden path,
    a private address): no approval can let it through.
    """

    risk: Risk
    reason: str = ""
    forbidden: bool = False
    acts: bool | None = None
    """Whether the call changes anything (None: judged by the tool's effect and the risk)."""

    def at_least(self, risk: Risk, reason: str) -> Assessment:
        """This assessment raised to ``risk`` (keeping the higher one and its reason)."""
        if RISK_ORDER[risk] <= RISK_ORDER[self.risk]:
            return self
        return Assessment(risk, reason, self.forbidden, self.acts)


AssessFunction = Callable[..., "Assessment"]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call produced: success flag, output, and an error for the model."""

    ok: bool
    output: str = ""
    error: str | None = None

    @classmethod
    def success(cls, output: str) -> ToolResult:
        """A successful result."""
        return cls(ok=True, output=output)

    @classmethod
    def failure(cls, error: str, output: str = "") -> ToolResult:
        """A failed result; ``error`` is written for the model."""
        return cls(ok=False, output=output, error=error)

    def for_model(self) -> str:
        """The text the model sees for this result."""
        if self.ok:
            return self.output
        return f"Error: {self.error}" + (f"\n{self.output}" if self.output else "")


def _utc_now() -> datetime:
    return datetime.now(UTC)


SendFile = Callable[[OutboundFile], Awaitable[None]]
"""Delivers a file to a chat; raises ``DeliveryError`` saying why when it cannot."""

FileOutlet = Callable[[SessionKey], SendFile | None]
"""How a turn finds its chat's ``SendFile``: None when the chat cannot take files."""

CallState = Literal["waiting", "running", "done"]
"""Where a call stands: waiting for a person's approval, running, or done (run or not)."""

CallHook = Callable[[ToolCall, CallState], None]
"""Told as a call moves on (the agent's progress line follows it)."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Everything a call may use, passed explicitly: no tool keeps "the current chat".

    ``depth`` counts delegations: a sub-agent's tools run at depth 1 and so on.
    ``inbound_id`` is the stored message the turn answers (None outside the daemon).
    ``send_file`` delivers a file to the turn's chat; None where no chat can take one
    (``pinclaw agent -m``, a job whose reply goes to no chat, a delegated task).
    """

    session: SessionKey
    workspace: Path
    timezone: ZoneInfo
    origin: str = "chat"
    sender_id: str = ""
    now: Callable[[], datetime] = field(default=_utc_now)
    depth: int = 0
    sender_name: str = ""
    is_direct: bool = True
    inbound_id: int | None = None
    send_file: SendFile | None = None
    taint: Taint = field(default_factory=Taint)
    """What the turn has read from the outside world (shared by the turn's calls)."""
    on_call: CallHook | None = None
    """Told when a call starts to wait for approval, starts to run, and is done."""


ToolFunction = Callable[..., Awaitable[Any]]

TaintFunction = Callable[[ToolContext, BaseModel], str]
"""What outside content a call brought into the turn: a label ("example.org"), "" for none."""

CheckFunction = Callable[[ToolContext, BaseModel], Awaitable[None]]
"""A check that needs I/O, before anyone is asked: raises ``ToolError`` to refuse the call."""


class Tool:
    """A named tool: description, risk, argument model and the function that runs it."""

    def __init__(
        self,
        func: ToolFunction,
        *,
        name: str | None = None,
        description: str | None = None,
        risk: Risk = "low",
        effect: Effect = "read",
        untrusted_output: bool = False,
        assess: AssessFunction | None = None,
        timeout_s: float | None = None,
        approval_fields: tuple[str, ...] | None = None,
        approval_key: Callable[[BaseModel], str] | None = None,
        taints: TaintFunction | None = None,
        check: CheckFunction | None = None,
    ) -> None:
        self.approval_fields = approval_fields
        self.taints = taints
        self.check = check
        self.approval_key = approval_key
        self.func = func
        self.name = name or func.__name__
        self.description = description or inspect.cleandoc(func.__doc__ or "").strip()
        if not self.description:
            raise ValueError(f"tool {self.name} needs a description (its docstring)")
        self.risk: Risk = risk
        self.effect: Effect = effect
        self.untrusted_output = untrusted_output
        self._assess = assess
        self.timeout_s = timeout_s
        self._parameters = _parameters(func, self.name)
        # Plain parameters (bot.core.tool_schema): the schema is written here and the model
        # is made when a call is first validated. Any other kind, or a name the model has
        # already, makes the model now, so its errors and warnings come where they always did.
        self._plain = plain_schema(self._parameters)
        if any(hasattr(_Arguments, name) for name, _, _ in self._parameters):
            self._plain = None
        self._model: type[BaseModel] | None = None
        if self._plain is None:
            self._model = _arguments_model(self._parameters, self.name)
        self._containers: frozenset[str] | None = None
        self._spec: ToolSpec | None = None

    @property
    def arguments_model(self) -> type[BaseModel]:
        """The pydantic model of the arguments (see ``__init__`` for when it is made)."""
        if self._model is None:
            self._model = _arguments_model(self._parameters, self.name)
        return self._model

    @arguments_model.setter
    def arguments_model(self, model: type[BaseModel]) -> None:
        self._model = model

    @property
    def _container_fields(self) -> frozenset[str]:
        if self._containers is None:
            self._containers = _container_fields(self.arguments_model)
        return self._containers

    @_container_fields.setter
    def _container_fields(self, names: frozenset[str]) -> None:
        self._containers = names

    def spec(self) -> ToolSpec:
        """The name, description and JSON schema shown to the model."""
        if self._spec is None:
            schema = self._plain
            if schema is None:
                schema = _strip_titles(self.arguments_model.model_json_schema())
            self._spec = ToolSpec(self.name, self.description, schema)
        return self._spec

    def validate(self, arguments: Mapping[str, Any]) -> BaseModel:
        """Coerce and validate the model's arguments; raise ``ToolError`` saying what to fix."""
        prepared = self._prepare(arguments)
        try:
            return self.arguments_model.model_validate(prepared)
        except ValidationError as exc:
            raise ToolError(self._explain(exc)) from None

    def assess(self, ctx: ToolContext, values: BaseModel) -> Assessment:
        """The risk of this particular call: the tool's own rating unless it assesses calls.

        An ``assess`` function gets the validated arguments as keywords and may
        raise ``ToolError`` (e.g. a path outside the workspace): the call is then
        refused with that message.
        """
        if self._assess is None:
            return Assessment(self.risk)
        assessment: Assessment = self._assess(ctx, **_kwargs(values))
        return assessment

    async def invoke(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> ToolResult:
        """Validate ``arguments`` and run the tool (errors propagate to the registry)."""
        return await self.run(ctx, self.validate(arguments))

    async def run(self, ctx: ToolContext, values: BaseModel) -> ToolResult:
        """Run the tool with already validated arguments."""
        result = await self.func(ctx, **_kwargs(values))
        if isinstance(result, ToolResult):
            return result
        if isinstance(result, str):
            return ToolResult.success(result)
        return ToolResult.success(json.dumps(result, ensure_ascii=False, default=str))

    def _prepare(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        fields = self.arguments_model.model_fields
        prepared: dict[str, Any] = {}
        for key, value in arguments.items():
            info = fields.get(key)
            if info is not None and value is None and not info.is_required():
                continue  # a model sending null for an optional parameter means "default"
            is_encoded = key in self._container_fields and isinstance(value, str)
            prepared[key] = _maybe_json(value) if is_encoded else value
        return prepared

    def _explain(self, exc: ValidationError) -> str:
        problems = []
        for error in exc.errors()[:5]:
            where = ".".join(str(p) for p in error["loc"]) or "arguments"
            if error["type"] == "missing":
                problems.append(f"'{where}' is required")
            elif error["type"] == "extra_forbidden":
                problems.append(f"'{where}' is not a parameter of this tool")
            else:
                problems.append(f"'{where}': {error['msg']}")
        params = ", ".join(self.arguments_model.model_fields) or "none"
        return (
            f"invalid arguments for {self.name}: {'; '.join(problems)}. "
            f"Parameters: {params}. Correct the arguments and call the tool again."
        )


def tool(
    name: str | None = None,
    *,
    risk: Risk = "low",
    effect: Effect = "read",
    untrusted_output: bool = False,
    assess: AssessFunction | None = None,
    timeout_s: float | None = None,
    description: str | None = None,
    approval_fields: tuple[str, ...] | None = None,
    approval_key: Callable[[BaseModel], str] | None = None,
    taints: TaintFunction | None = None,
    check: CheckFunction | None = None,
) -> Callable[[ToolFunction], Tool]:
    """Decorator: turn a typed async function into a ``Tool``.

    ``risk`` is the tool's usual risk; ``assess(ctx, **arguments)`` may rate each
    call instead (a shell command line, a path). ``effect`` says what it does to
    the world; ``untrusted_output`` marks output that may contain someone else's
    instructions (web pages, files, command output). ``approval_fields`` name the
    arguments an "always allow" rule is narrowed to (default: all of them), and
    ``approval_key(values)`` may give the rule's exact text instead (the shell
    tool's is the command's tokens, so only the same argv shape matches).
    ``taints(ctx, values)`` names the outside content a call brought into the
    turn ("example.org"), after which calls with side effects ask first.
    ``check(ctx, values)`` is awaited before the policy decides or anyone is asked,
    and refuses the call by raising ``ToolError`` (a recipient nobody knows).
    """

    def wrap(func: ToolFunction) -> Tool:
        return Tool(
            func,
            name=name,
            description=description,
            risk=risk,
            effect=effect,
            untrusted_output=untrusted_output,
            assess=assess,
            timeout_s=timeout_s,
            approval_fields=approval_fields,
            approval_key=approval_key,
            taints=taints,
            check=check,
        )

    return wrap


def _kwargs(values: BaseModel) -> dict[str, Any]:
    return {name: getattr(values, name) for name in type(values).model_fields}


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)


Parameter = tuple[str, Any, Any]
"""A tool parameter: its name, its annotation (``Annotated`` extras kept), its default
(``...`` when it has none)."""


def _parameters(func: ToolFunction, name: str) -> tuple[Parameter, ...]:
    if not inspect.iscoroutinefunction(func):
        raise TypeError(f"tool {name} must be an async function")
    hints = typing.get_type_hints(func, include_extras=True)
    params = list(inspect.signature(func).parameters.values())
    if not params or params[0].name != "ctx":
        raise TypeError(f"tool {name}: the first parameter must be 'ctx: ToolContext'")
    found: list[Parameter] = []
    for param in params[1:]:
        if param.name not in hints:
            raise TypeError(f"tool {name}: parameter '{param.name}' needs a type annotation")
        default = ... if param.default is inspect.Parameter.empty else param.default
        found.append((param.name, hints[param.name], default))
    return tuple(found)


def _arguments_model(parameters: tuple[Parameter, ...], name: str) -> type[BaseModel]:
    fields: dict[str, Any] = {key: (kind, default) for key, kind, default in parameters}
    model: type[BaseModel] = create_model(f"{name}_arguments", __base__=_Arguments, **fields)
    return model


def _container_fields(model: type[BaseModel]) -> frozenset[str]:
    """Fields whose type is a list, dict or model: a JSON string for them is decoded first."""
    names = set()
    for field_name, info in model.model_fields.items():
        annotation = info.annotation
        candidates = (annotation, *typing.get_args(annotation))
        for candidate in candidates:
            origin = typing.get_origin(candidate) or candidate
            if origin in (list, dict, tuple, set) or (
                isinstance(origin, type) and issubclass(origin, BaseModel)
            ):
                names.add(field_name)
    return frozenset(names)


def _maybe_json(value: str) -> Any:
    text = value.strip()
    if text[:1] in ("[", "{"):
        try:
            return json.loads(text)
        except ValueError:
            return value
    return value


def _strip_titles(schema: Any) -> Any:
    """Drop pydantic's generated ``title`` keys (noise for the model, bytes on every request)."""
    if isinstance(schema, dict):
        return {
            k: (_strip_titles_in_properties(v) if k == "properties" else _strip_titles(v))
            for k, v in schema.items()
            if k != "title"
        }
    if isinstance(schema, list):
        return [_strip_titles(item) for item in schema]
    return schema


def _strip_titles_in_properties(properties: Any) -> Any:
    # Inside "properties" the keys are parameter names; a parameter may be called "title".
    if isinstance(properties, dict):
        return {name: _strip_titles(sub) for name, sub in properties.items()}
    return properties
