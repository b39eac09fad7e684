"""
Tests of ``--auth jwt``: the token checker, its keys, its options and the scopes
it maps to rights, without sockets.

Tokens are made with PyJWT from keys generated here; time is a ``task.Clock``
set to :data:`~tests.support.tokens.NOW` (the ``clock`` fixture of this
package's conftest), which the checker reads instead of the system clock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from twisted.cred import strcred
from twisted.cred.credentials import UsernamePassword
from twisted.cred.error import UnauthorizedLogin
from twisted.internet.task import Clock

from stompbroker.protocol.errors import AccessDenied, LoginFailed
from stompbroker.protocol.login import LoginRefused
from stompbroker.security.access import Grants
from stompbroker.security.access_file import AccessControl, parse_policy
from stompbroker.security.credentials import BearerToken, InvalidCredentials
from stompbroker.security.identity import Identity, IIdentity
from stompbroker.security.portal import authenticate, make_portal
from stompbroker.security.tokens import (
    TokenChecker,
    grants_from_scopes,
    make_checker,
    parse_options,
)
from tests.support.tokens import (
    AUDIENCE,
    ISSUER,
    NOW,
    SECRET,
    ec_key,
    hmac_with_public_key_token,
    jwk,
    make_token,
    rsa_key,
    unsigned_token,
    write_jwks,
    write_public_pem,
)


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    return write_public_pem(tmp_path / "key.pem", rsa_key())


@pytest.fixture
def checker(key_file: Path, clock: Clock) -> TokenChecker:
    """A checker of RS256 tokens for audience ``stompbroker`` from the test issuer."""
    return make_checker(f"key={key_file}:audience={AUDIENCE}:issuer={ISSUER}", clock=clock)


def refusal(checker: TokenChecker, token: str) -> InvalidCredentials:
    with pytest.raises(InvalidCredentials) as caught:
        checker.verify(token)
    return caught.value


# -- valid tokens --------------------------------------------------------------------


def test_valid_token_gives_the_subject_its_scopes_and_expiry(checker: TokenChecker) -> None:
    """A valid token logs in its ``sub``, with the token's exp and its scopes as rights."""
    identity = checker.verify(make_token(NOW))
    assert (identity.name, identity.expires, identity.anonymous) == ("alice", NOW + 3600, False)
    assert identity.granted.rights == {
        "read": ("/topic/prices.#",),
        "write": ("/topic/prices.eur",),
        "admin": (),
    }


def test_the_info_claim_is_the_users_presence_data(checker: TokenChecker) -> None:
    """An ``info`` claim (Centrifugo's) is what presence shows of the user; none: ``None``."""
    assert checker.verify(make_token(NOW, info={"name": "Alice"})).info == {"name": "Alice"}
    assert checker.verify(make_token(NOW)).info is None


def test_ec_key_from_a_key_set_chosen_by_kid(tmp_path: Path, clock: Clock) -> None:
    """With jwks=, the token's kid chooses the key: RS256 and ES256 tokens both verify."""
    keys = write_jwks(tmp_path / "jwks.json", jwk(rsa_key(), "r1"), jwk(ec_key(), "e1", "ES256"))
    checker = make_checker(f"jwks={keys}:audience={AUDIENCE}", clock=clock)
    assert checker.verify(make_token(NOW, kid="r1")).name == "alice"
    token = make_token(NOW, ec_key(), "ES256", kid="e1", sub="bob")
    assert checker.verify(token).name == "bob"


def test_hs256_with_a_secret_file(tmp_path: Path, clock: Clock) -> None:
    """With secret=, HS256 tokens signed with the file's bytes verify (its line end aside)."""
    (tmp_path / "secret").write_bytes(SECRET + b"\n")
    checker = make_checker(f"secret={tmp_path / 'secret'}:audience={AUDIENCE}", clock=clock)
    assert checker.verify(make_token(NOW, SECRET, "HS256")).name == "alice"


def test_issuer_is_optional(key_file: Path, clock: Clock) -> None:
    """Without issuer=, any iss is accepted; the audience is still checked."""
    checker = make_checker(f"key={key_file}:audience={AUDIENCE}", clock=clock)
    assert checker.verify(make_token(NOW, iss="https://elsewhere")).name == "alice"


def test_leeway_allows_clock_skew(key_file: Path, clock: Clock) -> None:
    """leeway= lets a token that expired a few seconds ago in, and no older one."""
    checker = make_checker(f"key={key_file}:audience={AUDIENCE}:leeway=30", clock=clock)
    assert checker.verify(make_token(NOW, exp=int(NOW) - 20)).name == "alice"
    assert refusal(checker, make_token(NOW, exp=int(NOW) - 40)).reason == "token expired"


