"""
Helpers shared by test modules of several packages: fakes and drivers that stand
in for the other side of what a test exercises.

May import: the standard library, Twisted's testing helpers, and any module of
stompbroker; never a test module (tests import support, not the other way).
"""
