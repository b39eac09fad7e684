"""
Tests for :mod:`stompbroker.security.access`: rights of users, groups and anonymous clients
on destination patterns, wildcard coverage for SUBSCRIBE, the access file and reloads.

Coverage is checked twice: in tables of chosen cases, and by Hypothesis against a
brute-force reference that enumerates destinations (the reference matcher is the
one the subscription tree's own tests use).
"""

from __future__ import annotations

import functools
import itertools
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stompbroker.protocol.errors import AccessDenied, InvalidDestination, ProtocolError
from stompbroker.security.access import ADMIN, READ, WRITE, AccessPolicy
from stompbroker.security.access_file import (
    AccessControl,
    AccessFileError,
    load_policy,
    parse_policy,
)
from stompbroker.security.identity import ANONYMOUS_IDENTITY, Identity
from tests.strategies import SEGMENTS, patterns
from tests.support.wildcards import reference_regex

ACCESS = """
[anonymous]
read = ["/topic/public.#"]

[users.alice]
write = ["/queue/orders", "/topic/alice.*"]
admin = ["/queue/orders"]

[users.anonymous]
read = ["/topic/#"]

[groups.traders]
members = ["bob"]
read = ["/topic/prices.#", "/topic/news/*/eur"]
write = ["/topic/trades.*"]
"""

ALICE = Identity("alice")
BOB = Identity("bob")
CAROL = Identity("carol", {"traders"})
MALLORY = Identity("mallory", {"thieves"})


@pytest.fixture(scope="module")
def policy() -> AccessPolicy:
    return parse_policy(ACCESS, "access.toml")


@pytest.mark.parametrize(
    "identity, right, destination, allowed",
    [
        pytest.param(ALICE, WRITE, "/queue/orders", True, id="user-rule"),
        pytest.param(ALICE, WRITE, "queue.orders", True, id="other-spelling"),
        pytest.param(ALICE, READ, "/queue/orders", False, id="write-is-not-read"),
        pytest.param(ALICE, ADMIN, "/queue/orders", True, id="admin-rule"),
        pytest.param(ALICE, ADMIN, "/topic/alice.x", False, id="write-is-not-admin"),
        pytest.param(ALICE, WRITE, "/topic/alice.x", True, id="star-rule"),
        pytest.param(ALICE, WRITE, "/topic/alice", False, id="star-needs-a-segment"),
        pytest.param(ALICE, WRITE, "/topic/alice.x.y", False, id="star-is-one-segment"),
        pytest.param(BOB, READ, "/topic/prices", True, id="member-from-access-file-hash-zero"),
        pytest.param(BOB, READ, "/topic/prices/eur.spot", True, id="member-hash-many"),
        pytest.param(CAROL, READ, "/topic/prices.eur", True, id="group-from-identity"),
        pytest.param(CAROL, WRITE, "/topic/trades.eur", True, id="group-write"),
        pytest.param(CAROL, WRITE, "/queue/orders", False, id="other-user-s-rule"),
        pytest.param(MALLORY, READ, "/topic/prices.eur", False, id="other-group"),
        pytest.param(MALLORY, READ, "/topic/public", False, id="anonymous-rule-not-for-users"),
        pytest.param(ANONYMOUS_IDENTITY, READ, "/topic/public.news", True, id="anonymous-rule"),
        pytest.param(ANONYMOUS_IDENTITY, READ, "/topic/prices", False, id="anonymous-not-user"),
        pytest.param(ANONYMOUS_IDENTITY, WRITE, "/topic/public", False, id="anonymous-write"),
    ],
)
def test_rights_of_users_groups_and_anonymous(
    policy: AccessPolicy, identity: Identity, right: str, destination: str, allowed: bool
) -> None:
    """A right comes from a matching pattern in the user's, a group's or the anonymous table."""
    assert policy.allows(identity, right, destination) is allowed


def test_user_named_anonymous_is_not_an_anonymous_client(policy: AccessPolicy) -> None:
    """``[users.anonymous]`` is for a user of that name, not for clients that did not log in."""
    assert policy.allows(Identity("anonymous"), READ, "/topic/x")
    assert not policy.allows(ANONYMOUS_IDENTITY, READ, "/topic/x")


@pytest.mark.parametrize(
    "identity, pattern, allowed",
    [
        pytest.param(CAROL, "/topic/prices.#", True, id="same-pattern"),
        pytest.param(CAROL, "/topic/prices.>", True, id="same-pattern-other-spelling"),
        pytest.param(CAROL, "/topic/prices.*", True, id="hash-covers-star"),
        pytest.param(CAROL, "/topic/prices.*.spot.#", True, id="hash-covers-longer"),
        pytest.param(CAROL, "/topic/#", False, id="wider-than-rule"),
        pytest.param(CAROL, "/topic/*", False, id="star-wider-than-rule"),
        pytest.param(CAROL, "/topic/news/*/eur", True, id="star-covers-star"),
        pytest.param(CAROL, "/topic/news/uk/*", False, id="star-in-last-not-covered"),
        pytest.param(CAROL, "/topic/news/*/#", False, id="hash-not-covered-by-fixed"),
        pytest.param(ANONYMOUS_IDENTITY, "/topic/public.#", True, id="anonymous-covered"),
        pytest.param(ANONYMOUS_IDENTITY, "#", False, id="everything"),
    ],
)
def test_wildcard_subscription_needs_one_covering_rule(
    policy: AccessPolicy, identity: Identity, pattern: str, allowed: bool
) -> None:
    """A wildcard SUBSCRIBE passes only if one read rule matches every destination it does."""
    assert policy.allows(identity, READ, pattern) is allowed


