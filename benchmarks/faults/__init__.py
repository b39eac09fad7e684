"""
``python -m benchmarks faults``: the cluster's fault harness, Jepsen-style.

It starts a real ``redis-server`` (with its AOF) and two stompbroker nodes on
it, runs clients that record every SEND, RECEIPT, ERROR, MESSAGE, ACK and
disconnect (publishers on node A, ``client-individual`` consumers on node B and
a standby one on A), injects one fault per run, drains, and checks the
history: receipted messages lost, duplicates with and without
``redelivered``, consumers and publishers cut off, time to recover.

- :mod:`~benchmarks.faults.servers`: Redis with an AOF, restartable on its
  port, and the TCP proxy that cuts a node from it;
- :mod:`~benchmarks.faults.sentinels`: a primary, a replica and three
  Sentinels, for the failover faults;
- :mod:`~benchmarks.faults.cluster`: Redis (or the Sentinels), the proxy and
  the nodes of one run;
- :mod:`~benchmarks.faults.kinds`: the faults, one class each;
- :mod:`~benchmarks.faults.clients`: the recording clients and their history;
- :mod:`~benchmarks.faults.verdict`: what the history says;
- :mod:`~benchmarks.faults.run`: one run, the command line and the table.
"""
