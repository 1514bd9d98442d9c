"""``[[triggers]]`` in the config: what is accepted, what stops the start with a line naming the
key, and how a ``say`` text is filled in."""

from __future__ import annotations

from typing import Any

import pytest

from bot.config import parse_config
from bot.core.errors import ConfigError
from bot.triggers.spec import fill

PROVIDER = {"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}


def config(*triggers: dict[str, Any], **tables: Any) -> Any:
    return parse_config({"provider": PROVIDER, "triggers": list(triggers), **tables}, {})


def test_the_issue_s_example_is_accepted() -> None:
    loaded = config(
        {
            "name": "doorbell",
            "on": "webhook",
            "secret": "a-long-doorbell-secret",
            "to": "telegram:555",
            "say": "Someone rang: {body}",
            "cooldown": "1m",
        }
    )
    [table] = loaded.triggers
    assert table.name == "doorbell" and table.cooldown == "1m"


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"name": "d", "on": "webhook", "say": "x"}, "triggers[0]: secret: a webhook needs one"),
        ({"name": "Door", "on": "gpio:d", "say": "x"}, "triggers[0].name: 'Door'"),
        ({"name": "d", "on": "mail", "say": "x"}, "not an event source"),
        ({"name": "d", "on": "gpio:d", "say": "x", "ask": "y"}, "give say"),
        ({"name": "d", "on": "gpio:d"}, "give say"),
        ({"name": "d", "on": "gpio:d", "say": "x", "cooldown": "soon"}, "triggers[0].cooldown"),
        ({"name": "d", "on": "gpio:d", "say": "x", "rate_limit": "many"}, "not a rate limit"),
        ({"name": "d", "on": "gpio:d", "say": "x", "quiet_hours": "late"}, "quiet_hours"),
        ({"name": "d", "on": "gpio:d", "say": "x", "when": "open"}, "'on', 'off' or 'change'"),
        ({"name": "d", "on": "gpio:d", "say": "x", "secret": "s"}, "secret: only a webhook"),
        ({"name": "d", "on": "sensor:g.temperature", "say": "x"}, "is not a threshold"),
        ({"name": "d", "on": "sensor:g", "say": "x", "when": "below 1"}, "sensor:greenhouse"),
        ({"name": "d", "on": "serial:a", "say": "x"}, "pattern: a serial trigger"),
        ({"name": "d", "on": "serial:a", "say": "x", "pattern": "("}, "not a regular expr"),
        ({"name": "d", "on": "ha:Garage", "say": "x"}, "name an entity id"),
        ({"name": "d", "on": "gpio:d", "say": "x", "colour": "red"}, "triggers[0].colour"),
    ],
)
def test_a_broken_trigger_stops_the_start_naming_it(table: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config(table)
    assert words in str(caught.value)
    assert "Traceback" not in str(caught.value)


def test_two_triggers_of_one_name_are_refused() -> None:
    one = {"name": "d", "on": "gpio:d", "say": "x"}
    with pytest.raises(ConfigError, match=r"triggers\[1\].name: 'd' is the name of an earlier"):
        config(one, one)


def test_placeholders_fill_plain_and_dotted_names_and_nothing_else() -> None:
    values = {"body": "hi", "data": {"temp": 4.5, "ok": True, "list": [1, 2]}, "n": 3}
    assert fill("{body} {data.temp} {data.ok} {data.list.1} {n}", values) == "hi 4.5 true 2 3"
    # Unknown names, attribute access, indexes and format specs stay as written.
    for text in ("{nope}", "{body.__class__}", "{0}", "{body!r}", "{body:>9}", "{{body}}"):
        assert "hi" not in fill(text, values) or text == "{{body}}"
    assert fill("{body}", {"body": "{n}"}) == "{n}"  # a value is never filled in again
    assert fill("{body}", {"body": "x" * 5000}).endswith("…")


def test_an_untrusted_value_cannot_hide_a_link_behind_its_text() -> None:
    body = "[Verify your account](https://evil.example/login)"
    assert fill("{body}", {"body": body}) == body  # trusted values are the owner's own
    defanged = fill("Rang: {body}", {"body": body}, untrusted=True)
    assert "](" not in defanged and "https://evil.example/login" in defanged
