"""
Engines: where the state of the broker's destinations lives.

An engine holds everything that outlives one SEND: the topic subscriptions, the
queues (shared, temporary, and topic subscriptions' own), the durable
subscriptions, and the persistent messages.  The broker's other parts (the
router, the connection registry, acknowledgements, transactions, back-pressure)
keep only what belongs to this process and its connections, and reach
destinations through :class:`stompbroker.broker.engine.base.IEngine` (and the
queues it hands out, :class:`~stompbroker.broker.engine.queue_interface.IQueue`).

- :mod:`stompbroker.broker.engine.local`: in this process's memory, with
  persistent messages in a message store (:mod:`stompbroker.broker.store`).
  The default, and the only engine so far.
- A remote engine (Redis: pub/sub for topics, Streams with consumer groups for
  queues and durable subscriptions) will let several broker processes act as
  one; the interface says, method by method, how it would do each thing.

Whatever the engine, messages reach clients only through the
:class:`~stompbroker.interfaces.ISubscriber` objects of this process's sessions.

May import: :mod:`stompbroker.broker` (but :mod:`stompbroker.broker.service`,
which builds engines), :mod:`stompbroker.protocol`, :mod:`stompbroker.interfaces`,
and Twisted's ``internet``, ``python`` and ``logger``; never
:mod:`stompbroker.transport`, :mod:`stompbroker.web`, :mod:`stompbroker.stats` or
:mod:`stompbroker.app`.
"""
