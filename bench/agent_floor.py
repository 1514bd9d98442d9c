"""The floor for the cold-turn benchmark: the least a one-shot agent can do in Python.

With PinClaw's own libraries (asyncio, tomllib, pydantic, sqlite3, httpx), and
nothing else: read a TOML config into a pydantic model, open a SQLite file and
write the message, post it to an OpenAI-compatible model, write and print the
answer. No tools, no prompt, no memory, no checks.

    python bench/agent_floor.py CONFIG.toml DATABASE MESSAGE

``agent_turn.py`` times it next to ``pinclaw agent -m`` in the same run, so the
share of the cold turn that is Python and these libraries starting is measured
on the machine at hand, not assumed.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import tomllib

import httpx
from pydantic import BaseModel


class Provider(BaseModel):
    """The ``[provider]`` table as far as the floor reads it."""

    kind: str
    model: str
    base_url: str


async def answer(provider: Provider, database: str, text: str) -> str:
    """Store the message, ask the model, store and return the answer."""
    db = sqlite3.connect(database)
    db.execute("CREATE TABLE IF NOT EXISTS messages (role TEXT, content TEXT)")
    db.execute("INSERT INTO messages VALUES ('user', ?)", (text,))
    db.commit()
    # The model is on plain http:// here, so no CA bundle is loaded (PinClaw loads
    # it only before a request that may use TLS, too).
    async with httpx.AsyncClient(timeout=60, verify=False) as client:
        response = await client.post(
            f"{provider.base_url}/chat/completions",
            json={"model": provider.model, "messages": [{"role": "user", "content": text}]},
        )
        response.raise_for_status()
        reply = str(response.json()["choices"][0]["message"]["content"])
    db.execute("INSERT INTO messages VALUES ('assistant', ?)", (reply,))
    db.commit()
    db.close()
    return reply


def main() -> None:
    """Answer the one message given on the command line."""
    config_path, database, text = sys.argv[1:4]
    with open(config_path, "rb") as file:
        provider = Provider.model_validate(tomllib.load(file)["provider"])
    print(asyncio.run(answer(provider, database, text)))


if __name__ == "__main__":
    main()
