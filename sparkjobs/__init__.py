"""
PySpark jobs over the statistics a stompbroker exports with ``--stats-dir``.

- :mod:`sparkjobs.report`: the batch report (Parquet tables and an HTML dashboard).
- :mod:`sparkjobs.live`: the same per-minute aggregates, maintained by Structured Streaming.
- :mod:`sparkjobs.transforms`: the logic both share, as pure DataFrame functions.
- :mod:`sparkjobs.stats_io`: the SparkSession, reading the export, writing tables.
- :mod:`sparkjobs.dashboard`: the HTML page.

Of the broker, the jobs import only :mod:`stompbroker.stats.schema`.  They use
no Python UDFs, so Spark executors need no Python packages of ours.
"""
