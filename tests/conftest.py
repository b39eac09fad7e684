"""
Test configuration shared by the whole suite: the Hypothesis profile.

Hypothesis runs derandomized, so that a failure on CI is a failure on every
machine, and without deadlines, which only measure how busy the machine is.
"""

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=200)
settings.load_profile("ci")
