"""
Worker queues: messages wait in order, and each goes to one consumer.

The queue (``queues``) and its expiry sweep (``expiry_sweep``); a consumer's
place on a queue and the delivery policy (``delivery``); dispatch beyond
round-robin (``dispatch``): which consumer gets the next message
(``consumer_choice``: priorities, exclusive and single-active consumers),
message groups (``groups``), message priority (``priorities``); and dead
letters (``dead_letters``).

This ``__init__`` imports nothing, so that a module of the room loads alone.
"""
