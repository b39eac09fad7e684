"""
What the broker keeps for each client connection.

The connection registry and its limits (``connections``), subscriptions as
consumers with the ACKs and NACKs that settle them (``consumers``), and
transactions (``transactions``).

This ``__init__`` imports nothing, so that a module of the room loads alone.
"""
