"""The web control panel: server-rendered pages on the daemon's own HTTP server.

``app.py`` adds the panel to the daemon's aiohttp application (session login,
CSRF checks, security headers), ``auth.py`` keeps the login token and the
sessions, ``render.py`` renders Jinja2 templates into the shared layout,
``context.py`` is what a page gets from the daemon, ``actions.py`` records what
a person did, and ``pages/`` holds one module per page. docs/panel-contract.md
says how to add a page.
"""
