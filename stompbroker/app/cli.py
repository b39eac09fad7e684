"""
The ``stompbroker`` command: tools that run beside the broker, not the broker itself.

``twistd stompbroker`` runs the broker; this command manages its files::

    stompbroker passwd FILE USER [--group G ...] [--stdin] [--cost N]
    stompbroker passwd FILE USER --delete

    stompbroker config check FILE

``passwd`` adds a user to a password file for ``--auth passwd:FILE`` (creating
the file, readable by its owner only), or gives an existing user a new password;
without ``--group`` an existing user keeps their groups.  The password is asked
for twice on the terminal; it is read as one line from standard input with
``--stdin``, or when standard input is not a terminal (a pipe, a script), so
that it never appears in the process list or shell history.  A running broker
picks the change up at the next login.

``config check`` reads a configuration file (``--config``) as ``twistd
stompbroker`` would, and says whether it would start with it.

Every failure is one line on standard error and an exit status
(:mod:`stompbroker.app.command_errors`); argparse's usage errors exit with 2.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Sequence
from typing import TextIO

from twisted.python import usage

from stompbroker import __version__
from stompbroker.app import admin
from stompbroker.app.command_errors import CommandFailed
from stompbroker.security.passwords import (
    DEFAULT_SCRYPT,
    PasswordFileError,
    ScryptParams,
    check_names,
    delete_user,
    set_password,
)

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stompbroker",
        description="Manage the files of a stompbroker installation, and a running broker.",
    )
    parser.add_argument("--version", action="version", version=f"stompbroker {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    passwd = commands.add_parser(
        "passwd",
        help="add, change or remove a user in a password file (--auth passwd:FILE)",
        description="Add a user to a password file, or change their password or groups.",
    )
    passwd.add_argument("file", metavar="FILE", help="the password file; created if missing")
    passwd.add_argument("user", metavar="USER", help="the user name (the CONNECT login)")
    passwd.add_argument(
        "--group",
        dest="groups",
        action="append",
        metavar="G",
        help="a group of the user (repeatable); replaces the user's groups",
    )
    passwd.add_argument(
        "--stdin",
        action="store_true",
        help="read the password as one line from standard input instead of the terminal",
    )
    passwd.add_argument(
        "--cost",
        type=int,
        default=DEFAULT_SCRYPT.n,
        metavar="N",
        help=f"the scrypt cost N, a power of two (default {DEFAULT_SCRYPT.n})",
    )
    passwd.add_argument("--delete", action="store_true", help="remove the user instead")
    config = commands.add_parser(
        "config",
        help="check a configuration file (twistd stompbroker --config FILE)",
        description="Check a configuration file without starting the broker.",
        epilog="exit status: 0 the broker would start with it; 1 it holds a mistake (printed)",
    )
    config_commands = config.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = config_commands.add_parser(
        "check",
        help="read FILE as twistd stompbroker --config FILE would, and say what is wrong",
        description="Read FILE as twistd stompbroker --config FILE would, and say what is wrong.",
    )
    check.add_argument("file", metavar="FILE", help="the TOML configuration file")
    admin.add_commands(commands)
    return parser


def _read_password(user: str, from_stdin: bool, stdin: TextIO) -> str:
    """
    :returns: the password: asked twice on the terminal, or one line of ``stdin``
        with ``--stdin`` or when ``stdin`` is not a terminal (getpass would read
        it there anyway, after a warning, and fail at its end).
    :raises CommandFailed: for an empty password, or two entries that differ.
    """
    if from_stdin or not stdin.isatty():
        password = stdin.readline().removesuffix("\n").removesuffix("\r")
    else:
        password = getpass.getpass(f"Password for {user}: ")
        if getpass.getpass("Again: ") != password:
            raise CommandFailed("the passwords differ; nothing was changed")
    if not password:
        raise CommandFailed("the password is empty; nothing was changed")
    return password


def _passwd(arguments: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> None:
    """
    :raises CommandFailed: for anything the user must fix.
    """
    if arguments.delete:
        try:
            deleted = delete_user(arguments.file, arguments.user)
        except OSError as error:
            raise CommandFailed(f"cannot write {arguments.file}: {error.strerror}") from None
        if not deleted:
            raise CommandFailed(f"{arguments.file} has no user {arguments.user!r}")
        print(f"removed {arguments.user} from {arguments.file}", file=stdout)
        return
    params = ScryptParams(arguments.cost, DEFAULT_SCRYPT.r, DEFAULT_SCRYPT.p)
    try:
        check_names(arguments.user, arguments.groups or ())
        params.check()
    except ValueError as error:
        raise CommandFailed(str(error)) from None
    password = _read_password(arguments.user, arguments.stdin, stdin)
    try:
        entry = set_password(arguments.file, arguments.user, password, arguments.groups, params)
    except OSError as error:
        raise CommandFailed(f"cannot write {arguments.file}: {error.strerror}") from None
    except ValueError as error:
        raise CommandFailed(str(error)) from None
    groups = ", ".join(entry.groups) or "no groups"
    print(f"set the password of {entry.user} ({groups}) in {arguments.file}", file=stdout)


def _config(arguments: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> None:
    """
    ``config check FILE``: parse it as ``twistd stompbroker --config FILE`` would
    (files it names are read, a stats directory is not made).

    :raises CommandFailed: saying what is wrong, with the file's line.
    """
    from stompbroker.app.options import Options

    options = Options()
    try:
        options.parseOptions(["--config", arguments.file])
    except usage.UsageError as error:
        raise CommandFailed(str(error)) from None
    print(f"{arguments.file}: the broker would start with it", file=stdout)


#: The function behind each subcommand.
_COMMANDS = {"passwd": _passwd, "config": _config}


def main(
    argv: Sequence[str] | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """
    Run the command line.

    :param argv: the arguments after the program name; ``sys.argv[1:]`` by default.
    :param stdin: where ``--stdin`` reads; ``sys.stdin`` by default.
    :param stdout: where reports go; ``sys.stdout`` by default.
    :param stderr: where errors go; ``sys.stderr`` by default.
    :returns: the exit status: 0 on success, 1 for an error the user can fix
        (or that the broker's API answered), 3 when the broker cannot be reached
        (argparse exits with 2 for bad arguments).
    """
    arguments = _parser().parse_args(argv)
    streams = (stdin or sys.stdin, stdout or sys.stdout)
    try:
        if arguments.command in admin.COMMANDS:
            return admin.run(arguments, *streams, stderr or sys.stderr)
        try:
            _COMMANDS[arguments.command](arguments, *streams)
        except PasswordFileError as error:
            raise CommandFailed(str(error)) from None
    except CommandFailed as error:
        # The one place a failure is said: one line, no traceback.
        print(f"stompbroker {arguments.command}: {error}", file=stderr or sys.stderr)
        return error.exit_status
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
