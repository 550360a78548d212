"""Notifications: `[notify]` in .gitswarm.toml runs a command when a person's wait is over.

`notifier` turns the supervisor's events and verify's verdicts into
notification events; `runner` is the separate process that runs the
command with a deadline, so a slow notifier never holds up the work.
"""
