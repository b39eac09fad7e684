"""``twistd stompbroker``'s options, parsed as its command line would be."""

from __future__ import annotations

from stompbroker.app.options import Options


def parse(*argv: str) -> Options:
    """
    :returns: the options of a ``twistd stompbroker`` command line.
    :raises twisted.python.usage.UsageError: for a command line twistd would refuse.
    """
    options = Options()
    options.parseOptions(list(argv))
    return options
