"""A small web site for the browser tool tests, run in a process of its own.

It must not be PinClaw's process: the egress proxy refuses every port the
daemon's own process listens on, which would hide what the network policy
itself decides. ``BrowserSite`` starts it (``python tests/browser_site.py``):
pages on 127.0.0.1, and a listener on 127.0.0.2 (never allowed by the tests'
policy) that counts every connection made to it, whatever it carries, and
answers a tiny HTTP response. ``/count`` on the site says how many it took.

Pages: ``/js`` builds its text and a link with JavaScript; ``/leaky`` asks for
images, fetches and WebSockets on 127.0.0.2, by address and as
``other.test`` (which the tests' resolver points there); ``/redirect?to=URL``
redirects; ``/box`` is a plain coloured page for screenshots; ``/hog`` never
finishes loading and takes more memory all the time; ``/cookie`` shows the
cookie it had, then sets one.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx

JS_PAGE = """<!doctype html><html><head><title>Built by script</title></head>
<body><main id="out"></main>
<script>
  const out = document.getElementById("out");
  const p = document.createElement("p");
  p.textContent = "Hello from JavaScript: the greenhouse is at 21.5 degrees.";
  out.appendChild(p);
  const a = document.createElement("a");
  a.href = "/box"; a.textContent = "the box";
  out.appendChild(a);
</script></body></html>"""

LEAKY_PAGE = """<!doctype html><html><head><title>Leaky</title></head><body>
<p>A page that reaches for another address.</p>
<img src="http://127.0.0.2:{other}/pixel.png">
<img src="http://other.test:{other}/by-name.png">
<script>
  for (const host of ["127.0.0.2", "other.test"]) {{
    fetch(`http://${{host}}:{other}/data`).catch(() => {{}});
    try {{ new WebSocket(`ws://${{host}}:{other}/socket`); }} catch (e) {{}}
  }}
</script></body></html>"""

COOKIE_PAGE = """<!doctype html><html><head><title>Cookie</title></head><body>
<p id="seen"></p>
<script>
  document.getElementById("seen").textContent = "cookie: " + (document.cookie || "none");
  document.cookie = "flavour=oat; max-age=3600; path=/";
</script></body></html>"""

HOG_PAGE = """<!doctype html><html><head><title>Hog</title></head><body>
<p>A page that never finishes loading and keeps taking memory.</p>
<img src="/hold">
<script>
  const kept = [];
  setInterval(() => kept.push(new Array(1e6).fill(kept.length)), 20);
</script></body></html>"""

BOX_PAGE = """<!doctype html><html><head><title>Box</title>
<style>html, body { margin: 0; background: #2a7; } div { height: 3000px; }</style>
</head><body><div>A green page</div></body></html>"""


class _Counter:
    """The listener on 127.0.0.2: counts accepted connections, answers each with "ok"."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.2", 0))
        self.count = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            conn, _ = self.server.accept()
            with self.lock:
                self.count += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    @staticmethod
    def _answer(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            except OSError:
                pass


def _handler(counter: _Counter) -> type[BaseHTTPRequestHandler]:
    other = counter.server.getsockname()[1]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

        def do_GET(self) -> None:
            """Serve the pages."""
            parts = urlsplit(self.path)
            if parts.path == "/redirect":
                self.send_response(302)
                self.send_header("Location", parse_qs(parts.query)["to"][0])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if parts.path == "/hold":  # headers, then nothing: the page never ends loading
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", "1000")
                self.end_headers()
                self.wfile.flush()
                time.sleep(60)
                return
            pages = {
                "/cookie": COOKIE_PAGE,
                "/hog": HOG_PAGE,
                "/js": JS_PAGE,
                "/leaky": LEAKY_PAGE.format(other=other),
                "/box": BOX_PAGE,
                "/count": str(counter.count),
            }
            body = pages.get(parts.path)
            self.send_response(404 if body is None else 200)
            kind = "text/plain" if parts.path == "/count" else "text/html"
            data = (body or "not here").encode()
            self.send_header("Content-Type", f"{kind}; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


class BrowserSite:
    """The site in a process of its own: ``url`` on 127.0.0.1, ``other`` on 127.0.0.2."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, str(Path(__file__))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        port, other = self._proc.stdout.readline().split()
        self.url = f"http://127.0.0.1:{port}"
        self.other = f"http://127.0.0.2:{other}"

    def contacts(self) -> int:
        """How many connections the listener on 127.0.0.2 has accepted."""
        return int(httpx.get(f"{self.url}/count", timeout=10).text)

    def close(self) -> None:
        """Stop the process."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=10)
        self._proc.stdout.close()


def main() -> None:
    """Serve until stdin closes; the two ports on the first line of stdout."""
    counter = _Counter()
    site = ThreadingHTTPServer(("127.0.0.1", 0), _handler(counter))
    threading.Thread(target=site.serve_forever, daemon=True).start()
    print(site.server_address[1], counter.server.getsockname()[1], flush=True)
    sys.stdin.read()
    site.shutdown()


if __name__ == "__main__":
    main()
