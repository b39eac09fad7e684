"""
Routing: where a SEND goes and which subscriptions a destination reaches.

The router (``router``) and what a SEND's headers make of its message
(``send_headers``, ``expiry``); the kinds of destination and their names
(``destinations``) and syntax (``syntax``); composite destinations
(``composite``); the topic subscription tree (``topic_tree``); broker-unique
names (``ids``).

This ``__init__`` imports nothing, so that a module of the room loads alone.
"""
