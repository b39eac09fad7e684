"""
Keys and tokens for the tests of ``--auth jwt``: made here with ``cryptography``
and PyJWT, as an identity provider would make them.

Shared by the unit, session and integration tests of tokens.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.support.broker import EPOCH

#: The token checker's idea of now in the tests without sockets: the time the
#: suite's ``clock`` fixture is set to.
NOW = EPOCH
AUDIENCE = "stompbroker"
ISSUER = "https://idp.example.com:8443/realms/test"
#: 32 bytes: the shortest secret HS256 takes.
SECRET = b"0123456789abcdef0123456789abcdef"
#: The scopes most tests' tokens carry.
SCOPES = "stompbroker.read:/topic/prices.# stompbroker.write:/topic/prices.eur openid"


@functools.cache
def rsa_key(name: str = "rsa") -> rsa.RSAPrivateKey:
    """:returns: an RSA key, the same one for the same name within a test run."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@functools.cache
def ec_key(name: str = "ec") -> ec.EllipticCurvePrivateKey:
    """:returns: a P-256 key, the same one for the same name within a test run."""
    return ec.generate_private_key(ec.SECP256R1())


def public_pem(key: Any) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def write_public_pem(path: Path, key: Any) -> Path:
    path.write_bytes(public_pem(key))
    return path


def jwk(key: Any, kid: str, alg: str | None = None) -> dict[str, Any]:
    """:returns: the public JWK of ``key``, with ``kid`` (and ``alg`` when given)."""
    rsa_key_given = isinstance(key, rsa.RSAPrivateKey)
    algorithm = jwt.algorithms.RSAAlgorithm if rsa_key_given else jwt.algorithms.ECAlgorithm
    entry: dict[str, Any] = json.loads(algorithm.to_jwk(key.public_key()))
    entry["kid"] = kid
    entry["use"] = "sig"
    if alg is not None:
        entry["alg"] = alg
    return entry


def write_jwks(path: Path, *entries: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"keys": list(entries)}))
    return path


def key_set(path: Path) -> Path:
    """:returns: ``path``, a key set with an RSA key ``r1`` and an EC key ``e1`` (ES256)."""
    return write_jwks(path, jwk(rsa_key(), "r1"), jwk(ec_key(), "e1", "ES256"))


def hs256_auth(workdir: Path) -> str:
    """
    :returns: the ``--auth`` option's value for a broker that takes HS256 tokens
        signed with :data:`SECRET` (for :data:`AUDIENCE`, from :data:`ISSUER`),
        whose secret file it writes in ``workdir``.
    """
    secret = workdir / "secret"
    secret.write_bytes(SECRET)
    return f"jwt:secret={secret}:audience={AUDIENCE}:issuer={ISSUER}"


def claims(now: float, **overrides: Any) -> dict[str, Any]:
    """
    :returns: the claims of a valid token for alice, issued at ``now`` and valid
        for an hour; an override of ``None`` removes the claim.
    """
    values: dict[str, Any] = {
        "sub": "alice",
        "aud": AUDIENCE,
        "iss": ISSUER,
        "iat": int(now),
        "exp": int(now) + 3600,
        "scope": SCOPES,
    }
    values.update(overrides)
    return {name: value for name, value in values.items() if value is not None}


def make_token(
    now: float,
    key: Any = None,
    algorithm: str = "RS256",
    kid: str | None = None,
    **overrides: Any,
) -> str:
    """:returns: a token signed with ``key`` (alice's RSA key by default)."""
    headers = {"kid": kid} if kid is not None else None
    return jwt.encode(
        claims(now, **overrides), key or rsa_key(), algorithm=algorithm, headers=headers
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unsigned_token(now: float, **overrides: Any) -> str:
    """:returns: a token with ``alg: none`` and no signature, as an attacker would send."""
    header = _b64(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    return f"{header}.{_b64(json.dumps(claims(now, **overrides)).encode())}."


def hmac_with_public_key_token(now: float, public: bytes) -> str:
    """
    :returns: a token "signed" HS256 with an RSA public key as the secret: the
        algorithm-confusion attack on verifiers that let the token choose.
    """
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64(json.dumps(claims(now)).encode())
    signature = hmac.new(public, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64(signature)}"
