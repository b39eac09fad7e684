"""
The message store: where persistent messages and durable subscriptions live between
SEND and ACK.

``base`` holds the interface every store keeps, its records and its errors;
``memory`` and ``sqlite`` are the two stores of the in-process engine, the latter
with its tables in ``sqlite_schema``, its reads and writes of rows in
``sqlite_records`` and its group-commit writer in ``sqlite_writer``.  How the
broker uses the store is ``journal`` (keys, and writes whose outcome someone must
hear of), and ``recovery`` rebuilds queues and durable subscriptions from it at
start.  Imports
Twisted (stores answer with Deferreds) but nothing above the broker layer.
"""
