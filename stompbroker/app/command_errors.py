"""
The failures of the ``stompbroker`` command, each with its exit status.

Each subcommand raises one of these with a message a person can act on, and
:func:`stompbroker.app.cli.main` alone prints it, in one line
(``stompbroker COMMAND: MESSAGE``), and exits with its status: a mistake never
ends in a traceback.
"""

from __future__ import annotations

__all__ = ["BadUsage", "CommandFailed", "Refused", "Unreachable"]


class CommandFailed(Exception):
    """A mistake the user can fix (a file, a value, the input): exit status 1."""

    exit_status = 1


class Refused(CommandFailed):
    """The broker's API answered with an error; the message says what it was: exit status 1."""


class BadUsage(CommandFailed):
    """An argument the command cannot use (a URL's scheme) that argparse let by: exit status 2."""

    exit_status = 2


class Unreachable(CommandFailed):
    """The broker's web port could not be reached, or did not answer HTTP: exit status 3."""

    exit_status = 3
