"""
Per-destination policies (RabbitMQ's policies, ActiveMQ's destination policies):
what operators set for the destinations whose name matches a pattern.

Pure code: no Twisted, no I/O.  :class:`Policies` holds the policies by name and
resolves a destination to the one in force (the highest ``priority`` among those
that match; on a tie the first name in sort order), cached per destination and
forgotten on every change; whoever applies settings (the queue table, the
consumers, dead letters) asks it, and is told of each change through
:meth:`Policies.watch`.  A setting a policy leaves out is the global option's.

A pattern is a destination name in the wildcard syntax of
``docs/destinations.md`` (``orders.>``, ``prices.*``), without the ``/queue/``
or ``/topic/`` prefix, which ``apply-to`` chooses.

A policy belongs to one virtual host (``vhost``, the default host ``/`` unless
named; ``docs/virtual-hosts.md``): it matches only that host's destinations,
and its pattern is matched on the names that host's clients send, so
``orders.>`` of ``shop`` is in force on ``shop``'s ``/queue/orders.eu`` and not
on the default host's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from attrs import Attribute, evolve, field, fields, frozen
from attrs.validators import ge, in_, optional

from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.routing.syntax import validate_pattern
from stompbroker.broker.routing.topic_tree import SubscriptionTree
from stompbroker.broker.routing.virtual_hosts import VirtualHost, client_name, host_of
from stompbroker.protocol.config import BLOCK, DISCONNECT, DROP_OLDEST, SLOW_CONSUMER_POLICIES
from stompbroker.protocol.errors import InvalidDestination

__all__ = [
    "APPLY_TO",
    "DEFAULT_VHOST",
    "OVERFLOWS",
    "BadPolicy",
    "Policies",
    "Policy",
    "PolicySettings",
    "PolicySharing",
    "parse_policy",
]

#: What a policy applies to.
APPLY_TO = ("queues", "topics", "all")
#: What a queue at its maximum length does with one more message.
OVERFLOWS = ("drop-head", "reject-publish", "dead-letter")
#: The virtual host a policy belongs to unless it names one.
DEFAULT_VHOST = "/"
#: The slow-consumer policies from the strictest: on equal buffers the first wins.
_STRICTEST = {DISCONNECT: 0, DROP_OLDEST: 1, BLOCK: 2}
#: The prefix of the destinations a policy's slow-consumer settings apply to.
_TOPIC_PREFIX = "/topic/"
#: The prefixes ``apply-to`` puts before a policy's pattern.
_PREFIXES = {"queues": ("/queue/",), "topics": ("/topic/",), "all": ("/queue/", "/topic/")}


class BadPolicy(ValueError):
    """A policy's definition is wrong: an unknown key, a bad value, a bad pattern."""


def _dead_letter(instance: Any, attribute: Attribute, value: str | None) -> None:
    """A dead-letter destination is a ``/queue/`` without wildcards."""
    if value is None:
        return
    if not value.startswith("/queue/") or any(c in value for c in "*#>"):
        raise ValueError(f"dead-letter must be a /queue/ destination, got {value!r}")


_POSITIVE = optional(ge(1))
_COUNT = optional(ge(0))


