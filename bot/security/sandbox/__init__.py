"""The kernel sandbox around each shell command.

``bwrap`` builds the bubblewrap command line; ``net`` and ``relay`` give a command
that may use the network its one way out (the egress proxy); ``wire`` runs commands
through ``pinclaw-sandbox.socket`` under the systemd service.
"""
