"""
Tests for :mod:`stompbroker.broker.routing.topic_tree`.

The wildcard rules are the ones ARCHITECTURE.md states under "Destinations": ``*``
matches one segment, ``#`` (and ``>``) zero or more trailing segments, and ``/`` and
``.`` both separate segments.  STOMP itself leaves destinations opaque.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stompbroker.broker.routing.syntax import (
    is_wildcard,
    validate_destination,
    validate_pattern,
)
from stompbroker.broker.routing.topic_tree import SubscriptionTree
from stompbroker.protocol.errors import InvalidDestination
from tests.strategies import destinations, patterns
from tests.support.wildcards import reference_regex, reference_segments


def tree_with(*registrations: tuple[str, object]) -> SubscriptionTree[object]:
    """Build a tree holding the given ``(pattern, subscriber)`` registrations in order."""
    tree: SubscriptionTree[object] = SubscriptionTree()
    for pattern, subscriber in registrations:
        tree.add(pattern, subscriber)
    return tree


# Matching rules: one pattern, one destination, does it match?


def rule(pattern: str, destination: str, matches: bool, why: str) -> object:
    """One row of the matching table, named after the rule it checks."""
    return pytest.param(pattern, destination, matches, id=why)


MATCHING_RULES = [
    rule("/topic/prices", "/topic/prices", True, "exact pattern matches itself"),
    rule("/topic/prices", "/topic/prices.eur", False, "exact pattern not a longer name"),
    rule("/topic/prices", "/topic/price", False, "exact pattern not a prefix of it"),
    rule("/topic/prices", "/queue/prices", False, "exact pattern not another prefix"),
    rule("/topic/a.b.c", "/topic/a/b/c", True, "dotted pattern matches slashed name"),
    rule("/topic/x/y/z", "/topic/x.y.z", True, "slashed pattern matches dotted name"),
    rule("/topic/a.b.c", "/topic.a/b.c", True, "separators mix freely"),
    rule("/topic/a.*/c", "/topic/a/b.c", True, "wildcard patterns split at both"),
    rule("topic/a", "/topic/a", True, "leading separator optional in pattern"),
    rule("/topic/a", "topic/a", True, "leading separator optional in name"),
    rule("/topic/a", ".topic.a", True, "leading dot is a leading separator"),
    rule("/topic/a.*", "/topic/a.b", True, "star matches one segment"),
    rule("/topic/a.*", "/topic/a", False, "star does not match zero segments"),
    rule("/topic/a.*", "/topic/a.b.c", False, "star does not match two segments"),
    rule("/topic/*.price", "/topic/usd/price", True, "star in the middle"),
    rule("/topic/*.price", "/topic/eur.volume", False, "star then a literal mismatch"),
    rule("/topic/*.price", "/topic/eur.x.price", False, "star in the middle is one segment"),
    rule("/topic/a.*", "/topic/ab", False, "segments compare whole"),
    rule("/topic/a", "/topic/ab", False, "exact segments compare whole"),
    rule("/topic/a.#", "/topic/a", True, "hash matches zero trailing segments"),
    rule("/topic/a.#", "/topic/a.b", True, "hash matches one trailing segment"),
    rule("/topic/a.#", "/topic/a/b/c.d", True, "hash matches many trailing segments"),
    rule("/topic/a.#", "/topic/b", False, "hash keeps the literal prefix"),
    rule("/topic/a.#", "/topic", False, "hash does not shorten the prefix"),
    rule("/topic/a.>", "/topic/a", True, "greater-than matches zero trailing segments"),
    rule("/topic/a.>", "/topic/a.b.c", True, "greater-than matches many trailing segments"),
    rule("#", "/queue/x.y.z", True, "lone hash matches everything"),
    rule("/topic/*.x.#", "/topic/a.x", True, "star and hash combine, hash empty"),
    rule("/topic/*.x.#", "/topic/a.x.b.c", True, "star and hash combine"),
    rule("/topic/*.x.#", "/topic/x", False, "star before hash still needs a segment"),
    rule("/topic/*.x.#", "/topic/a.y.b", False, "star and hash keep the literal between"),
]


@pytest.mark.parametrize(("pattern", "destination", "matches"), MATCHING_RULES)
def test_pattern_matches_destination_by_the_wildcard_rules(
    pattern: str, destination: str, matches: bool
) -> None:
    """Each row checks one rule of ARCHITECTURE.md "Destinations" on a one-pattern tree."""
    tree = tree_with((pattern, "s"))
    assert tree.match(destination) == (("s",) if matches else ())


def test_hash_and_greater_than_are_one_pattern() -> None:
    """``#`` and ``>`` are synonyms, so removing one spelling removes the other."""
    tree = tree_with(("/topic/a.#", "s"))
    assert tree.subscribers("/topic/a/>") == ("s",)
    tree.remove("/topic/a.>", "s")
    assert len(tree) == 0
    assert tree.match("/topic/a.b") == ()


