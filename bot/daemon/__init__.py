"""The daemon: wiring, the router and its inbox, sessions, access, systemd."""
