"""The SQLite file and the stores more than one feature uses: the connection, key-value
state, the durable inbox, pairing, backup and recovery."""