def test_match_returns_empty_tuple_when_nothing_matches() -> None:
    """An empty tree, or one with only unrelated patterns, matches nothing."""
    assert tree_with().match("/topic/a") == ()
    assert tree_with(("/topic/b.#", "s")).match("/topic/a") == ()


# Several subscribers.


def test_all_subscribers_of_one_pattern_are_returned_in_registration_order() -> None:
    """Two distinct subscribers on one pattern both get the message, first one first."""
    tree = tree_with(("/topic/a", "first"), ("/topic/a", "second"))
    assert tree.match("/topic/a") == ("first", "second")


def test_match_orders_subscribers_by_registration_across_patterns() -> None:
    """Exact and wildcard matches are merged in the order they were added."""
    tree = tree_with(("/topic/a.#", 1), ("/topic/a.b", 2), ("/topic/*.b", 3), ("/topic/a.b", 4))
    assert tree.match("/topic/a.b") == (1, 2, 3, 4)


def test_readding_after_removal_moves_subscriber_to_the_end() -> None:
    """A subscriber removed and added again counts as the newest registration."""
    tree = tree_with(("/topic/a", 1), ("/topic/*", 2))
    tree.remove("/topic/a", 1)
    tree.add("/topic/a", 1)
    assert tree.match("/topic/a") == (2, 1)


def test_subscriber_under_two_matching_patterns_is_returned_once() -> None:
    """One subscriber gets one copy even if several of its patterns match."""
    tree = tree_with(("/topic/a.b", "s"), ("/topic/a.*", "s"), ("/topic/#", "s"))
    assert len(tree) == 3
    assert tree.match("/topic/a.b") == ("s",)


def test_subscriber_under_two_matching_patterns_keeps_its_first_place() -> None:
    """A subscriber matched through several patterns is placed by its oldest registration."""
    tree = tree_with(("/topic/a.b", "s"), ("/topic/a.*", "t"), ("#", "s"))
    assert tree.match("/topic/a.b") == ("s", "t")


def test_adding_the_same_registration_twice_is_a_noop() -> None:
    """Adding a subscriber under a pattern it already has, in any spelling, changes nothing."""
    tree = tree_with(("/topic/a.b", "s"), ("topic/a/b", "s"), ("/topic/*.#", "s"))
    tree.add("/topic/*/>", "s")
    assert len(tree) == 2
    assert tree.match("/topic/a.b") == ("s",)


def test_equal_but_distinct_subscribers_need_identity_hashing() -> None:
    """Subscribers hashed by identity stay distinct even when they would compare equal."""

    class Subscription:
        """A subscriber that, like an attrs ``@define(eq=False)`` class, hashes by identity."""

    first, second = Subscription(), Subscription()
    tree = tree_with(("/topic/a", first), ("/topic/a", second))
    assert tree.match("/topic/a") == (first, second)


# Introspection.


def test_len_counts_registrations() -> None:
    """``len`` is the number of (pattern, subscriber) pairs."""
    tree = tree_with(("/topic/a", 1), ("/topic/a", 2), ("/topic/*", 1))
    assert len(tree) == 3
    assert tree


def test_contains_and_subscribers_look_up_one_pattern() -> None:
    """``in`` and ``subscribers`` speak of registrations under a pattern, not of matches."""
    tree = tree_with(("/topic/a.*", 1), ("/topic/a.*", 2), ("/topic/a.b", 3))
    assert "/topic/a/*" in tree
    assert "/topic/a.b" in tree
    assert "/topic/a.c" not in tree
    assert "/topic/#/bad" not in tree
    assert 42 not in tree
    assert tree.subscribers("/topic/a.*") == (1, 2)
    assert tree.subscribers("/topic/a.c") == ()


# Validation.


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("", "Empty pattern"),
        ("/", "Empty pattern"),
        ("/topic//a", "empty segment"),
        ("/topic/a.", "empty segment"),
        ("//topic/a", "empty segment"),
        ("/topic/#/a", "must be the last segment"),
        ("/topic/>.a", "must be the last segment"),
        ("/topic/#.#", "must be the last segment"),
        ("/topic/a*", "partial wildcard"),
        ("/topic/*a", "partial wildcard"),
        ("/topic/**", "partial wildcard"),
        ("/topic/a#b", "partial wildcard"),
        ("/topic/x>", "partial wildcard"),
    ],
)
def test_invalid_patterns_are_rejected_and_leave_the_tree_unchanged(
    pattern: str, reason: str
) -> None:
    """A malformed pattern raises InvalidDestination with a one-line reason and adds nothing."""
    tree = tree_with()
    with pytest.raises(InvalidDestination) as raised:
        tree.add(pattern, "s")
    assert reason in raised.value.message
    assert "\n" not in raised.value.message
    assert len(tree) == 0
    assert tree.node_count() == 0
    with pytest.raises(InvalidDestination):
        validate_pattern(pattern)


