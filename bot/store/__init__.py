"""The SQLite file: the connection, small key-value state, backup and recovery."""
