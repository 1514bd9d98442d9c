"""The ``calculator`` tool: safe arithmetic on numbers, never ``eval``.

The expression is parsed with ``ast`` and only numbers, arithmetic operators,
parentheses and a short list of math functions are evaluated. Exponents and
integer sizes are bounded so ``9**9**9`` cannot stall the daemon.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Annotated

from pydantic import Field

from bot.config import LoadedConfig
from bot.core.errors import ToolError
from bot.core.tool_api import Tool, ToolContext, tool
from bot.security.kit import SecurityKit

Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_FUNCTIONS: dict[str, Callable[..., Number]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "floor": math.floor,
    "ceil": math.ceil,
    "factorial": math.factorial,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}
_MAX_EXPONENT = 10_000
_MAX_INT_DIGITS = 1_000
_MAX_LENGTH = 500


def evaluate(expression: str) -> Number:
    """Evaluate an arithmetic expression; raise ``ToolError`` on anything else."""
    text = expression.strip().replace("^", "**").replace("×", "*").replace("÷", "/")
    if not text:
        raise ToolError("the expression is empty")
    if len(text) > _MAX_LENGTH:
        raise ToolError(f"the expression is longer than {_MAX_LENGTH} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ToolError(f"{expression!r} is not an arithmetic expression") from None
    try:
        return _eval(tree.body)
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except OverflowError:
        raise ToolError("the result is too large") from None
    except (ValueError, TypeError) as exc:
        raise ToolError(f"math error: {exc}") from None


def _eval(node: ast.expr) -> Number:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if isinstance(node.value, bool):
            raise ToolError(f"unsupported element {node.value!r}: {_ALLOWED}")
        return node.value
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        return _check_size(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        func = _FUNCTIONS.get(node.func.id)
        if func is not None:
            args = [_eval(arg) for arg in node.args]
            if func is math.factorial and (not args or args[0] > 1000):
                raise ToolError("factorial is limited to numbers up to 1000")
            return _check_size(func(*args))
    raise ToolError(f"unsupported element {ast.unparse(node)!r}: {_ALLOWED}")


def _check_power(base: Number, exponent: Number) -> None:
    """Refuse powers whose result would be huge before computing them."""
    if abs(exponent) > _MAX_EXPONENT:
        raise ToolError(f"exponents above {_MAX_EXPONENT} are not supported")
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and exponent > 0
        and abs(base).bit_length() * exponent > 7 * _MAX_INT_DIGITS
    ):
        raise ToolError(f"the result has more than {_MAX_INT_DIGITS} digits")


def _check_size(value: Number) -> Number:
    """Refuse integers longer than the digit limit (cheap bit test first)."""
    if (
        isinstance(value, int)
        and value.bit_length() > 3 * _MAX_INT_DIGITS
        and (value.bit_length() > 4 * _MAX_INT_DIGITS or len(str(abs(value))) > _MAX_INT_DIGITS)
    ):
        raise ToolError(f"the result has more than {_MAX_INT_DIGITS} digits")
    return value


def format_number(value: Number) -> str:
    """Show integers exactly and floats without float noise."""
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.12g}"
    return str(value)


_ALLOWED = (
    "use numbers, + - * / // % ** (or ^), parentheses, "
    f"the constants {', '.join(_CONSTANTS)} and the functions {', '.join(_FUNCTIONS)}"
)


@tool()
async def calculator(
    ctx: ToolContext,
    expression: Annotated[str, Field(description="Arithmetic expression, e.g. '(3.5+2)*4^2'")],
) -> str:
    """Calculate an arithmetic expression exactly. Use it instead of doing math in your head."""
    return f"{expression.strip()} = {format_number(evaluate(expression))}"


def build(config: LoadedConfig, security: SecurityKit) -> list[Tool]:
    """The calculator needs no configuration."""
    return [calculator]