@pytest.mark.parametrize("pattern", ["/topic/a", "/topic/*", "/topic/a.#", ">", "*.*"])
def test_valid_patterns_pass_validation(pattern: str) -> None:
    """Whole-segment wildcards in allowed places are accepted."""
    validate_pattern(pattern)


@pytest.mark.parametrize(
    "destination", ["/topic/*", "/topic/a.#", "/topic/>", "/topic/a*", "/topic/a#1", ""]
)
def test_validate_destination_rejects_wildcards_and_reserved_characters(
    destination: str,
) -> None:
    """A SEND destination may hold no wildcard and no reserved character ``*#>``."""
    with pytest.raises(InvalidDestination):
        validate_destination(destination)


def test_validate_destination_accepts_plain_destinations() -> None:
    """Plain destinations in either spelling pass."""
    validate_destination("/topic/prices.eur")
    validate_destination("queue/orders/new")


@pytest.mark.parametrize(
    ("destination", "expected"),
    [
        ("/topic/a", False),
        ("/topic/a.b", False),
        ("/topic/*", True),
        ("/topic/*.b", True),
        ("/topic/a.#", True),
        ("/topic/a/>", True),
        ("/topic/a*", False),
    ],
)
def test_is_wildcard_recognises_whole_segment_wildcards(destination: str, expected: bool) -> None:
    """Only a whole ``*``, ``#`` or ``>`` segment makes a destination a wildcard."""
    assert is_wildcard(destination) is expected


# Removal and pruning.


def test_unhashable_subscriber_is_rejected_and_leaves_the_tree_unchanged() -> None:
    """Adding an unhashable subscriber raises TypeError before any trie node is made."""
    tree = tree_with()
    with pytest.raises(TypeError):
        tree.add("/topic/a.*.b", [])
    assert tree.node_count() == 0


def test_removing_an_absent_registration_is_a_noop() -> None:
    """Removing what was never added, in any way, changes nothing."""
    tree = tree_with(("/topic/a", 1), ("/topic/*.b", 1))
    tree.remove("/topic/a", 2)
    tree.remove("/topic/b", 1)
    tree.remove("/topic/*.c", 1)
    tree.remove("/topic/x.*.b", 1)
    tree.remove("/topic/a.#", 1)
    assert len(tree) == 2
    assert tree.match("/topic/a") == (1,)
    assert tree.match("/topic/a.b") == (1,)


def test_removing_everything_leaves_the_tree_empty() -> None:
    """After every registration is removed no trie node or exact entry is left."""
    patterns = [
        "/topic/a.b.c",
        "/topic/a.*.c",
        "/topic/a.*.#",
        "/topic/a.#",
        "/topic/*",
        "/topic/*.*.*",
        "#",
        "/topic/a.b.>",
    ]
    tree = tree_with(*((pattern, "s") for pattern in patterns))
    tree.add("/topic/a.b.c", "t")
    assert tree.node_count() > 0
    tree.remove("/topic/a.b.c", "t")
    for pattern in reversed(patterns[::2]):
        tree.remove(pattern, "s")
    for pattern in patterns[1::2]:
        tree.remove(pattern, "s")
    assert len(tree) == 0
    assert tree.node_count() == 0
    assert tree.match("/topic/a.b.c") == ()


def test_removing_one_pattern_keeps_those_sharing_its_prefix() -> None:
    """Pruning stops at nodes that still lead to other registrations."""
    tree = tree_with(("/topic/a.*.c", 1), ("/topic/a.*", 2), ("/topic/a.*.c.#", 3))
    tree.remove("/topic/a.*.c", 1)
    assert tree.match("/topic/a.b") == (2,)
    assert tree.match("/topic/a.b.c") == (3,)
    tree.remove("/topic/a.*.c.#", 3)
    assert tree.match("/topic/a.b") == (2,)
    assert tree.node_count() == 3  # topic, a, *


def test_subscribe_churn_does_not_grow_the_tree() -> None:
    """Many add/remove cycles on fresh patterns leave nothing behind."""
    tree = tree_with(("/topic/keep.*", "k"))
    baseline = tree.node_count()
    for index in range(200):
        pattern = f"/topic/churn{index}.*.x.#"
        tree.add(pattern, index)
        tree.add(f"/topic/churn{index}", index)
        tree.remove(pattern, index)
        tree.remove(f"/topic/churn{index}", index)
    assert tree.node_count() == baseline
    assert len(tree) == 1


# The match cache.


