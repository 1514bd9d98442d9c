"""The pinclaw command line: every command, onboarding, the terminal."""
