"""
Who a client is and what it may do: passwords and their file, the ``twisted.cred``
checkers and portal, and access rights on destinations.

May import: :mod:`stompbroker.protocol` (for its errors), the broker's destination
matching, and ``twisted.cred``; never transports, the web site or the app.
"""
