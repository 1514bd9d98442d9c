"""The checks Slack applies to ``chat.postMessage`` / ``chat.update`` / ``chat.postEphemeral``.

Limits from Slack's reference: message text up to 40,000 characters (``msg_too_long``);
text, blocks or attachments required (``no_text``); at most 50 blocks, section text up
to 3,000 characters, up to 10 section fields of 2,000, header text up to 150, a
``markdown`` block up to 12,000, up to 25 elements in an actions block, button text up
to 75 and value up to 2,000, ``action_id`` up to 255 (``invalid_blocks``).
"""

from __future__ import annotations

import json
from typing import Any

from tests.fake_slack.records import JSON

MAX_TEXT = 40_000
MAX_BLOCKS = 50
BLOCK_TYPES = {
    "actions", "context", "context_actions", "divider", "file", "header", "image", "input",
    "markdown", "rich_text", "section", "table", "video",
}  # fmt: skip


def decode_json_field(value: Any) -> Any:
    """A form field that carries JSON (``blocks``, ``attachments``) as its decoded value."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def message_problem(args: JSON) -> JSON | None:
    """Slack's error answer for a message that breaks the rules, or None."""
    text = args.get("text")
    blocks = decode_json_field(args.get("blocks"))
    attachments = decode_json_field(args.get("attachments"))
    if not text and not blocks and not attachments:
        return {"ok": False, "error": "no_text"}
    if isinstance(text, str) and len(text) > MAX_TEXT:
        return {"ok": False, "error": "msg_too_long"}
    if blocks:
        problems = blocks_problems(blocks)
        if problems:
            return {
                "ok": False,
                "error": "invalid_blocks",
                "errors": problems,
                "response_metadata": {"messages": [f"[ERROR] {p}" for p in problems]},
            }
    return None


def blocks_problems(blocks: Any) -> list[str]:
    """What is wrong with a ``blocks`` array, in Slack's wording style."""
    if not isinstance(blocks, list):
        return ["must be an array [json-pointer:/blocks]"]
    if len(blocks) > MAX_BLOCKS:
        return [f"no more than {MAX_BLOCKS} items allowed [json-pointer:/blocks]"]
    problems: list[str] = []
    for index, block in enumerate(blocks):
        where = f"/blocks/{index}"
        if not isinstance(block, dict) or block.get("type") not in BLOCK_TYPES:
            problems.append(f"unsupported type [json-pointer:{where}/type]")
            continue
        problems += _block_problems(block, where)
    return problems


def _block_problems(block: JSON, where: str) -> list[str]:
    kind = block["type"]
    problems: list[str] = []
    if kind == "section":
        text = block.get("text")
        fields = block.get("fields") or []
        if text is None and not fields:
            problems.append(f"must provide either text or fields [json-pointer:{where}]")
        problems += _text_problems(text, 3000, f"{where}/text")
        if len(fields) > 10:
            problems.append(f"no more than 10 items allowed [json-pointer:{where}/fields]")
        for i, item in enumerate(fields):
            problems += _text_problems(item, 2000, f"{where}/fields/{i}")
    elif kind == "header":
        problems += _text_problems(block.get("text"), 150, f"{where}/text")
    elif kind == "markdown":
        if len(str(block.get("text", ""))) > 12000:
            problems.append(f"must be less than 12001 characters [json-pointer:{where}/text]")
    elif kind == "actions":
        elements = block.get("elements") or []
        if not elements or len(elements) > 25:
            problems.append(f"must have 1 to 25 items [json-pointer:{where}/elements]")
        for i, element in enumerate(elements):
            problems += _element_problems(element, f"{where}/elements/{i}")
    return problems


def _element_problems(element: Any, where: str) -> list[str]:
    if not isinstance(element, dict):
        return [f"must be an object [json-pointer:{where}]"]
    problems: list[str] = []
    if len(str(element.get("action_id", ""))) > 255:
        problems.append(f"must be less than 256 characters [json-pointer:{where}/action_id]")
    if element.get("type") == "button":
        problems += _text_problems(element.get("text"), 75, f"{where}/text")
        if len(str(element.get("value", ""))) > 2000:
            problems.append(f"must be less than 2001 characters [json-pointer:{where}/value]")
    return problems


def _text_problems(text: Any, limit: int, where: str) -> list[str]:
    if text is None:
        return []
    if not isinstance(text, dict) or text.get("type") not in {"plain_text", "mrkdwn"}:
        return [f"must be a text object [json-pointer:{where}]"]
    body = text.get("text")
    if not isinstance(body, str) or not body:
        return [f"must be more than 0 characters [json-pointer:{where}/text]"]
    if len(body) > limit:
        return [f"must be less than {limit + 1} characters [json-pointer:{where}/text]"]
    return []