def test_add_invalidates_a_cached_match() -> None:
    """A subscriber added after a destination was matched is found by the next match."""
    tree = tree_with(("/topic/a", 1))
    assert tree.match("/topic/a") == (1,)
    tree.add("/topic/a", 2)
    assert tree.match("/topic/a") == (1, 2)
    tree.add("/topic/#", 3)
    assert tree.match("/topic/a") == (1, 2, 3)


def test_remove_invalidates_a_cached_match() -> None:
    """A removed subscriber is not returned from an earlier cached result."""
    tree = tree_with(("/topic/a", 1), ("/topic/*", 2))
    assert tree.match("/topic/a") == (1, 2)
    tree.remove("/topic/*", 2)
    assert tree.match("/topic/a") == (1,)
    tree.remove("/topic/a", 1)
    assert tree.match("/topic/a") == ()


def test_match_result_is_a_snapshot() -> None:
    """A tuple already returned does not change when the tree does, so callers may iterate it."""
    tree = tree_with(("/topic/a", 1))
    before = tree.match("/topic/a")
    tree.add("/topic/a", 2)
    assert before == (1,)


def test_cache_size_is_bounded() -> None:
    """A stream of unique destinations never holds more than ``max_cache_size`` results."""
    tree: SubscriptionTree[object] = SubscriptionTree(max_cache_size=3)
    tree.add("/topic/#", "s")
    for index in range(20):
        assert tree.match(f"/topic/unique{index}") == ("s",)
        assert tree.cache_size <= 3


def test_zero_cache_size_disables_the_cache() -> None:
    """With ``max_cache_size=0`` nothing is cached and results stay right."""
    tree: SubscriptionTree[object] = SubscriptionTree(max_cache_size=0)
    tree.add("/topic/a", "s")
    assert tree.match("/topic/a") == ("s",)
    assert tree.cache_size == 0


def test_negative_cache_size_is_rejected() -> None:
    """A negative cache bound is a programming error."""
    with pytest.raises(ValueError):
        SubscriptionTree(max_cache_size=-1)


# Against a brute-force reference (tests.support.wildcards).


def reference_match(registrations: list[tuple[str, object]], destination: str) -> tuple:
    """Scan every registration, oldest first, and keep each matching subscriber once."""
    path = "/".join(segment for segment in re.split(r"[/.]", destination) if segment)
    found: dict[object, None] = {}
    for pattern, subscriber in registrations:
        if re.fullmatch(reference_regex(pattern), path):
            found.setdefault(subscriber, None)
    return tuple(found)


def respelled(pattern: str) -> str:
    """Spell a pattern the other way: swap ``/`` and ``.``, ``#`` and ``>``."""
    return pattern.translate(str.maketrans({"/": ".", ".": "/", "#": ">", ">": "#"}))


def instance(pattern: str) -> str:
    """A destination the pattern matches: ``*`` becomes ``b``, a trailing wildcard ``c``."""
    replacements = {"*": "b", "#": "c"}
    return "/".join(replacements.get(segment, segment) for segment in reference_segments(pattern))


# Operations draw their patterns from a small pool, so that removals and repeated adds
# hit registrations that exist; a remove may use the other spelling of the pattern.
operations = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove", "remove respelled"]),
        st.integers(0, 5),
        st.integers(0, 2),
    ),
    max_size=40,
)


@settings(derandomize=True, deadline=None, max_examples=300)
@given(
    pool=st.lists(patterns(), min_size=1, max_size=6),
    operations=operations,
    probes=st.lists(destinations(), min_size=1, max_size=6),
    max_cache_size=st.sampled_from([0, 2, 4096]),
)
def test_match_agrees_with_brute_force_reference(
    pool: list[str],
    operations: list[tuple[str, int, int]],
    probes: list[str],
    max_cache_size: int,
) -> None:
    """After every add or remove, ``match`` returns what a scan of all patterns returns."""
    tree: SubscriptionTree[int] = SubscriptionTree(max_cache_size=max_cache_size)
    probes = probes + [instance(pattern) for pattern in pool]
    # (pattern as added, subscriber) in registration order.
    registrations: list[tuple[str, object]] = []
    for operation, pattern_index, subscriber in operations:
        pattern = pool[pattern_index % len(pool)]
        if operation == "remove respelled":
            pattern = respelled(pattern)
        key = (reference_segments(pattern), subscriber)
        known = [
            entry for entry in registrations if (reference_segments(entry[0]), entry[1]) == key
        ]
        if operation == "add":
            tree.add(pattern, subscriber)
            if not known:
                registrations.append((pattern, subscriber))
        else:
            tree.remove(pattern, subscriber)
            for entry in known:
                registrations.remove(entry)
        assert len(tree) == len(registrations)
        for destination in probes:
            assert tree.match(destination) == reference_match(registrations, destination)
    for pattern, subscriber in list(registrations):
        tree.remove(pattern, subscriber)
    assert len(tree) == 0
    assert tree.node_count() == 0
