"""
What an operator may do to a running broker.

The operations behind the management API and the command line
(``operations``), those on the messages waiting in a queue
(``queue_operations``), what they answer with and how they refuse
(``records``), and the resumable sessions that wait for their client
(``detached_sessions``).

This ``__init__`` imports nothing, so that a module of the room loads alone.
"""
