"""
The broker: the ``Broker`` service (:mod:`~stompbroker.broker.service`) and its
parts, each in a module of its own: routing (``router``), subscriptions and
acknowledgements (``consumers``), the connection registry (``connections``),
transactions, back-pressure, recovery, dead letters, the operator's operations
(``management``, ``management_queues``, ``management_records``); the queues,
the subscription tree, the syntax of destinations (``destination_syntax``) and
the counters they share.  Where destinations' state lives is the
engine's business (:mod:`stompbroker.broker.engine`), and the message store's
(:mod:`stompbroker.broker.store`).

May import: :mod:`stompbroker.protocol`, :mod:`stompbroker.interfaces`, Twisted's
``internet``, ``application`` and ``logger``; never :mod:`stompbroker.transport`,
:mod:`stompbroker.web`, :mod:`stompbroker.stats` or :mod:`stompbroker.app`
(``tests/test_layering.py`` checks).  It never sees bytes or sockets: it delivers
to :class:`~stompbroker.interfaces.ISubscriber`.  This ``__init__`` imports
nothing, so that :mod:`stompbroker.broker.counter_names` loads without Twisted.
"""
