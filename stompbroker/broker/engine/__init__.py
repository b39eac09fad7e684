"""
Engines: where the state of the broker's destinations lives.

An engine holds everything that outlives one SEND: the topic subscriptions, the
queues (shared, temporary, and topic subscriptions' own), the durable
subscriptions, and the persistent messages.  The broker's other parts (the
router, the connection registry, acknowledgements, transactions, back-pressure)
keep only what belongs to this process and its connections, and reach
destinations through :class:`stompbroker.broker.engine.engine_interface.IEngine` (and the
queues it hands out, :class:`~stompbroker.broker.engine.queue_interface.IQueue`).

- :mod:`stompbroker.broker.engine.local`: in this process's memory, with
  persistent messages in a message store (:mod:`stompbroker.broker.store`).
  The default.
- :mod:`stompbroker.broker.engine.redis`: in a Redis server shared by any number
  of broker processes, which then act as one.

Both are assembled from the same parts for what belongs to this process
(:mod:`~stompbroker.broker.engine.fanout`, the topic fan-out and the process's
bookkeeping; :mod:`~stompbroker.broker.engine.queue_table`, its queues); neither
subclasses the other.  Each states what it supports in one
:class:`~stompbroker.broker.engine.capabilities.Capabilities` value, which the
broker consults through :func:`~stompbroker.broker.engine.capabilities.require`.
:mod:`~stompbroker.broker.engine.factory` is the one place that names them, to
build the one ``--engine`` chose.

Whatever the engine, messages reach clients only through the
:class:`~stompbroker.interfaces.ISubscriber` objects of this process's sessions.

May import: :mod:`stompbroker.broker` (but :mod:`stompbroker.broker.service`,
which builds engines through the factory), :mod:`stompbroker.protocol`,
:mod:`stompbroker.interfaces`, and Twisted's ``internet``, ``python`` and ``logger``; never
:mod:`stompbroker.transport`, :mod:`stompbroker.web`, :mod:`stompbroker.stats` or
:mod:`stompbroker.app`.
"""