def test_audience_may_be_one_of_several(checker: TokenChecker) -> None:
    """RFC 7519, 4.1.3: aud may be a list; ours must be in it."""
    assert checker.verify(make_token(NOW, aud=["other", AUDIENCE])).name == "alice"


# -- bad tokens: each refused with its reason ----------------------------------------------


@pytest.mark.parametrize(
    ("make", "reason", "detail"),
    [
        (lambda: make_token(NOW, exp=int(NOW) - 1), "token expired", "expired at 2023-11-14"),
        (lambda: make_token(NOW, nbf=int(NOW) + 60), "token not yet valid", "valid from"),
        (lambda: make_token(NOW, aud="someone-else"), "wrong audience", "'stompbroker'"),
        (lambda: make_token(NOW, iss="https://evil.example"), "wrong issuer", ISSUER),
        (lambda: make_token(NOW, rsa_key("other")), "bad signature", "does not verify"),
        (lambda: unsigned_token(NOW), "unsigned token", "alg none"),
        (lambda: make_token(NOW, exp=None), "no exp claim", "'exp'"),
        (lambda: make_token(NOW, sub=None), "no sub claim", "'sub'"),
        (lambda: make_token(NOW, exp="tomorrow"), "invalid exp claim", "number"),
        (lambda: make_token(NOW, scope="stompbroker.read:/topic/a*"), "invalid scope", "a*"),
        (lambda: make_token(NOW, ec_key(), "ES256"), "algorithm not allowed", "'ES256'"),
        (lambda: "eyJub3QiOiJqc29u.eyJhIjoxfQ.c2ln", "malformed token", "cannot be read"),
        (lambda: make_token(NOW, info=["alice"]), "invalid info claim", "JSON object"),
    ],
)
def test_bad_token_is_refused_with_its_reason(
    checker: TokenChecker, make: Any, reason: str, detail: str
) -> None:
    """Every kind of bad token is refused, and the refusal says which kind, never the token."""
    token = make()
    refused = refusal(checker, token)
    assert refused.reason == reason
    assert detail in refused.detail
    assert token not in refused.detail


def test_hmac_signed_with_the_public_key_is_refused(checker: TokenChecker, key_file: Path) -> None:
    """Algorithm confusion: an HS256 token keyed with the RSA public key does not get in."""
    token = hmac_with_public_key_token(NOW, key_file.read_bytes())
    assert refusal(checker, token).reason == "algorithm not allowed"


def test_unknown_kid_and_missing_kid_in_a_key_set(tmp_path: Path, clock: Clock) -> None:
    """A kid the set lacks is refused; so is no kid when the set has several keys."""
    keys = write_jwks(tmp_path / "jwks.json", jwk(rsa_key(), "r1"), jwk(ec_key(), "e1"))
    checker = make_checker(f"jwks={keys}:audience={AUDIENCE}", clock=clock)
    unknown = refusal(checker, make_token(NOW, kid="r2"))
    assert (unknown.reason, unknown.detail) == (
        "unknown key id",
        "the token names the key 'r2', which is not among the broker's keys",
    )
    assert refusal(checker, make_token(NOW)).reason == "no key id"


def test_algorithms_option_narrows_the_keys_algorithms(key_file: Path, clock: Clock) -> None:
    """algorithms=PS256 refuses an RS256 token signed by the right key."""
    checker = make_checker(f"key={key_file}:audience={AUDIENCE}:algorithms=PS256", clock=clock)
    assert checker.verify(make_token(NOW, algorithm="PS256")).name == "alice"
    assert refusal(checker, make_token(NOW)).reason == "algorithm not allowed"


def test_a_password_is_left_to_the_next_checker(checker: TokenChecker) -> None:
    """A passcode that is not shaped like a JWT is refused silently: it is a password."""
    failure = checker.requestAvatarId(UsernamePassword(b"alice", b"wonderland"))
    caught = []
    failure.addErrback(caught.append)
    [error] = caught
    assert error.type is UnauthorizedLogin


# -- scopes ----------------------------------------------------------------------------


def test_scopes_map_to_rights_as_documented() -> None:
    """docs/security.md's mapping: rights with or without a pattern, tags, others ignored."""
    grants = grants_from_scopes(
        [
            "stompbroker.read:/topic/prices.#",
            "stompbroker.write:/queue/*",
            "stompbroker.admin",
            "stompbroker.tag:administrator",
            "stompbroker.tag:monitoring",
            "stompbroker.configure:*/*",
            "rabbitmq.read:*/*",
            "openid",
        ],
        "stompbroker.",
    )
    assert grants.rights == {
        "read": ("/topic/prices.#",),
        "write": ("/queue/*",),
        "admin": ("#", "#"),
    }


