"""
OAuth 2 bearer tokens: a ``twisted.cred`` checker of JSON Web Tokens (``--auth jwt:...``).

A client logs in with a JWT as CONNECT's ``passcode`` (with any ``login``, or
none), or in a WebSocket's ``Authorization: Bearer`` header.  The checker
verifies it with PyJWT, against keys read from a file, and makes an
:class:`~stompbroker.security.identity.Identity` that carries the token's rights
and expiry.  Nothing here talks to the identity provider: the broker is an
OAuth 2 resource server, as RabbitMQ's OAuth 2 plugin is.

Configuration
-------------
``--auth jwt:OPTION=VALUE:OPTION=VALUE...``, colon-separated like strcred's
``memory:`` (:func:`parse_options`).  A colon starts a new option only when a
known option name and ``=`` follow it, so issuer URLs need no escaping.

- ``key=FILE``: a PEM public key or certificate (RSA, EC or Ed25519);
  ``jwks=FILE``: a JSON Web Key Set, whose keys tokens choose by ``kid``;
  ``secret=FILE``: an HMAC secret of 32 bytes or more, for HS256 (tests and
  trials).  Exactly one.  The file is read again when it changes, so keys
  rotate without a restart; a file that became invalid is logged and the
  last good keys stay.
- ``audience=AUD`` (required): the token's ``aud`` must hold it.
- ``issuer=ISS``: the token's ``iss`` must be it.
- ``prefix=PREFIX``: the scopes' prefix; ``AUD.`` by default, as RabbitMQ's
  ``scope_prefix`` defaults to its ``resource_server_id`` and a dot.
- ``algorithms=RS256,ES256``: the signature algorithms accepted, narrower than
  the key's (by default all that suit the key: RS*/PS* for RSA, the curve's ES*,
  EdDSA, HS* for a secret).  ``none`` is never accepted.
- ``leeway=SECONDS``: clock skew allowed on ``exp`` and ``nbf``; 0 by default.

Tokens
------
A token must be signed with an accepted algorithm by a known key, and hold
``sub`` (the user name), ``exp`` and the audience; ``nbf`` is honoured.  Its
rights are its scopes (``scope``, a space-separated string or a list, and
``scp``), mapped as RabbitMQ maps its own: with the default prefix
``stompbroker.``,

=================================  ===========================================
scope                              right
=================================  ===========================================
``stompbroker.read:PATTERN``       ``read`` (SUBSCRIBE) on PATTERN
``stompbroker.write:PATTERN``      ``write`` (SEND) on PATTERN
``stompbroker.admin:PATTERN``      ``admin`` on PATTERN
``stompbroker.read`` (no pattern)  the right on every destination (``#``)
``stompbroker.tag:administrator``  ``admin`` on every destination
=================================  ===========================================

Patterns are the access file's (``/topic/prices.#``, ``/queue/*``).  Scopes
without the prefix (``openid``, other APIs') are ignored, and so are other
permissions under it (RabbitMQ's ``configure``: destinations are made on use);
a scope of ours with an invalid pattern refuses the token, so that a typo in
the identity provider is seen at once.  A token's rights replace the access
file's for its holder.

An ``info`` claim (a JSON object of at most 4 KiB, as Centrifugo's) is the
user's presence data, shown to the other members of the destinations the user
subscribes to.

Every refusal that reaches the client names its reason (``login failed: token
expired``), which says nothing a guesser could use: the signature is checked
before any claim, and no secret is involved in the rest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import jwt
from twisted.cred.checkers import ICredentialsChecker
from twisted.cred.credentials import IUsernamePassword
from twisted.cred.error import UnauthorizedLogin
from twisted.internet.defer import Deferred, fail, succeed
from zope.interface import implementer

from stompbroker.broker.routing.syntax import validate_pattern
from stompbroker.protocol.errors import InvalidDestination
from stompbroker.protocol.login import utc_text
from stompbroker.security.access import ADMIN, RIGHTS, Grants
from stompbroker.security.credentials import IBearerToken, InvalidCredentials
from stompbroker.security.identity import Identity, member_info
from stompbroker.security.token_keys import KEY_KINDS, KeyFile

__all__ = [
    "TokenChecker",
    "grants_from_scopes",
    "make_checker",
    "parse_options",
]

#: The options of ``--auth jwt:...``.
OPTIONS = ("key", "jwks", "secret", "audience", "issuer", "prefix", "algorithms", "leeway")
#: The options that name the keys; exactly one is given.
KEY_OPTIONS = KEY_KINDS
#: A colon followed by a known option: where one option ends and the next begins.
_OPTION_START = re.compile(rf":(?=(?:{'|'.join(OPTIONS)})=)")
#: What an unknown option would look like inside a value.
_STRAY_OPTION = re.compile(r":[A-Za-z_]+=")

#: Three base64url parts: what a signed JWT (JWS compact serialization) looks
#: like.  A passcode of another shape is a password, not ours to refuse.
_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")


def _scopes(claims: Mapping[str, Any]) -> list[str]:
    """:returns: the scopes of ``scope`` and ``scp``, each a string or a list."""
    scopes: list[str] = []
    for claim in ("scope", "scp"):
        value = claims.get(claim)
        if isinstance(value, str):
            scopes.extend(value.split())
        elif isinstance(value, list):
            scopes.extend(item for item in value if isinstance(item, str))
    return scopes


def grants_from_scopes(scopes: Iterable[str], prefix: str) -> Grants:
    """
    Map scopes to rights (see the module docstring).

    :param scopes: the token's scopes.
    :param prefix: what our scopes start with, e.g. ``stompbroker.``.
    :raises InvalidCredentials: for a scope of ours with an invalid pattern.
    """
    rights: dict[str, list[str]] = {right: [] for right in RIGHTS}
    for scope in scopes:
        if not scope.startswith(prefix):
            continue
        permission, colon, pattern = scope[len(prefix) :].partition(":")
        if permission == "tag":
            if pattern == "administrator":
                rights[ADMIN].append("#")
            continue
        if permission not in rights:
            continue
        if not colon:
            pattern = "#"
        try:
            validate_pattern(pattern)
        except InvalidDestination as error:
            raise InvalidCredentials(
                "invalid scope", f"the scope {scope[:120]!r} has an invalid pattern: {error.detail}"
            ) from None
        rights[permission].append(pattern)
    return Grants(rights)


def _number(claims: Mapping[str, Any], name: str) -> float | None:
    """:raises InvalidCredentials: for a time claim that is not a number."""
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidCredentials(f"invalid {name} claim", f"{name} must be a number of seconds")
    return float(value)


#: PyJWT's errors, most specific first, and what the client is told for each.
_DECODE_ERRORS: tuple[tuple[type[Exception], str, str], ...] = (
    (
        jwt.InvalidSignatureError,
        "bad signature",
        "the token's signature does not verify with the broker's key",
    ),
    (jwt.InvalidAudienceError, "wrong audience", "the token is not meant for {audience!r}"),
    (jwt.InvalidIssuerError, "wrong issuer", "the token was not issued by {issuer!r}"),
    (jwt.InvalidAlgorithmError, "algorithm not allowed", "{error}"),
    (jwt.InvalidKeyError, "bad signature", "the token's key does not suit its algorithm"),
)


@implementer(ICredentialsChecker)
class TokenChecker:
    """
    Checks JWT bearer tokens (see the module docstring).

    The token is the password of ``IUsernamePassword`` credentials (whatever the
    user name), or an :class:`~stompbroker.security.credentials.IBearerToken`.
    A password that does not look like a JWT is refused silently, so that the
    next checker (a password file, say) has it; one that does gets refused with
    its reason (:class:`~stompbroker.security.credentials.InvalidCredentials`).

    :param keys: where the keys come from.
    :param audience: the ``aud`` a token must hold.
    :param issuer: the ``iss`` a token must have; ``None`` accepts any.
    :param prefix: what our scopes start with; ``audience`` and a dot by default.
    :param algorithms: the algorithms accepted; ``None`` for every one that suits the key.
    :param leeway: seconds of clock skew allowed on ``exp`` and ``nbf``.
    :param clock: tells the time (``seconds()``); the global reactor by default,
        which is what sessions time expiry with.
    """

    credentialInterfaces = (IUsernamePassword, IBearerToken)

    def __init__(
        self,
        keys: KeyFile,
        audience: str,
        issuer: str | None = None,
        prefix: str | None = None,
        algorithms: Iterable[str] | None = None,
        leeway: float = 0.0,
        clock: Any = None,
    ) -> None:
        self.keys = keys
        self.audience = audience
        self.issuer = issuer
        self.prefix = f"{audience}." if prefix is None else prefix
        self.algorithms = None if algorithms is None else tuple(algorithms)
        self.leeway = leeway
        self._clock = clock

    def _now(self) -> float:
        if self._clock is None:
            from twisted.internet import reactor

            self._clock = reactor
        return float(self._clock.seconds())

    # Its avatar ids are identities, not the bytes Twisted's annotations expect:
    # only the broker's realm, which passes them on whole, receives them.
    def requestAvatarId(self, credentials: Any) -> Deferred[Identity]:  # type: ignore[override]
        """
        :returns: a Deferred that fires with the token's :class:`Identity` (an
            avatar id that the broker's portal passes on whole), or fails with
            ``UnauthorizedLogin``.
        """
        token = credentials.password
        if isinstance(token, bytes):
            token = token.decode("utf-8", errors="replace")
        if not _TOKEN_SHAPE.fullmatch(token):
            return fail(UnauthorizedLogin())
        try:
            return succeed(self.verify(token))
        except InvalidCredentials as refusal:
            return fail(refusal)

    def verify(self, token: str) -> Identity:
        """
        :returns: the identity of a valid token.
        :raises InvalidCredentials: naming why the token is not valid.
        """
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as error:
            raise InvalidCredentials(
                "malformed token", f"the token cannot be read: {error}"
            ) from None
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm.lower() == "none":
            raise InvalidCredentials(
                "unsigned token", "the token has no signature (alg none), which is never accepted"
            )
        key = self.keys.lookup(header.get("kid"))
        algorithms = key.algorithms
        if self.algorithms is not None:
            algorithms = tuple(name for name in algorithms if name in self.algorithms)
        if algorithm not in algorithms:
            raise InvalidCredentials(
                "algorithm not allowed",
                f"the token is signed with {algorithm[:20]!r}; the broker's key takes"
                f" {', '.join(algorithms) or 'none of the algorithms allowed'}",
            )
        claims = self._decode(token, key.key, algorithms)
        now = self._now()
        expires = _number(claims, "exp")
        if expires is not None and expires <= now - self.leeway:
            raise InvalidCredentials("token expired", f"the token expired at {utc_text(expires)}")
        not_before = _number(claims, "nbf")
        if not_before is not None and not_before > now + self.leeway:
            raise InvalidCredentials(
                "token not yet valid", f"the token is valid from {utc_text(not_before)}"
            )
        subject = claims["sub"]
        if not isinstance(subject, str) or not subject:
            raise InvalidCredentials("invalid sub claim", "sub must be a non-empty string")
        grants = grants_from_scopes(_scopes(claims), self.prefix)
        try:
            info = member_info(claims.get("info"))
        except ValueError as error:
            raise InvalidCredentials("invalid info claim", str(error)) from None
        return Identity(subject, granted=grants, expires=expires, info=info)

    def _decode(self, token: str, key: Any, algorithms: tuple[str, ...]) -> dict[str, Any]:
        """
        Verify the signature, audience and issuer with PyJWT; expiry is checked
        against our clock instead of the system's, so that sessions and tests agree.

        :raises InvalidCredentials: naming what PyJWT found wrong.
        """
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=list(algorithms),
                audience=self.audience,
                issuer=self.issuer,
                options={
                    "require": ["exp", "sub", "aud"],
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                },
            )
        except jwt.MissingRequiredClaimError as error:
            raise InvalidCredentials(
                f"no {error.claim} claim", f"a token must have the {error.claim!r} claim"
            ) from None
        except jwt.InvalidTokenError as error:
            for kind, reason, detail in _DECODE_ERRORS:
                if isinstance(error, kind):
                    raise InvalidCredentials(
                        reason,
                        detail.format(audience=self.audience, issuer=self.issuer, error=error),
                    ) from None
            raise InvalidCredentials("invalid token", str(error)) from None
        return claims


def parse_options(argstring: str) -> dict[str, str]:
    """
    Read ``--auth jwt:``'s options (see the module docstring).

    :returns: option name -> value.
    :raises ValueError: for an unknown or repeated option, not exactly one of
        ``key``, ``jwks`` and ``secret``, or no ``audience``.
    """
    options: dict[str, str] = {}
    for part in _OPTION_START.split(argstring) if argstring else ():
        name, equals, value = part.partition("=")
        stray = _STRAY_OPTION.search(value)
        if not equals or name not in OPTIONS:
            raise _unknown_option(name)
        if stray is not None:
            raise _unknown_option(stray.group()[1:-1])
        if name in options:
            raise ValueError(f"jwt: {name} is given twice")
        if not value:
            raise ValueError(f"jwt: {name} needs a value")
        options[name] = value
    given = [name for name in KEY_OPTIONS if name in options]
    if len(given) != 1:
        raise ValueError("jwt needs exactly one of key=FILE, jwks=FILE and secret=FILE")
    if "audience" not in options:
        raise ValueError("jwt needs audience=AUD: the aud claim tokens for this broker hold")
    return options


def _unknown_option(name: str) -> ValueError:
    return ValueError(f"jwt: unknown option {name!r}; the options are {', '.join(OPTIONS)}")


def make_checker(argstring: str, clock: Any = None) -> TokenChecker:
    """
    :param argstring: what follows ``jwt:`` in ``--auth``.
    :param clock: as :class:`TokenChecker`'s.
    :raises ValueError: for bad options, or a key file that cannot be used.
    """
    options = parse_options(argstring)
    [kind] = [name for name in KEY_OPTIONS if name in options]
    algorithms = None
    if "algorithms" in options:
        algorithms = [name.strip() for name in options["algorithms"].split(",") if name.strip()]
        if any(name.lower() == "none" for name in algorithms):
            raise ValueError("jwt: algorithms=none would accept unsigned tokens")
    leeway = 0.0
    if "leeway" in options:
        try:
            leeway = float(options["leeway"])
        except ValueError:
            leeway = -1.0
        if not 0 <= leeway <= 3600:
            raise ValueError("jwt: leeway must be 0 to 3600 seconds")
    return TokenChecker(
        KeyFile(kind, options[kind]),
        audience=options["audience"],
        issuer=options.get("issuer"),
        prefix=options.get("prefix"),
        algorithms=algorithms,
        leeway=leeway,
        clock=clock,
    )
