"""
What one :meth:`SubscriptionTree.match` costs next to many unrelated subscriptions.

Usage: ``python -m benchmarks.match_cost``

For a destination with exactly one matching subscription (an exact pattern in one
case, a ``*`` pattern in the other) the tree also holds 10, 10 000 or 100 000
unrelated registrations: a mix of exact patterns and wildcard patterns on other
topics, half of them in the very branch the destination walks through
(``/topic/market.*.other17``, ``/topic/market.other17.#``), so the walk has to pass
them by.  Each case is timed twice, as the median of several runs:

- ``walk``: on a tree built with ``max_cache_size=0``, so every call normalises the
  destination, looks up the exact dict and walks the trie;
- ``cached``: on a tree with the default cache, so every call after the first is one
  dict lookup.

It prints a table, then one JSON line per case.  If the walk's cost stays flat from 10
to 100 000 unrelated subscriptions, matching does not scan them.  It takes a few
seconds.
"""

from __future__ import annotations

import statistics
import sys
import timeit

from benchmarks.report import print_results
from stompbroker.broker.routing.topic_tree import SubscriptionTree

#: How many unrelated registrations each case adds.
UNRELATED = (10, 10_000, 100_000)
#: The one matching registration, and a destination it matches, per kind.
MATCHING = {
    "exact": ("/topic/market.acme.trade", "/topic/market.acme.trade"),
    "wildcard": ("/topic/market.*.price", "/topic/market.acme.price"),
}
REPEATS = 7
CALLS_WALK = 20_000
CALLS_CACHED = 200_000


def unrelated_pattern(index: int) -> str:
    """
    One of four kinds of pattern that never matches the benchmark destinations.

    :param index: makes the pattern unique.
    :returns: an exact pattern or a wildcard pattern on another topic or leaf.
    """
    kind = index % 4
    if kind == 0:
        return f"/topic/feed{index}.news"
    if kind == 1:
        return f"/topic/feed{index}.*"
    if kind == 2:
        return f"/topic/market.*.other{index}"
    return f"/topic/market.other{index}.#"


def build(unrelated: int, pattern: str, max_cache_size: int) -> SubscriptionTree[int]:
    """
    Make a tree with ``unrelated`` registrations and then the matching one.

    :returns: the tree; subscriber ``-1`` is the matching one.
    """
    tree: SubscriptionTree[int] = SubscriptionTree(max_cache_size=max_cache_size)
    for index in range(unrelated):
        tree.add(unrelated_pattern(index), index)
    tree.add(pattern, -1)
    return tree


def time_match(tree: SubscriptionTree[int], destination: str, calls: int) -> float:
    """
    Time ``tree.match(destination)``.

    :param calls: calls per run.
    :returns: the median over :data:`REPEATS` runs of the time per call, in µs.
    """
    assert tree.match(destination) == (-1,), "the benchmark must match exactly once"
    timer = timeit.Timer(
        "match(destination)", globals={"match": tree.match, "destination": destination}
    )
    runs = timer.repeat(repeat=REPEATS, number=calls)
    return statistics.median(runs) / calls * 1e6


def main(argv: list[str]) -> int:
    """
    Run every case and print the table and the JSON lines.

    :param argv: unused; the benchmark takes no arguments.
    :returns: the exit status.
    """
    results = []
    for kind, (pattern, destination) in MATCHING.items():
        for unrelated in UNRELATED:
            walk_tree = build(unrelated, pattern, max_cache_size=0)
            walk_us = time_match(walk_tree, destination, CALLS_WALK)
            del walk_tree
            cached_tree = build(unrelated, pattern, max_cache_size=4096)
            cached_us = time_match(cached_tree, destination, CALLS_CACHED)
            results.append(
                {
                    "benchmark": "match_cost",
                    "matching": kind,
                    "destination": destination,
                    "unrelated": unrelated,
                    "registrations": len(cached_tree),
                    "walk_us": round(walk_us, 4),
                    "cached_us": round(cached_us, 4),
                    "repeats": REPEATS,
                    "python": sys.version.split()[0],
                }
            )
    print_results(
        results,
        (
            ("matching", "matching", "<10"),
            ("unrelated", "unrelated", ">11,"),
            ("walk µs", "walk_us", ">10.3f"),
            ("cached µs", "cached_us", ">11.3f"),
        ),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
