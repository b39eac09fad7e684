"""
The broker: destinations, subscriptions, queues, transactions and delivery behind one
``Service``; the message store in :mod:`stompbroker.broker.store`.

May import: :mod:`stompbroker.protocol`, :mod:`stompbroker.interfaces`, Twisted's
``internet``, ``application`` and ``logger``; never :mod:`stompbroker.transport`,
:mod:`stompbroker.web`, :mod:`stompbroker.stats` or :mod:`stompbroker.app`.  It
never sees bytes or sockets: it delivers to :class:`~stompbroker.interfaces.ISubscriber`.
"""
