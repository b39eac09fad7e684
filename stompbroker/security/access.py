"""
What a client may do where: rights on destination patterns, read from a TOML access file.

Pure code, no Twisted: the session asks
:meth:`~stompbroker.security.access_file.AccessControl.check` before it hands a
SEND or SUBSCRIBE to the broker, so a refused frame never reaches the broker and
nothing is published or delivered for it.  Reading the file, and the policy in
force that a reload replaces, are :mod:`stompbroker.security.access_file`'s.

Access file
-----------
::

    [anonymous]                      # clients that did not log in
    read = ["/topic/public.#"]

    [users.alice]
    write = ["/queue/orders"]

    [groups.traders]
    members = ["bob"]                # besides those the password file puts in it
    read = ["/topic/prices.#"]
    write = ["/topic/trades.*"]
    admin = []

``read`` is needed to SUBSCRIBE, ``write`` to SEND, ``admin`` for the management
API's changes (see :mod:`stompbroker.web.api_guard`); no right implies another.
A pattern uses the wildcards of subscriptions (``*`` one segment, ``#`` or ``>``
any trailing segments, ``/`` and ``.`` both separate segments).  An identity has a right on a
destination if a pattern under that right matches it in the identity's user
table, in the table of one of its groups, or, for an anonymous client, in
``[anonymous]`` (and only there, so a user named "anonymous" is not one).
Everything else is denied; without an access file everything is allowed.

An identity that carries its own rights (a token login: its scopes, as
:class:`Grants` in ``Identity.granted``) has those and no others: the access
file is not consulted for it, and neither is ``allow_all``.  Other identities
pay one attribute read for this.

A SUBSCRIBE with wildcards reads every destination its pattern matches, so it
needs ``read`` on all of them: one rule of the identity must *cover* the
subscription pattern, matching every destination the pattern matches.
``/topic/prices.#`` covers ``/topic/prices.*.spot``; ``/topic/prices.eur`` and
``/topic/prices.usd`` together do not cover ``/topic/prices.*``, since no single
rule does.  Checking delivery by delivery instead would put work on the hot path.

User destinations (:mod:`stompbroker.broker.features.user_destinations`) need
no rule for what is the identity's own: SUBSCRIBE to ``/user/queue/NAME`` (or
``/user/topic/NAME``) is always allowed, since the broker maps it onto the
subscriber's own user and refuses anonymous sessions; and a user may always
SEND to ``/user/SELF/...`` (another tab of its own).  A SEND to another user's
``/user/LOGIN/...`` needs ``write`` on it, as any destination: for the
application's backend, ``write = ["/user/#"]``.

Theory of operation
-------------------
Each right's patterns live in a :class:`~stompbroker.broker.routing.topic_tree.SubscriptionTree`
whose "subscribers" are rules: a principal (``("user", name)``, ``("group",
name)``, ``("anonymous", "")``) with one of its patterns.  Matching is thus the
broker's own code, with its per-destination cache, and a check is one cached
match and a scan of the few rules it returns.  Coverage reuses the tree too: a
wildcard-free destination
whose segment is ``*`` or ``#`` is, to the tree, a literal that no literal rule
segment can equal (those characters are reserved), so only rule wildcards match
it.  Hence a rule covers ``a/*/b`` if and only if it matches the destination
``a/*/b``; and it covers ``a/#`` if and only if it matches both ``a`` and
``a/#``, because a rule that matches destinations of two lengths must end with
``#`` and then matches every extension of the shorter one.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from stompbroker.broker.features.user_destinations import FLAVOURS, USER_PREFIX, send_login
from stompbroker.broker.routing.syntax import TRAILING_SEGMENTS, is_wildcard, validate_pattern
from stompbroker.broker.routing.topic_tree import SubscriptionTree
from stompbroker.protocol.errors import AccessDenied

if TYPE_CHECKING:
    from stompbroker.security.identity import Identity

__all__ = [
    "ADMIN",
    "ANONYMOUS",
    "READ",
    "RIGHTS",
    "WRITE",
    "AccessPolicy",
    "Grants",
    "Principal",
    "denial",
]

READ = "read"
WRITE = "write"
ADMIN = "admin"
#: The rights, in the order the access file documents them.
RIGHTS = (READ, WRITE, ADMIN)

_ACTIONS = {READ: "subscribe to", WRITE: "send to", ADMIN: "administer"}

Principal = tuple[str, str]
#: One pattern under one right of one principal: what the trees hold.
Rule = tuple[Principal, str]
ANONYMOUS: Principal = ("anonymous", "")


class AccessPolicy:
    """
    Immutable rules: which principals have which right on which patterns.

    :param rules: principal -> right -> patterns.
    :param members: group -> user names the access file puts in it.
    :param allow_all: if ``True``, every check passes and ``rules`` are ignored.
    :raises InvalidDestination: for an invalid pattern.
    :raises ValueError: for an unknown right.
    """

    def __init__(
        self,
        rules: Mapping[Principal, Mapping[str, Iterable[str]]],
        members: Mapping[str, Iterable[str]] | None = None,
        *,
        allow_all: bool = False,
    ) -> None:
        self.allow_all = allow_all
        self._trees: dict[str, SubscriptionTree[Rule]] = {
            right: SubscriptionTree() for right in RIGHTS
        }
        for principal, rights in rules.items():
            for right, patterns in rights.items():
                if right not in self._trees:
                    raise ValueError(f"unknown right {right!r}; the rights are {RIGHTS}")
                for pattern in patterns:
                    self._trees[right].add(pattern, (principal, pattern))
        self._groups_of_user: dict[str, set[str]] = {}
        for group, users in (members or {}).items():
            for user in users:
                self._groups_of_user.setdefault(user, set()).add(group)

    @classmethod
    def everything_allowed(cls) -> AccessPolicy:
        """:returns: the policy of a broker without an access file."""
        return cls({}, allow_all=True)

    def principals(self, identity: Identity) -> frozenset[Principal]:
        """:returns: whom the rules may name to grant ``identity`` a right."""
        if identity.anonymous:
            return frozenset({ANONYMOUS})
        groups = identity.groups.union(self._groups_of_user.get(identity.name, ()))
        return frozenset([("user", identity.name), *(("group", group) for group in groups)])

    def allows(self, identity: Identity, right: str, destination: str) -> bool:
        """
        :param right: ``read``, ``write`` or ``admin``.
        :param destination: a destination, or a subscription pattern with wildcards.
        :returns: ``True`` if ``identity`` has ``right`` on all of ``destination``.
        :raises InvalidDestination: for an invalid wildcard pattern.
        :raises KeyError: for an unknown right.
        """
        if destination.startswith(USER_PREFIX) and own_user_destination(
            identity, right, destination
        ):
            return True
        carried: Grants | None = identity.granted
        if carried is not None:
            # A token's scopes are all its holder may do, whatever the file says.
            return carried.allows(right, destination)
        if self.allow_all:
            return True
        granted = _granting(self._trees[right], destination)
        principals = self.principals(identity)
        return any(principal in principals for principal, _ in granted)

    def check(self, identity: Identity, right: str, destination: str) -> None:
        """
        Refuse a frame that needs a right the identity lacks.

        :raises AccessDenied: naming the destination and the missing right.
        :raises InvalidDestination: for an invalid wildcard pattern.
        """
        if destination.startswith(USER_PREFIX) and own_user_destination(
            identity, right, destination
        ):
            return
        carried = identity.granted
        if carried is not None:
            # The identity's own rights decide, and say why they refuse.
            carried.check(identity, right, destination)
            return
        if self.allows(identity, right, destination):
            return
        raise denial(identity, right, destination, "the access file gives")


def own_user_destination(identity: Identity, right: str, destination: str) -> bool:
    """
    :param destination: one that starts with ``/user/``.
    :returns: whether it is ``identity``'s own user destination, which needs no
        rule (see the module notes): any SUBSCRIBE to ``/user/queue/...`` or
        ``/user/topic/...``, and a logged-in user's SEND to its own login.
    """
    if right == READ:
        return destination[len(USER_PREFIX) :].startswith(FLAVOURS)
    return right == WRITE and not identity.anonymous and send_login(destination) == identity.name


def denial(identity: Identity, right: str, destination: str, source: str) -> AccessDenied:
    """
    :param source: what gives no right, as the ERROR body says it: ``the access file gives``.
    :returns: the refusal of ``right`` on ``destination`` to ``identity``.
    """
    who = "an anonymous client" if identity.anonymous else f"user {identity.name!r}"
    detail = f"{who} may not {_ACTIONS[right]} {destination!r}: {source} no {right} right on it"
    if right == READ and is_wildcard(destination):
        detail += ", and a wildcard subscription needs one rule that covers all of it"
    return AccessDenied(right, destination, detail + ".")


class Grants:
    """
    The rights an identity carries itself, such as a token's scopes: patterns per
    right, checked as the access file's are (a wildcard subscription needs one
    pattern that covers it), in place of the access file.

    :param rights: right -> patterns; a right not named is not granted.
    :param source: what gave them, as a refusal says it.
    :raises InvalidDestination: for an invalid pattern.
    :raises ValueError: for an unknown right.
    """

    __slots__ = ("rights", "source", "_trees")

    def __init__(
        self, rights: Mapping[str, Iterable[str]], source: str = "the token's scopes give"
    ) -> None:
        self.source = source
        self.rights = {right: tuple(patterns) for right, patterns in rights.items()}
        self._trees: dict[str, SubscriptionTree[str]] = {
            right: SubscriptionTree(max_cache_size=_GRANTS_CACHE) for right in RIGHTS
        }
        for right, patterns in self.rights.items():
            if right not in self._trees:
                raise ValueError(f"unknown right {right!r}; the rights are {RIGHTS}")
            for pattern in patterns:
                self._trees[right].add(pattern, pattern)

    def allows(self, right: str, destination: str) -> bool:
        """
        :returns: ``True`` if ``right`` is granted on all of ``destination``.
        :raises InvalidDestination: for an invalid wildcard pattern.
        """
        return bool(_granting(self._trees[right], destination))

    def check(self, identity: Identity, right: str, destination: str) -> None:
        """
        :param identity: who carries these grants, for the refusal's text.
        :raises AccessDenied: if ``right`` is not granted on all of ``destination``.
        :raises InvalidDestination: for an invalid wildcard pattern.
        """
        if not self.allows(right, destination):
            raise denial(identity, right, destination, self.source)

    def __repr__(self) -> str:
        return f"Grants({self.rights!r})"


#: Destinations whose matches one identity's grants remember: a connection uses few.
_GRANTS_CACHE = 256


def _granting(tree: SubscriptionTree[Any], destination: str) -> Collection[Any]:
    """
    :returns: the rules in ``tree`` that grant a right on all of ``destination``:
        those that match it, or for a wildcard pattern, those that cover it.
    :raises InvalidDestination: for an invalid wildcard pattern.
    """
    if is_wildcard(destination):
        return _covering(tree, destination)
    return tree.match(destination)


def _covering(tree: SubscriptionTree[Any], pattern: str) -> set[Any]:
    """
    :param pattern: a subscription pattern with wildcards.
    :returns: the rules in ``tree`` that each match every destination
        ``pattern`` matches (see the module docstring).
    :raises InvalidDestination: if ``pattern`` is not a valid pattern.
    """
    validate_pattern(pattern)
    if pattern[-1] not in TRAILING_SEGMENTS:
        return set(tree.match(pattern))
    prefix = pattern[:-1].rstrip("/.")
    if prefix:
        shortest, longer = prefix, prefix + "/#"
    else:
        # A lone "#" matches every destination, which has one segment at least.
        shortest, longer = "#", "#/#"
    return set(tree.match(shortest)).intersection(tree.match(longer))
