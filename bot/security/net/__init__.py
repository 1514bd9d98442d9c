"""The network guards: what a web request or a sandboxed command may reach.

``policy`` is the guard the web tools use (``NetGuard``), judging every hop after
DNS through ``transport``; ``addresses`` says whether an address is public and holds
the allowlist. ``egress`` is the proxy that is a sandboxed command's and the
browser's only way out; ``own_ports`` names PinClaw's own ports, refused to both.
"""