def test_scope_claim_may_be_a_list_and_scp_counts(checker: TokenChecker) -> None:
    """scope as a list, and scp (Azure, Okta), both give rights."""
    token = make_token(NOW, scope=["stompbroker.read:/topic/a"], scp="stompbroker.write:/topic/b")
    rights = checker.verify(token).granted.rights
    assert (rights["read"], rights["write"]) == (("/topic/a",), ("/topic/b",))


def test_prefix_defaults_to_the_audience_and_can_be_set(key_file: Path, clock: Clock) -> None:
    """As RabbitMQ's scope_prefix: the audience and a dot, unless prefix= says otherwise."""
    token = make_token(NOW, scope="broker/read:/topic/a stompbroker.read:/topic/b")
    default = make_checker(f"key={key_file}:audience={AUDIENCE}", clock=clock)
    assert default.verify(token).granted.rights["read"] == ("/topic/b",)
    custom = make_checker(f"key={key_file}:audience={AUDIENCE}:prefix=broker/", clock=clock)
    assert custom.verify(token).granted.rights["read"] == ("/topic/a",)


def test_grants_cover_wildcard_subscriptions_as_the_access_file_does() -> None:
    """A wildcard subscription needs one pattern that covers it, as with the access file."""
    grants = Grants({"read": ["/topic/prices.#"]})
    assert grants.allows("read", "/topic/prices.eur.spot")
    assert grants.allows("read", "/topic/prices.*")
    assert not grants.allows("read", "/topic/#")
    assert not grants.allows("write", "/topic/prices.eur")


def test_token_rights_replace_the_access_file() -> None:
    """The access file is not consulted for a token identity: its scopes are all it may do."""
    policy = parse_policy('[users.alice]\nwrite = ["/topic/#"]\n')
    token_alice = Identity("alice", granted=Grants({"write": ["/topic/a"]}), expires=NOW)
    assert policy.allows(Identity("alice"), "write", "/topic/b")
    assert not policy.allows(token_alice, "write", "/topic/b")
    assert policy.allows(token_alice, "write", "/topic/a")
    with pytest.raises(AccessDenied) as denied:
        AccessControl().check(token_alice, "write", "/topic/b")
    assert "the token's scopes give no write right" in denied.value.detail


# -- options ---------------------------------------------------------------------------


def test_options_split_on_known_names_only() -> None:
    """A colon starts an option only before a known name and '=', so URLs need no escaping."""
    assert parse_options(f"jwks=/etc/k.json:audience=api://broker:issuer={ISSUER}") == {
        "jwks": "/etc/k.json",
        "audience": "api://broker",
        "issuer": ISSUER,
    }


@pytest.mark.parametrize(
    ("argstring", "message"),
    [
        ("", "exactly one of key=FILE, jwks=FILE and secret=FILE"),
        ("key=a:jwks=b:audience=x", "exactly one of"),
        ("key=a", "jwt needs audience=AUD"),
        ("key=a:audience=x:audince=y", "unknown option 'audince'"),
        ("kee=a:audience=x", "unknown option 'kee'"),
        ("key=a:audience=x:audience=y", "audience is given twice"),
        ("key=:audience=x", "key needs a value"),
    ],
)
def test_bad_options_are_refused(argstring: str, message: str) -> None:
    """Each mistake in --auth jwt:... is a ValueError that says what is wrong."""
    with pytest.raises(ValueError, match=message):
        parse_options(argstring)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (":algorithms=none", "unsigned tokens"),
        (":leeway=soon", "leeway must be 0 to 3600"),
        (":leeway=-5", "leeway must be 0 to 3600"),
    ],
)
def test_bad_option_values_are_refused(key_file: Path, extra: str, message: str) -> None:
    """algorithms=none and a leeway that is not a sane number of seconds do not start."""
    with pytest.raises(ValueError, match=message):
        make_checker(f"key={key_file}:audience={AUDIENCE}{extra}")


@pytest.mark.parametrize(
    ("kind", "content", "message"),
    [
        ("secret", b"too short\n", "32 bytes or more"),
        ("jwks", b"{not json", "not JSON"),
        ("jwks", b'{"keys": []}', "no signing keys"),
        ("jwks", b'{"keys": [{"kty": "oct", "k": "c2hvcnQ", "kid": "s"}]}', "32 bytes or more"),
        ("key", b"-----BEGIN PUBLIC KEY-----\nnonsense\n-----END PUBLIC KEY-----\n", "key.bin"),
    ],
)
def test_unusable_key_files_are_refused_at_start(
    tmp_path: Path, kind: str, content: bytes, message: str
) -> None:
    """A key file the checker cannot use stops the broker, naming the file and the fault."""
    path = tmp_path / "key.bin"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        make_checker(f"{kind}={path}:audience={AUDIENCE}")


