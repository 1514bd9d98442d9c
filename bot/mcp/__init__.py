"""MCP servers as tools: connections kept alive in their own tasks, tools behind the gate.

``manager.McpManager`` is the public face; the ``mcp`` SDK is imported only when a
server is configured (``connection.py``), so PinClaw without MCP never loads it.
"""
