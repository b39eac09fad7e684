"""
Flow: when the broker stops reading from a publisher, and what it counts.

Back-pressure (``backpressure``) over the memory watermark and the reasons a
publisher is paused (``publisher_pauses``); rate limits, what they are
(``rate_limits``) and applied (``rate_gates``); the broker-wide limits (``broker_limits``); the
per-destination traffic counters (``traffic``) and their names
(``counter_names``, which loads without Twisted: the stats schema reads it).

This ``__init__`` imports nothing, so that a module of the room loads alone.
"""