@frozen
class PolicySettings:
    """
    What a policy sets; ``None`` leaves the global option in force.

    :ivar max_length: most messages waiting in a queue.
    :ivar max_length_bytes: most bytes of message bodies waiting in a queue.
    :ivar overflow: what a full queue does with one more message: ``drop-head``
        (the oldest waiting goes), ``reject-publish`` (the SEND gets an ERROR),
        ``dead-letter`` (the oldest waiting is dead-lettered).
    :ivar message_ttl: ms a message may wait in a queue (the lower of this and its own expiry).
    :ivar expires: ms after which a queue nobody consumes from is deleted, with what it holds.
    :ivar max_redeliveries: a subscription's redelivery limit (``-1`` for none).
    :ivar redelivery_delay: ms before the first redelivery after a NACK (0 for none).
    :ivar dead_letter: the ``/queue/`` where the queue's dead letters go.
    :ivar prefetch: a subscription's window when it asks for none.
    :ivar slow_consumer: what a topic subscriber's connection that falls behind
        gets (``block``, ``drop-oldest``, ``disconnect``), instead of ``--slow-consumer``.
    :ivar slow_consumer_buffer: bytes of topic messages kept for it, instead of
        ``--slow-consumer-buffer``.
    :ivar duplicate_window: ms a destination remembers a SEND's duplicate-detection
        id (:mod:`stompbroker.broker.features.duplicate_ids`).
    :ivar duplicate_window_ids: the most such ids it remembers; 0 turns detection off.
    """

    max_length: int | None = field(default=None, validator=_COUNT)
    max_length_bytes: int | None = field(default=None, validator=_COUNT)
    overflow: str = field(default="drop-head", validator=in_(OVERFLOWS))
    message_ttl: int | None = field(default=None, validator=_POSITIVE)
    expires: int | None = field(default=None, validator=_POSITIVE)
    max_redeliveries: int | None = field(default=None, validator=optional(ge(-1)))
    redelivery_delay: int | None = field(default=None, validator=_COUNT)
    dead_letter: str | None = field(default=None, validator=_dead_letter)
    prefetch: int | None = field(default=None, validator=_POSITIVE)
    slow_consumer: str | None = field(default=None, validator=optional(in_(SLOW_CONSUMER_POLICIES)))
    slow_consumer_buffer: int | None = field(default=None, validator=_POSITIVE)
    duplicate_window: int | None = field(default=None, validator=_POSITIVE)
    duplicate_window_ids: int | None = field(default=None, validator=_COUNT)

    @property
    def limits_queue(self) -> bool:
        """Whether a queue must check each message it takes in (a length limit or a TTL)."""
        return (
            self.max_length is not None
            or self.max_length_bytes is not None
            or self.message_ttl is not None
        )

    def delivery(self, defaults: DeliveryPolicy) -> DeliveryPolicy:
        """:returns: ``defaults`` with what this policy sets for subscriptions."""
        changes: dict[str, Any] = {}
        if self.prefetch is not None:
            changes["prefetch"] = self.prefetch
        if self.max_redeliveries is not None:
            changes["max_redeliveries"] = self.max_redeliveries
        if self.redelivery_delay is not None:
            changes["backoff"] = evolve(defaults.backoff, delay_ms=self.redelivery_delay)
        return evolve(defaults, **changes) if changes else defaults

    def as_dict(self) -> dict[str, Any]:
        """:returns: the settings it sets, under their configuration keys."""
        return {
            a.name.replace("_", "-"): getattr(self, a.name)
            for a in fields(PolicySettings)
            if getattr(self, a.name) is not None
            and not (a.name == "overflow" and not self._has_limit())
        }

    def _has_limit(self) -> bool:
        return self.max_length is not None or self.max_length_bytes is not None


@frozen
class Policy:
    """
    One named policy.

    :ivar name: how operators name it (``set-policy``, ``clear-policy``).
    :ivar pattern: destination names it applies to, wildcards allowed.
    :ivar priority: the highest priority among the policies matching a
        destination is the one in force.
    :ivar apply_to: ``queues``, ``topics`` or ``all``.
    :ivar settings: what it sets.
    :ivar vhost: the virtual host whose destinations it applies to.
    """

    name: str
    pattern: str
    priority: int = 0
    apply_to: str = field(default="all", validator=in_(APPLY_TO))
    settings: PolicySettings = PolicySettings()
    vhost: str = DEFAULT_VHOST

    def patterns(self) -> list[str]:
        """:returns: the full destination patterns it matches."""
        name = self.pattern.lstrip("/")
        return [prefix + name for prefix in _PREFIXES[self.apply_to]]

    def as_dict(self) -> dict[str, Any]:
        """:returns: the policy as the management API shows it."""
        return {
            "name": self.name,
            "pattern": self.pattern,
            "priority": self.priority,
            "apply-to": self.apply_to,
            "vhost": self.vhost,
            "definition": self.settings.as_dict(),
        }


_WHOLE_KEYS = {
    "max-length",
    "max-length-bytes",
    "message-ttl",
    "expires",
    "max-redeliveries",
    "redelivery-delay",
    "prefetch",
    "slow-consumer-buffer",
    "duplicate-window",
    "duplicate-window-ids",
}
_TEXT_KEYS = {"overflow", "dead-letter", "slow-consumer"}
#: Every key a policy's definition may hold.
SETTING_KEYS = tuple(sorted(_WHOLE_KEYS | _TEXT_KEYS))


