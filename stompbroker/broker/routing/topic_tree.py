"""
The topic subscription tree: which subscribers a published destination reaches.

Pure code: no Twisted, no I/O, no clock.  The broker calls :meth:`SubscriptionTree.match`
once per SEND, so the theory of operation below is tuned for that call.

The syntax of destinations and patterns (segments split at ``/`` and ``.``, the
wildcards ``*``, ``#`` and ``>``) and the checks of both are
:mod:`stompbroker.broker.routing.syntax`.

Theory of operation
-------------------
Patterns without wildcards ("exact" patterns, nearly all of them in practice) live in a
dict keyed by the normalised destination.  Wildcard patterns live in a trie over
segments whose nodes hold literal children in a dict, one ``*`` child, the subscribers
whose pattern ends at the node, and the subscribers of a ``#``/``>`` at the node.  A match
is one dict lookup plus, only while wildcard patterns exist, a walk that at each depth
follows the destination's own literal child and the ``*`` child of the nodes still alive.
The walk therefore costs time in the destination's depth and in the trie nodes that
match a prefix of it, never in the number of unrelated subscriptions.

Results are cached per destination string as tuples: a hit is one dict lookup, and
the tuple is an immutable snapshot, so the caller may iterate it while deliveries add
or remove subscriptions.  Any :meth:`~SubscriptionTree.add` or
:meth:`~SubscriptionTree.remove` clears the cache (subscription churn is rare next
to publishing).  When the cache reaches ``max_cache_size`` entries it is cleared
rather than trimmed entry by entry: that bounds memory under a stream of unique
destinations at O(1) amortised cost, and hot destinations refill it at once.

Each registration takes a sequence number, so :meth:`~SubscriptionTree.match` returns
subscribers in the order they were added, each once even if it is registered under
several matching patterns.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Generic, TypeVar

from stompbroker.broker.routing.syntax import (
    ONE_SEGMENT,
    TRAILING_SEGMENTS,
    is_wildcard,
    normalise,
    validate_pattern,
)
from stompbroker.protocol.errors import InvalidDestination

__all__ = ["SubscriptionTree"]

_S = TypeVar("_S", bound=Hashable)

#: Default bound of the per-destination match cache.
DEFAULT_MAX_CACHE_SIZE = 4096


class _Node:
    """
    One trie node: the wildcard patterns whose first segments lead here.

    Every field but ``children`` stays ``None`` until used, which keeps nodes small
    and the emptiness test (for pruning) cheap.

    :ivar children: literal next segment -> node.
    :ivar star: the node for a ``*`` next segment.
    :ivar subscribers: subscriber -> sequence number, for patterns that end here.
    :ivar trailing: subscriber -> sequence number, for patterns that end here with
        ``#``/``>``.
    """

    __slots__ = ("children", "star", "subscribers", "trailing")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.star: _Node | None = None
        # Any, not the tree's subscriber type: nodes are not generic.
        self.subscribers: dict[Any, int] | None = None
        self.trailing: dict[Any, int] | None = None

    def is_empty(self) -> bool:
        """:returns: ``True`` if the node leads to no registration and can be pruned."""
        return not (self.children or self.star or self.subscribers or self.trailing)

    def count(self) -> int:
        """:returns: the number of nodes below this one (iteratively: patterns may be deep)."""
        total = 0
        pending = [self]
        while pending:
            node = pending.pop()
            below = list(node.children.values())
            if node.star is not None:
                below.append(node.star)
            total += len(below)
            pending.extend(below)
        return total


class SubscriptionTree(Generic[_S]):
    """
    Destination patterns mapped to the subscribers registered under them.

    A subscriber is any hashable object; the tree never calls it.  Hashing must be by
    identity for subscribers that compare equal but are distinct subscriptions (an
    attrs ``@define`` class needs ``eq=False``).  Patterns that are spelled
    differently but normalise alike (``/topic/a.b``, ``topic/a/b``; ``#`` and ``>``)
    are one pattern.

    :param max_cache_size: how many destinations' match results to keep; ``0``
        disables the cache.
    :raises ValueError: if ``max_cache_size`` is negative.
    """

    __slots__ = (
        "_exact",
        "_root",
        "_wildcard_registrations",
        "_registrations",
        "_next_sequence",
        "_cache",
        "_max_cache_size",
    )

    def __init__(self, *, max_cache_size: int = DEFAULT_MAX_CACHE_SIZE) -> None:
        if max_cache_size < 0:
            raise ValueError(f"max_cache_size must be >= 0, not {max_cache_size}")
        self._exact: dict[str, dict[_S, int]] = {}
        self._root = _Node()
        self._wildcard_registrations = 0
        self._registrations = 0
        self._next_sequence = 0
        self._cache: dict[str, tuple[_S, ...]] = {}
        self._max_cache_size = max_cache_size

    def __len__(self) -> int:
        """:returns: the number of (pattern, subscriber) registrations."""
        return self._registrations

    def __contains__(self, pattern: object) -> bool:
        """
        :param pattern: a destination pattern, in any spelling.
        :returns: ``True`` if at least one subscriber is registered under it; ``False``
            for anything that is not a valid pattern.
        """
        if not isinstance(pattern, str):
            return False
        try:
            validate_pattern(pattern)
        except InvalidDestination:
            return False
        return bool(self._registry(pattern, create=False))

    @property
    def cache_size(self) -> int:
        """The number of destinations whose match result is cached now."""
        return len(self._cache)

    def node_count(self) -> int:
        """
        Count what the tree holds in memory, for statistics and tests of pruning.

        :returns: the number of trie nodes below the root plus the number of exact
            destinations with subscribers; ``0`` for an empty tree.
        """
        return self._root.count() + len(self._exact)

    def subscribers(self, pattern: str) -> tuple[_S, ...]:
        """
        List the subscribers registered under one pattern (not those it matches).

        :param pattern: a destination pattern, in any spelling.
        :returns: the subscribers in the order they were added.
        :raises InvalidDestination: if ``pattern`` is not a valid pattern.
        """
        validate_pattern(pattern)
        return tuple(self._registry(pattern, create=False) or ())

    def add(self, pattern: str, subscriber: _S) -> None:
        """
        Register a subscriber under a pattern; a no-op if it is registered there already.

        :param pattern: a destination, with wildcards or not.
        :param subscriber: any hashable object.
        :raises InvalidDestination: if ``pattern`` is not a valid pattern; the tree is
            then unchanged.
        :raises TypeError: if ``subscriber`` is not hashable; the tree is then unchanged.
        """
        validate_pattern(pattern)
        hash(subscriber)  # before any node is made, so a failure leaves nothing behind
        registry = self._registry(pattern, create=True)
        assert registry is not None
        if subscriber in registry:
            return
        registry[subscriber] = self._next_sequence
        self._next_sequence += 1
        self._registrations += 1
        if is_wildcard(pattern):
            self._wildcard_registrations += 1
        self._cache.clear()

    def remove(self, pattern: str, subscriber: _S) -> None:
        """
        Unregister a subscriber from a pattern; a no-op if it is not registered there.

        Trie nodes and exact entries left empty are pruned, so subscribe/unsubscribe
        churn does not leak memory.

        :param pattern: the pattern, in any spelling that normalises like the one given
            to :meth:`add`.
        :param subscriber: the subscriber given to :meth:`add`.
        :raises InvalidDestination: if ``pattern`` is not a valid pattern.
        """
        validate_pattern(pattern)
        if not is_wildcard(pattern):
            key = normalise(pattern)
            registry = self._exact.get(key)
            if registry is None or subscriber not in registry:
                return
            del registry[subscriber]
            if not registry:
                del self._exact[key]
        elif not self._remove_wildcard(pattern, subscriber):
            return
        else:
            self._wildcard_registrations -= 1
        self._registrations -= 1
        self._cache.clear()

    def match(self, destination: str) -> tuple[_S, ...]:
        """
        Find the subscribers a message sent to ``destination`` must reach.

        The destination is not validated here (this is the hot path): check it once
        with :func:`~stompbroker.broker.routing.syntax.validate_destination`
        when the SEND arrives.

        :param destination: a wildcard-free destination, in any spelling.
        :returns: each matching subscriber once, in the order of registration; the
            tuple may be shared with later calls and must not be relied on to change.
        """
        cached = self._cache.get(destination)
        if cached is not None:
            return cached
        key = normalise(destination)
        exact = self._exact.get(key)
        if not self._wildcard_registrations:
            result: tuple[_S, ...] = tuple(exact) if exact else ()
        else:
            found: list[dict[_S, int]] = [exact] if exact else []
            self._walk(key.split("/"), found)
            result = _in_registration_order(found)
        if self._max_cache_size:
            if len(self._cache) >= self._max_cache_size:
                self._cache.clear()
            self._cache[destination] = result
        return result

    def _walk(self, segments: list[str], found: list[dict[_S, int]]) -> None:
        """
        Collect the registries of wildcard patterns that match ``segments``.

        Breadth-first: ``alive`` holds the nodes whose patterns match the segments
        consumed so far; a node's ``trailing`` registry matches whatever remains.

        :param segments: the destination's segments.
        :param found: registries are appended here.
        """
        alive = [self._root]
        for segment in segments:
            following = []
            for node in alive:
                if node.trailing:
                    found.append(node.trailing)
                child = node.children.get(segment)
                if child is not None:
                    following.append(child)
                if node.star is not None:
                    following.append(node.star)
            if not following:
                return
            alive = following
        for node in alive:
            if node.subscribers:
                found.append(node.subscribers)
            if node.trailing:
                found.append(node.trailing)

    def _registry(self, pattern: str, *, create: bool) -> dict[_S, int] | None:
        """
        Find (or make) the subscriber registry of a valid pattern.

        :param pattern: a pattern that passed :func:`validate_pattern`.
        :param create: make missing trie nodes and registries if ``True``.
        :returns: the registry, or ``None`` if absent and not created.
        """
        if not is_wildcard(pattern):
            key = normalise(pattern)
            if create:
                return self._exact.setdefault(key, {})
            return self._exact.get(key)
        *path, last = normalise(pattern).split("/")
        node: _Node | None = self._root
        for segment in path + ([] if last in TRAILING_SEGMENTS else [last]):
            assert node is not None
            node = self._child(node, segment, create)
            if node is None:
                return None
        assert node is not None
        attribute = "trailing" if last in TRAILING_SEGMENTS else "subscribers"
        registry: dict[_S, int] | None = getattr(node, attribute)
        if registry is None and create:
            registry = {}
            setattr(node, attribute, registry)
        return registry

    @staticmethod
    def _child(node: _Node, segment: str, create: bool) -> _Node | None:
        """
        Step from a node to the child for one pattern segment.

        :param create: make the child if it is missing.
        :returns: the child, or ``None`` if missing and not created.
        """
        if segment == ONE_SEGMENT:
            if node.star is None and create:
                node.star = _Node()
            return node.star
        child = node.children.get(segment)
        if child is None and create:
            child = node.children[segment] = _Node()
        return child

    def _remove_wildcard(self, pattern: str, subscriber: _S) -> bool:
        """
        Remove one wildcard registration and prune the nodes it leaves empty.

        :param pattern: a valid wildcard pattern.
        :returns: ``True`` if the subscriber was registered under the pattern.
        """
        *path, last = normalise(pattern).split("/")
        trailing = last in TRAILING_SEGMENTS
        steps = path if trailing else path + [last]
        visited = [self._root]
        for segment in steps:
            child = self._child(visited[-1], segment, create=False)
            if child is None:
                return False
            visited.append(child)
        node = visited[-1]
        registry = node.trailing if trailing else node.subscribers
        if not registry or subscriber not in registry:
            return False
        del registry[subscriber]
        if not registry:
            if trailing:
                node.trailing = None
            else:
                node.subscribers = None
        # Prune bottom-up: visited[i + 1] is the child of visited[i] through steps[i].
        for depth in range(len(steps) - 1, -1, -1):
            if not visited[depth + 1].is_empty():
                break
            parent, segment = visited[depth], steps[depth]
            if segment == ONE_SEGMENT:
                parent.star = None
            else:
                del parent.children[segment]
        return True


def _in_registration_order(found: list[dict[_S, int]]) -> tuple[_S, ...]:
    """
    Merge registries into one tuple, each subscriber once, by first registration.

    :param found: registries mapping subscriber -> sequence number; each is already
        in sequence order, so one registry needs no sort.
    :returns: the merged subscribers.
    """
    if not found:
        return ()
    if len(found) == 1:
        return tuple(found[0])
    first_sequence: dict[_S, int] = {}
    for registry in found:
        for subscriber, sequence in registry.items():
            known = first_sequence.get(subscriber)
            if known is None or sequence < known:
                first_sequence[subscriber] = sequence
    return tuple(sorted(first_sequence, key=first_sequence.__getitem__))
