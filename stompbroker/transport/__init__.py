"""Adapters between Twisted (or Autobahn) connections and :class:`StompSession`."""
