"""
The broker: the ``Broker`` service (:mod:`~stompbroker.broker.service`) and its
rooms, one subpackage per job:

- ``routing``: where a SEND goes, destinations and their syntax, the topic tree;
- ``clients``: what the broker keeps per connection: registry, consumers, transactions;
- ``queueing``: worker queues, dispatch, delivery, groups, priorities, dead letters;
- ``features``: scheduled delivery, retained messages, queue browsers, selectors;
- ``flow``: back-pressure, memory, limits, traffic counters;
- ``store``: the message store and how the broker uses it, recovery at start;
- ``streams``: ``/stream/`` logs and their readers;
- ``management``: the operator's operations;
- ``engine``: where destinations' state lives (local, redis).

May import: :mod:`stompbroker.protocol`, :mod:`stompbroker.interfaces`, Twisted's
``internet``, ``application`` and ``logger``; never :mod:`stompbroker.transport`,
:mod:`stompbroker.web`, :mod:`stompbroker.stats` or :mod:`stompbroker.app`
(``tests/test_layering.py`` checks).  It never sees bytes or sockets: it delivers
to :class:`~stompbroker.interfaces.ISubscriber`.  This ``__init__`` and those of
the rooms import nothing, so that :mod:`stompbroker.broker.flow.counter_names`
loads without Twisted.
"""
