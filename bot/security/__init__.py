"""The security policy: path, shell and network guards, decisions, audit log, redaction.

One ``SecurityKit`` is built from the config and handed to every tool factory
when the registry is assembled; the ``PolicyGate`` wraps the registry so every
call is assessed, decided, audited and redacted in one place. There is no
global state and no way around it.
"""
