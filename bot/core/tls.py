"""One TLS context for every client in the process (providers and channels).

Each context loads the CA bundle again (about 0.7 MiB each, 2.5 MiB for the
first); sharing one keeps the daemon small on a Raspberry Pi. The bundle is
loaded the first time ``shared_ssl_context`` is called: a process that only
talks plain HTTP (``pinclaw agent -m`` with a model on this machine) never
loads it. ``pending_ssl_context`` is the same context without loading it, for a
client that calls ``shared_ssl_context`` before each request that may use TLS;
used before that, the context trusts no certificate, so a connection fails
rather than trusting one it should not.
"""

from __future__ import annotations

import functools
import os
import ssl
import sys
import threading

import certifi

_loading = threading.Lock()
_loaded: set[int] = set()  # holds 1 once the CA bundle is in the context


def shared_ssl_context() -> ssl.SSLContext:
    """A verifying client context with certifi's CA bundle, created once."""
    context = _context()
    if not _loaded:
        with _loading:
            if not _loaded:
                context.load_verify_locations(cafile=certifi.where())
                _loaded.add(1)
    return context


def pending_ssl_context() -> ssl.SSLContext:
    """The shared context, its CA bundle perhaps not loaded yet (see the module docstring)."""
    return _context()


@functools.cache
def _context() -> ssl.SSLContext:
    """``ssl.create_default_context()``'s client settings, without loading any CA yet."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.verify_mode = ssl.CERT_REQUIRED
    context.check_hostname = True
    keylog = os.environ.get("SSLKEYLOGFILE")
    if keylog and not sys.flags.ignore_environment:
        context.keylog_filename = keylog
    return context
