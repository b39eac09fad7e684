"""
Benchmarks of stompbroker, and of any other STOMP broker by address.

``python -m benchmarks`` runs the load scenarios (fan-out, WebSocket fan-out,
worker queues, persistent messages, latency, idle connections) against a
broker and prints a table and one JSON line per run; see
``docs/performance.md``.  Micro-benchmarks of single hot paths run as
``python -m benchmarks.NAME`` (``benchmarks.match_cost``,
``benchmarks.queue_cost``, ``benchmarks.store_throughput``).
"""
