"""The agent loop: prompt, history, tool registry and how tool calls travel."""