def test_rules_do_not_add_up_to_cover_a_subscription() -> None:
    """Rules for ``a.x`` and ``a.y`` do not cover ``a.*``, which matches ``a.z``; ``#`` does."""
    split = parse_policy('[users.u]\nread = ["/topic/a.x", "/topic/a.y"]\n')
    assert not split.allows(Identity("u"), READ, "/topic/a.*")
    lengths = parse_policy('[users.u]\nread = ["*", "*.*"]\n')
    assert not lengths.allows(Identity("u"), READ, "#")
    everything = parse_policy('[users.u]\nread = ["#"]\n')
    assert everything.allows(Identity("u"), READ, "/topic/a.*")
    assert everything.allows(Identity("u"), READ, "#")


def test_denial_names_the_destination_and_the_missing_right(policy: AccessPolicy) -> None:
    """A refused frame raises AccessDenied, whose message names the destination and the right."""
    with pytest.raises(AccessDenied) as caught:
        policy.check(BOB, WRITE, "/queue/orders")
    error = caught.value
    assert isinstance(error, ProtocolError)
    assert (error.right, error.destination) == ("write", "/queue/orders")
    assert error.message == "access denied: no write right on '/queue/orders'"
    assert error.detail == (
        "user 'bob' may not send to '/queue/orders': the access file gives no write right on it."
    )
    with pytest.raises(AccessDenied) as caught:
        policy.check(ANONYMOUS_IDENTITY, READ, "/topic/#")
    assert caught.value.message == "access denied: no read right on '/topic/#'"
    assert caught.value.detail.startswith("an anonymous client may not subscribe to '/topic/#'")
    assert "one rule that covers all of it" in caught.value.detail


def test_long_destination_is_shortened_in_the_message(policy: AccessPolicy) -> None:
    """The ERROR ``message`` stays short for a long destination; the detail keeps it whole."""
    destination = "/queue/" + "x" * 500
    with pytest.raises(AccessDenied) as caught:
        policy.check(BOB, WRITE, destination)
    assert len(caught.value.message) < 120
    assert destination in caught.value.detail


def test_check_passes_quietly_when_allowed(policy: AccessPolicy) -> None:
    """``check`` returns None for an allowed frame."""
    assert policy.check(ALICE, WRITE, "/queue/orders") is None


def test_invalid_wildcard_pattern_is_an_invalid_destination(policy: AccessPolicy) -> None:
    """Checking a malformed wildcard SUBSCRIBE reports the pattern, as the broker would."""
    with pytest.raises(InvalidDestination):
        policy.allows(CAROL, READ, "/topic/#/x")


def test_without_an_access_file_everything_is_allowed() -> None:
    """A broker without ``--access`` allows every right on every destination to everyone."""
    control = AccessControl()
    for identity in (ALICE, ANONYMOUS_IDENTITY):
        for right in (READ, WRITE, ADMIN):
            control.check(identity, right, "/topic/#")
    assert control.reload() is control.policy


def test_unknown_right_is_a_programming_error(policy: AccessPolicy) -> None:
    """Asking for a right that does not exist fails loudly instead of denying or allowing."""
    with pytest.raises(KeyError):
        policy.allows(ALICE, "delete", "/queue/orders")
    with pytest.raises(ValueError, match="unknown right"):
        AccessPolicy({("user", "a"): {"delete": ["/a"]}})


# -- coverage against a brute-force reference ----------------------------------------


#: Every destination of 1 to 5 segments over the test alphabet and one segment no
#: pattern names: enough to tell apart any two patterns of up to four segments.
ALL_DESTINATIONS = [
    "/".join(segments)
    for length in range(1, 6)
    for segments in itertools.product([*SEGMENTS, "other"], repeat=length)
]


@functools.cache
def matched_by(regex: str) -> frozenset[str]:
    """:returns: the destinations of :data:`ALL_DESTINATIONS` that a reference regex matches."""
    compiled = re.compile(regex)
    return frozenset(d for d in ALL_DESTINATIONS if compiled.fullmatch(d))


@given(st.lists(patterns(), min_size=1, max_size=3), patterns())
def test_coverage_agrees_with_brute_force(rules: list[str], subscription: str) -> None:
    """A subscription is allowed exactly when one rule matches every destination it matches."""
    # Half of the rules are the user's, half their group's: rules never add up.
    policy = AccessPolicy({("user", "u"): {READ: rules[::2]}, ("group", "g"): {READ: rules[1::2]}})
    subscribed = matched_by(reference_regex(subscription))
    expected = any(subscribed <= matched_by(reference_regex(rule)) for rule in rules)
    assert policy.allows(Identity("u", {"g"}), READ, subscription) is expected