def parse_policy(name: str, values: Mapping[str, Any]) -> Policy:
    """
    Make a policy from its keys, as the configuration file, the command line,
    the management API and the CLI give them (numbers as numbers or text).

    :param values: ``pattern`` (required), ``priority``, ``apply-to``, ``vhost``,
        and any of :data:`SETTING_KEYS`.
    :raises BadPolicy: naming the key that is wrong.
    """
    if not name or any(c in name for c in ":,/ "):
        raise BadPolicy(
            f"a policy's name must be non-empty, without ':', ',', '/' or spaces: {name!r}"
        )
    known = {"pattern", "priority", "apply-to", "vhost", *SETTING_KEYS}
    for key in values:
        if key not in known:
            raise BadPolicy(
                f"policy {name}: {key} is not a setting; the keys are {', '.join(sorted(known))}"
            )
    pattern = values.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise BadPolicy(
            f"policy {name}: pattern is required (a destination name, wildcards allowed)"
        )
    settings: dict[str, Any] = {}
    for key, value in values.items():
        if key in _WHOLE_KEYS:
            settings[key.replace("-", "_")] = _whole(name, key, value)
        elif key in _TEXT_KEYS:
            settings[key.replace("-", "_")] = str(value)
    try:
        policy = Policy(
            name,
            pattern,
            _whole(name, "priority", values.get("priority", 0)),
            str(values.get("apply-to", "all")),
            PolicySettings(**settings),
            str(values.get("vhost", DEFAULT_VHOST)),
        )
        for full in policy.patterns():
            validate_pattern(full)
        if policy.vhost != DEFAULT_VHOST:
            VirtualHost(policy.vhost)
    except (ValueError, InvalidDestination) as error:
        raise BadPolicy(f"policy {name}: {_reason(error)}") from None
    return policy


#: How attrs' number validators name a field: "'max_length' must be >= 0: -1".
_QUOTED_FIELD = re.compile(r"^'([a-z_]+)'")


def _reason(error: Exception) -> str:
    """
    :returns: what is wrong, in the words of a key: attrs' ``in_`` validator puts the
        field, its choices and the value in the error's arguments, whose ``str`` is a repr.
    """
    if len(error.args) == 4 and isinstance(error.args[1], Attribute):
        field, choices, value = error.args[1:]
        key = field.name.replace("_", "-")
        return f"{key} must be one of {', '.join(choices)}, got {value!r}"
    return _QUOTED_FIELD.sub(lambda found: found[1].replace("_", "-"), str(error))


