"""A fake LLM server for tests and benchmarks: see ``server.py``."""

from tests.fake_llm.script import (
    CallTools,
    Fail,
    Hold,
    Raw,
    Recorded,
    Reply,
    RequestView,
    Say,
    Stall,
)
from tests.fake_llm.server import FakeLLM

__all__ = [
    "CallTools",
    "Fail",
    "FakeLLM",
    "Hold",
    "Raw",
    "Recorded",
    "Reply",
    "RequestView",
    "Say",
    "Stall",
]
