"""
The STOMP protocol, sans I/O: frames, the parser, the encoder, the message the
broker carries, and the session state machine of one client connection
(``session.py``, ``states.py``) with its parts, a module each: ``lifecycle``,
``negotiation``, ``login``, ``publishing``, ``subscriptions``,
``receipts`` (over ``write_window``), the ``resume`` subpackage (the session's
part, the registry of detached sessions, the buffer and the cluster's
records), ``slow_consumer`` (over ``backlog``)
and ``timers``, on ``parts`` and ``config``.

May import: the standard library, attrs, zope.interface and
:mod:`stompbroker.interfaces`; nothing else of the package.

Rule 1: nothing in this package imports Twisted, Autobahn or Redis
(``tests/test_layering.py`` enforces it).  Rule 2: nothing here reads a clock or
a socket of its own; time and output are handed in by whoever drives the code.
"""
