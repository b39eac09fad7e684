"""
Twisted's asyncio reactor running on uvloop: ``twistd -r uvloop stompbroker``.

Twisted's ``asyncio`` reactor takes whatever event loop asyncio makes, which
is the pure-Python selector loop.  uvloop is a drop-in event loop on libuv;
this module makes one and hands it to the asyncio reactor, so that
``twistd -r uvloop`` needs no code in the application.  It is the reactor the
README runs the broker on, because it measured a few per cent faster than
epoll (benchmarks/JOURNAL.md, "Reactors"); uvloop is a dependency of the package
wherever it builds (not on Windows).
"""

from __future__ import annotations

from twisted.internet import asyncioreactor


class UvloopMissing(ImportError):
    """``-r uvloop`` was asked for, and uvloop is not installed."""


def install() -> None:
    """
    Install the asyncio reactor on a new uvloop event loop.

    :raises UvloopMissing: if uvloop is not importable.
    """
    try:
        import uvloop
    except ImportError as error:
        raise UvloopMissing("the uvloop reactor needs uvloop: pip install uvloop") from error
    asyncioreactor.install(eventloop=uvloop.new_event_loop())


__all__ = ["install", "UvloopMissing"]
