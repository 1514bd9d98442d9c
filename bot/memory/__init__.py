"""Long-term memory: entries in SQLite with full-text and vector recall."""