def test_missing_key_file_is_refused(tmp_path: Path) -> None:
    """A key file that is not there is named in the error."""
    with pytest.raises(ValueError, match="cannot read it"):
        make_checker(f"key={tmp_path / 'nope.pem'}:audience={AUDIENCE}")


def test_key_set_is_reread_when_it_changes(tmp_path: Path, clock: Clock) -> None:
    """Keys rotate without a restart; a file that became invalid leaves the last good keys."""
    path = write_jwks(tmp_path / "jwks.json", jwk(rsa_key(), "old"))
    checker = make_checker(f"jwks={path}:audience={AUDIENCE}", clock=clock)
    assert refusal(checker, make_token(NOW, ec_key(), "ES256", kid="new")).reason == (
        "unknown key id"
    )
    write_jwks(path, jwk(rsa_key(), "old"), jwk(ec_key(), "new", "ES256"))
    assert checker.verify(make_token(NOW, ec_key(), "ES256", kid="new")).name == "alice"
    path.write_text("{broken")
    assert checker.verify(make_token(NOW, ec_key(), "ES256", kid="new")).name == "alice"


# -- through the portal ----------------------------------------------------------------


def login(portal: Any, clock: Clock, login: str | None, passcode: str | None) -> Any:
    """:returns: the identity, or the exception, the portal answers with (after its delay)."""
    results: list[Any] = []
    authenticate(portal, login, passcode, clock=clock).addBoth(results.append)
    clock.advance(2)
    [result] = results
    return result if isinstance(result, Identity) else result.value


def test_token_logs_in_with_any_login_or_none(checker: TokenChecker, clock: Clock) -> None:
    """The token is the passcode; the login may be anything, empty or absent."""
    portal = make_portal([checker])
    token = make_token(NOW)
    for name in (None, "", "whoever"):
        identity = login(portal, clock, name, token)
        assert (identity.name, identity.expires) == ("alice", NOW + 3600)


def test_portal_refusal_names_the_reason(checker: TokenChecker, clock: Clock) -> None:
    """A refused token fails the login with ERROR "login failed: <reason>" after the delay."""
    portal = make_portal([checker])
    error = login(portal, clock, None, make_token(NOW, aud="other"))
    assert isinstance(error, LoginRefused)
    assert error.message == "login failed: wrong audience"
    assert error.detail == "the token is not meant for 'stompbroker'"


def test_passwords_and_tokens_side_by_side(checker: TokenChecker, clock: Clock) -> None:
    """Passwords and tokens both work; a bad password still gets a bare "login failed"."""
    portal = make_portal([strcred.makeChecker("memory:bob:builder"), checker])
    assert login(portal, clock, "bob", "builder").name == "bob"
    assert login(portal, clock, "bob", make_token(NOW)).name == "alice"
    refused = login(portal, clock, "bob", "wrong")
    assert type(refused) is LoginFailed
    assert refused.message == "login failed"
    expired = login(portal, clock, "bob", make_token(NOW, exp=int(NOW) - 5))
    assert expired.message == "login failed: token expired"


def test_a_passcode_without_login_stays_anonymous_without_token_checkers(clock: Clock) -> None:
    """Only a portal with a token checker reads a passcode without login as a token."""
    portal = make_portal([strcred.makeChecker("memory:bob:builder")], allow_anonymous=True)
    assert login(portal, clock, None, "anything").anonymous


def test_bearer_token_never_reaches_password_checkers(checker: TokenChecker) -> None:
    """A token sent without login goes to token checkers only, never to a password checker."""
    portal = make_portal([strcred.makeChecker("memory::secret"), checker])
    results: list[Any] = []
    portal.login(BearerToken("secret"), None, IIdentity).addBoth(results.append)
    [failure] = results
    assert failure.check(UnauthorizedLogin)


def test_strcred_finds_the_jwt_plugin(key_file: Path) -> None:
    """--auth jwt:... works as any strcred description, and says what went wrong."""
    checker = strcred.makeChecker(f"jwt:key={key_file}:audience={AUDIENCE}")
    assert isinstance(checker, TokenChecker)
    assert checker.prefix == "stompbroker."
    with pytest.raises(ValueError, match="jwt needs audience"):
        strcred.makeChecker(f"jwt:key={key_file}")
