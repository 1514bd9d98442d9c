"""Run the fake LLM server in the foreground: ``python -m tests.fake_llm --port 8080``."""

from __future__ import annotations

import argparse
import signal
import threading

from tests.fake_llm.server import FakeLLM


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    server = FakeLLM()
    server.start(args.port)
    print(f"fake LLM listening on {server.url} (OpenAI-compatible base_url: {server.url}/v1)")
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    server.stop()


if __name__ == "__main__":
    main()
