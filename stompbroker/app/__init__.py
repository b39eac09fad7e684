"""
The application: twistd options and ``makeService``, the services that order
start-up, process limits, garbage-collector tuning, the reactor plugin, the
``stompbroker`` command line.

May import every other layer; nothing imports it.  It only wires: a behaviour that
an embedding application would also want belongs in a lower layer.
"""
