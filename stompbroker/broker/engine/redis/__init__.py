"""
The Redis engine: several broker processes, on any number of machines, act as
one broker by keeping the shared state of destinations in one Redis (or Valkey)
server.  ``--engine redis://HOST:PORT/DB`` selects it; docs/cluster.md is the
design.

- :mod:`.url`: the ``--engine`` URL (TLS, database, password from the URL or a
  file) and how it is shown in logs (password masked).  Pure.
- :mod:`.codec`: how a message travels through Redis (one byte string), and the
  names of the keys and channels.  Pure.
- :mod:`.connection`: the redis-py asyncio client on Twisted's asyncio reactor:
  connecting, the start-up checks, and the one ordered writer that batches
  every command a message causes into pipelines.
- :mod:`.queues`: :class:`~.queues.StreamQueue`, a queue on a Redis stream
  shared by every node's consumers through one consumer group.
- :mod:`.durables`: durable topic subscriptions, a stream each, and the
  registry of them every node mirrors.
- :mod:`.engine`: :class:`~.engine.RedisEngine`, topics over pub/sub, queues
  over streams, node liveness and the claiming of a dead node's messages.
- :mod:`.listener`: what the node's one pub/sub connection brings it.
- :mod:`.resumes`: resumable sessions' records, and handing a session over to
  the node its client resumes on.

Only :mod:`.url` and :mod:`.codec` may be imported without redis-py installed:
the memory engine never imports the others.

May import what :mod:`stompbroker.broker.engine` may, and ``redis``.
"""
