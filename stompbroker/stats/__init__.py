"""
The broker's statistics: the model every surface reads, the export schema, the
JSON Lines export, Prometheus metrics, and the services that sample on a timer.

This ``__init__`` imports nothing, and :mod:`stompbroker.stats.schema` imports no
Twisted: ``sparkjobs/`` imports the schema on a Spark driver.  The other modules may
import :mod:`stompbroker.broker` and Twisted, and read the broker through its
methods only.
"""
