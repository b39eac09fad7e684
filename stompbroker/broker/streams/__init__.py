"""
Streams: ``/stream/NAME`` destinations, append-only logs that any number of
subscribers read at their own pace, each from an offset of its choosing.

- ``offsets``: the ``x-stream-offset`` SUBSCRIBE header (``first``, ``last``,
  ``next``, ``offset=N``, ``timestamp=SECONDS``, RabbitMQ's values) and the
  retention limits;
- ``log``: one stream's log: offsets, retention by age and bytes in segments,
  the bounded cache of its newest entries, its live readers;
- ``reader``: one subscription's cursor over a log: replay in pages, then the
  live tail with no gap and no duplicate, paced by the consumer's window;
- ``registry``: the streams of one engine, made on first use, swept for age;
- ``backends``: where a log's entries live (:class:`IStreamBackend`), and the
  in-memory one; ``sqlite_backend``: the SQLite store's tables.

Pure logic on an injected clock, tested with ``task.Clock``; the backends
answer with Deferreds.  Imports nothing above the broker layer.
"""
