"""
The STOMP protocol, sans I/O.

Rule 1: nothing in this package imports Twisted or Autobahn (``tests/test_layering.py``
enforces it).  Rule 2: nothing here reads a clock or a socket of its own; time and
output are handed in by whoever drives the code.
"""
