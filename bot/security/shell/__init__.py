"""How risky a shell command line is, judged without running it.

``risk`` classifies a line: ``lexer`` tokenises it, ``parse`` splits it into simple
commands, ``tables`` and the rule modules (``rules``, ``code_rules``, ``git``,
``network``, ``project_rules``, ``variable_rules``) rate each command, and ``paths``
judges the paths it names. ``neutral`` is the environment of a command that runs
unasked; ``git_repository``, ``git_config_file`` and ``git_settings`` find what a git
command would read. ``state`` says where commands run.
"""
