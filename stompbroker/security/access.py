"""
What a client may do where: rights on destination patterns, read from a TOML access file.

Pure code, no Twisted: the session asks :meth:`AccessControl.check` before it
hands a SEND or SUBSCRIBE to the broker, so a refused frame never reaches the
broker and nothing is published or delivered for it.

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

import re
import tomllib
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from stompbroker.broker.features.user_destinations import FLAVOURS, USER_PREFIX, send_login
from stompbroker.broker.routing.syntax import TRAILING_SEGMENTS, is_wildcard, validate_pattern
from stompbroker.broker.routing.topic_tree import SubscriptionTree
from stompbroker.protocol.errors import AccessDenied, InvalidDestination

if TYPE_CHECKING:
    from stompbroker.security.identity import Identity

__all__ = [
    "ADMIN",
    "READ",
    "RIGHTS",
    "WRITE",
    "AccessControl",
    "AccessFileError",
    "AccessPolicy",
    "Grants",
    "denial",
    "load_policy",
    "parse_policy",
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
_ANONYMOUS: Principal = ("anonymous", "")

#: Where tomllib puts the position in its error messages.
_TOML_POSITION = re.compile(r"\(at line (\d+), column \d+\)|\(at end of document\)")


class AccessFileError(ValueError):
    """
    An access file cannot be read, is not TOML, or says something this module does not know.

    :param path: the file, or ``<string>`` for parsed text.
    :param reason: what is wrong.
    :param line: the 1-based line, when it can be told.
    :param field: the dotted path of the offending value, e.g. ``users.alice.read[1]``.
    """

    def __init__(
        self, path: str, reason: str, line: int | None = None, field: str | None = None
    ) -> None:
        where = path if line is None else f"{path}:{line}"
        if field is not None:
            where = f"{where}: {field}"
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.reason = reason
        self.line = line
        self.field = field


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
            return frozenset({_ANONYMOUS})
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


# -- the access file ---------------------------------------------------------------

_RIGHT_KEYS = frozenset(RIGHTS)
_GROUP_KEYS = _RIGHT_KEYS | {"members"}
_TOP_KEYS = ("anonymous", "users", "groups")


class _Reader:
    """Turns a parsed access file into rules, with errors that say where."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def error(
        self, reason: str, table: list[str], key: str | None = None, index: int | None = None
    ) -> AccessFileError:
        parts = table + ([key] if key is not None else [])
        field = ".".join(parts) + (f"[{index}]" if index is not None else "")
        return AccessFileError(self.path, reason, self._line_of(parts), field)

    def _line_of(self, parts: list[str]) -> int | None:
        """
        Find where a dotted key is written, for error messages.

        Best effort: the deepest ``[a.b]`` header that leads to it, then the
        first line in that section that starts with the next key; a key written
        inside an inline table points to the line of its table.
        """
        headers: dict[str, int] = {}
        for number, line in enumerate(self.lines, start=1):
            text = line.split("#")[0].replace(" ", "").replace('"', "").replace("'", "")
            if text.startswith("[") and text.endswith("]"):
                headers.setdefault(text.strip("[]"), number)
        for depth in range(len(parts), -1, -1):
            if depth == 0:
                start = 0
            elif ".".join(parts[:depth]) in headers:
                start = headers[".".join(parts[:depth])]
            else:
                continue
            if depth == len(parts):
                return start
            for number, line in enumerate(self.lines[start:], start=start + 1):
                stripped = line.strip()
                if stripped.startswith("["):
                    break
                if re.match(rf"[\"']?{re.escape(parts[depth])}[\"']?\s*[=.]", stripped):
                    return number
            return start or None
        return None

    def table(self, value: Any, path: list[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(f"must be a table, not {_kind(value)}", path)
        return value

    def strings(self, value: Any, table: list[str], key: str) -> list[str]:
        if not isinstance(value, list):
            raise self.error(f"must be a list of strings, not {_kind(value)}", table, key)
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise self.error(f"must be a string, not {_kind(item)}", table, key, index)
        return value

    def rights(self, value: Any, table: list[str], allowed: frozenset[str]) -> dict[str, list[str]]:
        entries = self.table(value, table)
        for key in entries:
            if key not in allowed:
                raise self.error(f"unknown key; expected {', '.join(sorted(allowed))}", table, key)
        rights = {}
        for right in RIGHTS:
            if right not in entries:
                continue
            patterns = self.strings(entries[right], table, right)
            for index, pattern in enumerate(patterns):
                try:
                    validate_pattern(pattern)
                except InvalidDestination as error:
                    raise self.error(
                        f"invalid pattern {pattern!r}: {error.detail}", table, right, index
                    ) from None
            rights[right] = patterns
        return rights

    def policy(self, document: dict[str, Any]) -> AccessPolicy:
        for key in document:
            if key not in _TOP_KEYS:
                raise self.error(f"unknown key; expected the tables {', '.join(_TOP_KEYS)}", [key])
        rules: dict[Principal, dict[str, list[str]]] = {}
        members: dict[str, list[str]] = {}
        if "anonymous" in document:
            rules[_ANONYMOUS] = self.rights(document["anonymous"], ["anonymous"], _RIGHT_KEYS)
        for name, value in self.table(document.get("users", {}), ["users"]).items():
            rules[("user", name)] = self.rights(value, ["users", name], _RIGHT_KEYS)
        for name, value in self.table(document.get("groups", {}), ["groups"]).items():
            rules[("group", name)] = self.rights(value, ["groups", name], _GROUP_KEYS)
            if "members" in value:
                members[name] = self.strings(value["members"], ["groups", name], "members")
        return AccessPolicy(rules, members)


_KINDS = {dict: "a table", list: "a list", str: "a string", bool: "a boolean", int: "an integer"}


def _kind(value: Any) -> str:
    """:returns: how the error messages name the TOML type of ``value``."""
    return _KINDS.get(type(value), "a number or date")


def parse_policy(text: str, path: str = "<string>") -> AccessPolicy:
    """
    Read the rules of an access file (see the module docstring).

    :param text: the file's content.
    :param path: the name used in error messages.
    :raises AccessFileError: if the text is not TOML, holds an unknown table or
        key, a value of the wrong type, or an invalid pattern.
    """
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        message = str(error)
        position = _TOML_POSITION.search(message)
        line = None
        if position is not None:
            line = int(position.group(1)) if position.group(1) else len(text.splitlines()) or 1
            message = message[: position.start()].rstrip()
        raise AccessFileError(path, f"not valid TOML: {message}", line) from None
    return _Reader(path, text).policy(document)


def load_policy(path: str) -> AccessPolicy:
    """
    Read an access file.

    :raises AccessFileError: if it cannot be read, or is invalid.
    """
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except OSError as error:
        raise AccessFileError(path, f"cannot read it: {error.strerror}") from None
    except UnicodeDecodeError:
        raise AccessFileError(path, "it is not UTF-8 text") from None
    return parse_policy(text, path)


class AccessControl:
    """
    The policy in force, which a reload replaces for every connection at once.

    Sessions hold this object, not a policy, and call :meth:`check` on every
    SEND and SUBSCRIBE, so that a reloaded file (on SIGHUP) applies to connected
    clients from their next frame.

    :param path: the access file, or ``None`` to allow everything.
    :raises AccessFileError: if the file cannot be read or is invalid.
    """

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self.policy = load_policy(path) if path is not None else AccessPolicy.everything_allowed()

    def check(self, identity: Identity, right: str, destination: str) -> None:
        """
        :raises AccessDenied: if the current policy refuses (see :meth:`AccessPolicy.check`).
        :raises InvalidDestination: for an invalid wildcard pattern.
        """
        self.policy.check(identity, right, destination)

    def reload(self) -> AccessPolicy:
        """
        Read the access file again; without a file, nothing changes.

        :returns: the policy now in force.
        :raises AccessFileError: if the file cannot be read or is invalid; the
            previous policy then stays in force.
        """
        if self.path is not None:
            self.policy = load_policy(self.path)
        return self.policy
