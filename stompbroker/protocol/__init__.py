"""
The STOMP protocol, sans I/O: frames, the parser, the encoder, the message the
broker carries, and the session state machine of one client connection
(``session.py``, ``states.py``).  The session holds its parts, objects a module
each, each given only what it uses (values, callables, the small interfaces of
``parts``) and none importing ``session``: ``receipts`` (over ``write_window``),
``timers``, ``slow_consumer`` (the output, over ``backlog``), ``subscriptions``,
``login``, ``reading`` and the ``resume`` subpackage (the session's part, the
registry of detached sessions, the buffer and the cluster's records).  Its frame
handlers are its own methods, which sequence the parts and the pure readings of
CONNECT (``negotiation``) and SEND (``send_reading``); its settings are ``config``.

May import: the standard library, attrs, zope.interface and
:mod:`stompbroker.interfaces`; nothing else of the package.

Rule 1: nothing in this package imports Twisted, Autobahn or Redis
(``tests/test_layering.py`` enforces it).  Rule 2: nothing here reads a clock or
a socket of its own; time and output are handed in by whoever drives the code.
"""