def _whole(name: str, key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise BadPolicy(f"policy {name}: {key} takes a whole number, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise BadPolicy(f"policy {name}: {key} takes a whole number, got {value!r}") from None


class PolicySharing(Protocol):
    """Who tells other nodes of the policies an operator sets and clears here (the redis engine)."""

    def policy_set(self, policy: Policy) -> None: ...

    def policy_cleared(self, name: str) -> None: ...


class Policies:
    """
    The policies in force, and what each destination gets of them.

    :param defaults: the global delivery options, which a policy's settings override.
    :param policies: the policies to start with (the configuration's).
    """

    def __init__(
        self, defaults: DeliveryPolicy | None = None, policies: tuple[Policy, ...] = ()
    ) -> None:
        self.defaults = defaults if defaults is not None else DeliveryPolicy()
        self._by_name: dict[str, Policy] = {}
        self._tree: SubscriptionTree[Policy] = SubscriptionTree()
        self._resolved: dict[str, Policy | None] = {}
        self._delivery: dict[str, DeliveryPolicy] = {}
        self._watchers: list[Callable[[], None]] = []
        #: Who shares an operator's changes with other nodes, if anyone (:meth:`share`).
        self._sharing: PolicySharing | None = None
        for policy in policies:
            self._add(policy)

    def __bool__(self) -> bool:
        return bool(self._by_name)

    def listed(self) -> list[Policy]:
        """:returns: every policy, by name."""
        return [self._by_name[name] for name in sorted(self._by_name)]

    def get(self, name: str) -> Policy | None:
        """:returns: the policy of that name, or ``None``."""
        return self._by_name.get(name)

    def watch(self, changed: Callable[[], None]) -> None:
        """Call ``changed()`` after every change of the policies."""
        self._watchers.append(changed)

    def share(self, sharing: PolicySharing) -> None:
        """From now on, tell ``sharing`` of every :meth:`set` and :meth:`remove`."""
        self._sharing = sharing

    def set(self, policy: Policy, *, announce: bool = True) -> None:
        """
        Add a policy, or replace the one of the same name; then tell the watchers.

        :param announce: tell the other nodes (``False`` for a change that came from one).
        """
        self._drop(policy.name)
        self._add(policy)
        self._changed()
        if announce and self._sharing is not None:
            self._sharing.policy_set(policy)

    def remove(self, name: str, *, announce: bool = True) -> bool:
        """
        :param announce: tell the other nodes (``False`` for a change that came from one).
        :returns: whether a policy of that name was there (and is removed).
        """
        if not self._drop(name):
            return False
        self._changed()
        if announce and self._sharing is not None:
            self._sharing.policy_cleared(name)
        return True

    def replace_all(self, policies: list[Policy]) -> None:
        """Make ``policies`` the whole set (from another node); tell the watchers once."""
        for name in list(self._by_name):
            self._drop(name)
        for policy in policies:
            self._add(policy)
        self._changed()

    def policy_for(self, destination: str) -> Policy | None:
        """
        :param destination: the broker's name of a destination (a virtual host's
            holds its host: :mod:`stompbroker.broker.routing.virtual_hosts`).
        :returns: the policy in force on it: among its virtual host's policies
            whose pattern matches the name its clients send; or ``None``.
        """
        try:
            return self._resolved[destination]
        except KeyError:
            pass
        found = None
        if self._by_name:
            vhost = host_of(destination) or DEFAULT_VHOST
            matching = [
                policy
                for policy in self._tree.match(client_name(destination))
                if policy.vhost == vhost
            ]
            if matching:
                found = min(matching, key=lambda p: (-p.priority, p.name))
        if len(self._resolved) >= 10_000:
            self._resolved.clear()
        self._resolved[destination] = found
        return found

    def settings_for(self, destination: str) -> PolicySettings | None:
        """:returns: the settings in force on ``destination``, or ``None`` for the global ones."""
        policy = self.policy_for(destination)
        return None if policy is None else policy.settings

    def delivery(self, destination: str) -> DeliveryPolicy:
        """:returns: the delivery options a new subscription to ``destination`` gets."""
        found = self._delivery.get(destination)
        if found is None:
            settings = self.settings_for(destination)
            found = self.defaults if settings is None else settings.delivery(self.defaults)
            if len(self._delivery) >= 10_000:
                self._delivery.clear()
            self._delivery[destination] = found
        return found

    def slow_consumer(
        self, destinations: Iterable[str], policy: str, buffer: int
    ) -> tuple[str, int]:
        """
        The slow-consumer policy and buffer of a connection that has fallen
        behind (its backlog is one for all its subscriptions): the strictest of
        its topic subscriptions' (docs/policies.md).  Each subscription has its
        policy's ``slow-consumer`` and ``slow-consumer-buffer``, or the
        listener's where the policy sets none (or none is in force); the
        connection gets the smallest buffer, and on equal buffers ``disconnect``
        before ``drop-oldest`` before ``block``.

        :param destinations: the connection's subscriptions' destinations.
        :param policy: the listener's ``--slow-consumer``.
        :param buffer: the listener's ``--slow-consumer-buffer``.
        :returns: the policy and the buffer in bytes.
        """
        listener = (policy, buffer)
        if not self._by_name:
            return listener
        found: tuple[str, int] | None = None
        for destination in destinations:
            if not destination.startswith(_TOPIC_PREFIX):
                continue
            settings = self.settings_for(destination)
            pair = listener
            if settings is not None:
                pair = (
                    settings.slow_consumer or policy,
                    settings.slow_consumer_buffer or buffer,
                )
            if found is None or (pair[1], _STRICTEST[pair[0]]) < (found[1], _STRICTEST[found[0]]):
                found = pair
        return listener if found is None else found

    def _add(self, policy: Policy) -> None:
        self._by_name[policy.name] = policy
        for pattern in policy.patterns():
            self._tree.add(pattern, policy)

    def _drop(self, name: str) -> bool:
        policy = self._by_name.pop(name, None)
        if policy is None:
            return False
        for pattern in policy.patterns():
            self._tree.remove(pattern, policy)
        return True

    def _changed(self) -> None:
        self._resolved.clear()
        self._delivery.clear()
        for changed in list(self._watchers):
            changed()
