"""
Adapters between Twisted (or Autobahn) connections and the sans-I/O session: TCP,
WebSocket, and the coalescing of what one read makes a connection write.

May import: :mod:`stompbroker.protocol`, :mod:`stompbroker.broker`,
:mod:`stompbroker.security`, Twisted and Autobahn.  Holds no protocol logic:
anything TCP and WebSocket both need belongs in the session.
"""
