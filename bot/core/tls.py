"""One TLS context for every client in the process (providers and channels).

Each context loads the CA bundle again (about 0.7 MiB each, 2.5 MiB for the
first); sharing one keeps the daemon small on a Raspberry Pi.
"""

from __future__ import annotations

import functools
import ssl

import certifi


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """A verifying client context with certifi's CA bundle, created once."""
    return ssl.create_default_context(cafile=certifi.where())
