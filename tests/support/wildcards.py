"""
The wildcard rules of subscription patterns as regular expressions, built apart
from :class:`stompbroker.broker.routing.topic_tree.SubscriptionTree`, as a reference
that the tree and the access rules are checked against.
"""

from __future__ import annotations

import re


def reference_segments(pattern: str) -> tuple[str, ...]:
    """Split a pattern at both separators, spelling ``>`` as ``#``, to tell equal patterns."""
    segments = [segment for segment in re.split(r"[/.]", pattern) if segment]
    return tuple("#" if segment == ">" else segment for segment in segments)


def reference_regex(pattern: str) -> str:
    """Translate a pattern into a regex over ``/``-joined segments, independently of the tree."""
    segments = list(reference_segments(pattern))
    trailing = segments[-1] == "#"
    if trailing:
        segments = segments[:-1]
    body = "/".join("[^/]+" if segment == "*" else re.escape(segment) for segment in segments)
    if trailing:
        body = body + "(?:/[^/]+)*" if body else "[^/]+(?:/[^/]+)*"
    return body
