"""
What ``twistd``'s plugin (``twisted/plugins/stompbroker_plugin.py``) loads: the
options and :func:`~stompbroker.app.tap.makeService`, with a mistake on the
command line (or in ``--config``'s file) said in one line.

twistd itself answers a usage error with its whole ``--help`` (some 180 lines)
and the error last; here every :class:`~twisted.python.usage.UsageError` the
options raise becomes one line on standard error, ``twistd stompbroker: ...``,
and exit status :data:`EXIT_USAGE`.  This is the one place that does it: each
check only raises a ``UsageError`` saying what is wrong.  The options of
:mod:`stompbroker.app.options` still raise, for the tests and for
``stompbroker config check``.
"""

from __future__ import annotations

import sys

from twisted.python import usage

from stompbroker.app import tap

__all__ = ["EXIT_USAGE", "Options", "makeService"]

#: twistd's own exit status for a command line it refuses.
EXIT_USAGE = 1

makeService = tap.makeService


class Options(tap.Options):
    """``twistd stompbroker``'s options, whose usage errors end the process in one line."""

    def parseOptions(self, options: list[str] | None = None) -> None:
        """
        :raises SystemExit: with :data:`EXIT_USAGE`, after printing the error in one line.
        """
        try:
            super().parseOptions(options)
        except usage.UsageError as error:
            print(f"twistd stompbroker: {error}", file=sys.stderr)
            raise SystemExit(EXIT_USAGE) from None