# -- the access file -------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        pytest.param("[users.alice\n", "access.toml:1: not valid TOML", id="toml-syntax"),
        pytest.param(
            "[users.alice]\nread = [\n", "access.toml:2: not valid TOML", id="toml-unfinished"
        ),
        pytest.param(
            "\n[everyone]\nread = []\n",
            "access.toml:2: everyone: unknown key; expected the tables anonymous, users, groups",
            id="unknown-table",
        ),
        pytest.param(
            '[users.alice]\nread = []\nraed = ["/a"]\n',
            "access.toml:3: users.alice.raed: unknown key; expected admin, read, write",
            id="typo-in-right",
        ),
        pytest.param(
            '[users.alice]\nmembers = ["bob"]\n',
            "access.toml:2: users.alice.members: unknown key",
            id="members-in-user",
        ),
        pytest.param(
            '[groups.ops]\nwrite = "/queue/a"\n',
            "access.toml:2: groups.ops.write: must be a list of strings, not a string",
            id="string-not-list",
        ),
        pytest.param(
            '[groups.ops]\n\nread = ["/a", 7]\n',
            "access.toml:3: groups.ops.read[1]: must be a string, not an integer",
            id="integer-in-list",
        ),
        pytest.param(
            '[groups.ops]\nmembers = "bob"\n',
            "access.toml:2: groups.ops.members: must be a list of strings",
            id="members-not-list",
        ),
        pytest.param(
            '[anonymous]\nread = ["/topic/a*"]\n',
            "access.toml:2: anonymous.read[0]: invalid pattern '/topic/a*'",
            id="partial-wildcard",
        ),
        pytest.param(
            '[users]\nalice = ["/a"]\n',
            "access.toml:2: users.alice: must be a table, not a list",
            id="user-not-table",
        ),
        pytest.param(
            'users = { alice = { read = ["/a//b"] } }\n',
            "access.toml:1: users.alice.read[0]: invalid pattern '/a//b'",
            id="inline-table",
        ),
    ],
)
def test_bad_access_file_is_refused_with_line_and_field(text: str, message: str) -> None:
    """A bad access file is refused whole, with the line and the dotted field of the mistake."""
    with pytest.raises(AccessFileError) as caught:
        parse_policy(text, "access.toml")
    assert str(caught.value).startswith(message)


def test_access_file_error_carries_line_and_field() -> None:
    """The error's attributes give the line and field separately, for tools."""
    with pytest.raises(AccessFileError) as caught:
        parse_policy('[users.alice]\nread = ["/a", 3]\n', "access.toml")
    error = caught.value
    assert (error.path, error.line, error.field) == ("access.toml", 2, "users.alice.read[1]")


def test_empty_access_file_denies_everything() -> None:
    """An access file with no rules denies every right: rules only ever grant."""
    policy = parse_policy("")
    assert not policy.allows(ALICE, READ, "/topic/a")
    assert not policy.allows(ANONYMOUS_IDENTITY, WRITE, "/topic/a")


def test_unreadable_access_file_is_an_access_file_error(tmp_path: Path) -> None:
    """A missing or non-UTF-8 file is reported by name."""
    with pytest.raises(AccessFileError, match="missing.toml: cannot read it"):
        load_policy(str(tmp_path / "missing.toml"))
    (tmp_path / "latin1.toml").write_bytes(b"# J\xf6rg\n")
    with pytest.raises(AccessFileError, match="not UTF-8"):
        AccessControl(str(tmp_path / "latin1.toml"))


def test_reload_applies_new_rules_to_the_same_holder(tmp_path: Path) -> None:
    """After a reload, the holder sessions keep checks the next frame against the new rules."""
    path = tmp_path / "access.toml"
    path.write_text('[users.alice]\nwrite = ["/queue/a"]\n', encoding="utf-8")
    control = AccessControl(str(path))
    control.check(ALICE, WRITE, "/queue/a")
    path.write_text('[users.alice]\nwrite = ["/queue/b"]\n', encoding="utf-8")
    control.check(ALICE, WRITE, "/queue/a")  # nothing changes until the reload
    control.reload()
    control.check(ALICE, WRITE, "/queue/b")
    with pytest.raises(AccessDenied):
        control.check(ALICE, WRITE, "/queue/a")


def test_failed_reload_keeps_the_rules_in_force(tmp_path: Path) -> None:
    """A reload of a broken file raises AccessFileError and leaves the previous rules in force."""
    path = tmp_path / "access.toml"
    path.write_text('[users.alice]\nwrite = ["/queue/a"]\n', encoding="utf-8")
    control = AccessControl(str(path))
    before = control.policy
    path.write_text('[users.alice]\nwrite = ["/queue/a*"]\n', encoding="utf-8")
    with pytest.raises(AccessFileError, match="access.toml:2: users.alice.write"):
        control.reload()
    assert control.policy is before
    control.check(ALICE, WRITE, "/queue/a")
