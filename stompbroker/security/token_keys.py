"""
The keys JWTs are verified with, read from a file: a PEM public key or
certificate, a JSON Web Key Set, or an HMAC secret (``--auth jwt:key=``,
``jwks=``, ``secret=``; see :mod:`stompbroker.security.tokens`).

Each key comes with the signature algorithms it may be used with, so that a
token can never choose an algorithm its key was not made for (an RSA public key
used as an HMAC secret, say): RS* and PS* for RSA, the curve's ES* for EC, EdDSA
for Ed25519, and for a secret the HS* its length suffices for.  A key set's key
with an ``alg`` is used with that algorithm only.

The file is read again when it changes, so keys rotate without a restart; a
file that became unreadable or invalid is logged, and the last good keys stay.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jwt
from attrs import frozen
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from stompbroker.logs import logger
from stompbroker.security.credentials import InvalidCredentials
from stompbroker.security.file_watch import FileWatch

__all__ = ["MIN_SECRET_BYTES", "KEY_KINDS", "KeyFile", "TokenKey"]

log = logger("stompbroker.security.token_keys")

_RSA_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
#: HMAC algorithms, each with the shortest key it may have (RFC 7518, 3.2: the hash's size).
_HMAC_ALGORITHMS = (("HS256", 32), ("HS384", 48), ("HS512", 64))
_CURVE_ALGORITHMS = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
#: RFC 7518 section 3.2: an HS256 key must be at least as long as the hash.
MIN_SECRET_BYTES = 32


def _hmac_algorithms(secret: bytes) -> tuple[str, ...]:
    """
    :returns: the HMAC algorithms a secret is long enough for.
    :raises ValueError: if it is too short for any.
    """
    if len(secret) < MIN_SECRET_BYTES:
        raise ValueError(
            f"an HMAC secret must have {MIN_SECRET_BYTES} bytes or more (RFC 7518, 3.2),"
            f" not {len(secret)}"
        )
    return tuple(name for name, shortest in _HMAC_ALGORITHMS if len(secret) >= shortest)


@frozen
class TokenKey:
    """
    One key tokens may be signed with.

    :ivar key: what PyJWT verifies with: a ``cryptography`` public key, or the
        secret's bytes.
    :ivar algorithms: the signature algorithms this key may be used with.
    """

    key: Any
    algorithms: tuple[str, ...]


def _public_key_algorithms(key: Any) -> tuple[str, ...]:
    """:raises ValueError: for a kind of key JWTs are not signed with."""
    if isinstance(key, rsa.RSAPublicKey):
        return _RSA_ALGORITHMS
    if isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name in _CURVE_ALGORITHMS:
        return (_CURVE_ALGORITHMS[key.curve.name],)
    if isinstance(key, ed25519.Ed25519PublicKey):
        return ("EdDSA",)
    raise ValueError(f"a {type(key).__name__} is not a key JWTs are signed with")


def _read_pem(data: bytes) -> dict[str | None, TokenKey]:
    """A PEM public key, or the public key of a PEM certificate."""
    if b"-----BEGIN CERTIFICATE-----" in data:
        key: Any = x509.load_pem_x509_certificate(data).public_key()
    else:
        key = serialization.load_pem_public_key(data)
    return {None: TokenKey(key, _public_key_algorithms(key))}


def _read_secret(data: bytes) -> dict[str | None, TokenKey]:
    """The secret is the file's bytes, without a final line end."""
    secret = data.rstrip(b"\r\n")
    return {None: TokenKey(secret, _hmac_algorithms(secret))}


def _read_jwks(data: bytes) -> dict[str | None, TokenKey]:
    """
    A JSON Web Key Set (RFC 7517): ``{"keys": [...]}``.  Keys meant for encryption
    (``"use": "enc"``) are left out; a key without ``alg`` may be used with every
    algorithm that suits its type.
    """
    try:
        document = json.loads(data)
    except ValueError as error:
        raise ValueError(f"not JSON: {error}") from None
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError('a JSON Web Key Set is an object with a "keys" list')
    keys: dict[str | None, TokenKey] = {}
    for index, entry in enumerate(document["keys"]):
        if not isinstance(entry, dict) or entry.get("use") == "enc":
            continue
        try:
            parsed = jwt.PyJWK(entry)
        except jwt.PyJWTError as error:
            raise ValueError(f"keys[{index}]: {error}") from None
        try:
            algorithms = _jwk_algorithms(entry, parsed)
        except ValueError as error:
            raise ValueError(f"keys[{index}]: {error}") from None
        kid = entry.get("kid")
        if kid in keys:
            which = "a second key without kid" if kid is None else f"key id {kid!r} a second time"
            raise ValueError(f"keys[{index}]: {which}: tokens could not tell which key they mean")
        keys[kid] = TokenKey(parsed.key, algorithms)
    if not keys:
        raise ValueError("the key set has no signing keys")
    return keys


def _jwk_algorithms(entry: Mapping[str, Any], parsed: Any) -> tuple[str, ...]:
    """
    :returns: the algorithms one key of a set may be used with: its ``alg``, or
        without one, all that suit its type.
    :raises ValueError: for an HMAC key too short for its algorithms.
    """
    if entry.get("kty") == "oct":
        allowed = _hmac_algorithms(parsed.key)
        if "alg" not in entry:
            return allowed
        if parsed.algorithm_name not in allowed:
            raise ValueError(f"the key is too short for {parsed.algorithm_name}")
    elif entry.get("kty") == "RSA" and "alg" not in entry:
        return _RSA_ALGORITHMS
    return (parsed.algorithm_name,)


_READERS = {"key": _read_pem, "secret": _read_secret, "jwks": _read_jwks}
#: The kinds of key file, by the option that names them.
KEY_KINDS = tuple(_READERS)


class KeyFile:
    """
    The keys of one file, read again whenever the file changes.

    :param kind: ``key`` (PEM), ``jwks`` or ``secret``.
    :param path: the file.
    :raises ValueError: if the file cannot be read or holds no usable key.
    """

    def __init__(self, kind: str, path: str) -> None:
        self.kind = kind
        self.path = path
        self._read = _READERS[kind]
        self._watch = FileWatch(path)
        self._keys = self._load()

    def _load(self) -> dict[str | None, TokenKey]:
        try:
            with open(self.path, "rb") as file:
                data = file.read()
        except OSError as error:
            raise ValueError(f"{self.path}: cannot read it: {error.strerror}") from None
        try:
            return self._read(data)
        except ValueError as error:
            raise ValueError(f"{self.path}: {error}") from None

    def keys(self) -> Mapping[str | None, TokenKey]:
        """
        :returns: the keys by key id (``None`` for the one key of a PEM or secret
            file), re-read first if the file changed; the last good ones if it
            became unreadable or invalid.
        """
        if self._watch.changed():
            try:
                self._keys = self._load()
            except ValueError as error:
                log.error("token keys not reloaded, the old ones stay: {error}", error=str(error))
            else:
                log.info("token keys {path} reloaded", path=self.path)
        return self._keys

    def lookup(self, kid: Any) -> TokenKey:
        """
        :param kid: the token's ``kid`` header, or ``None``.
        :returns: the key the token says it is signed with.
        :raises InvalidCredentials: for a key id the set lacks, or no key id
            where several keys could be meant.
        """
        keys = self.keys()
        if self.kind != "jwks":
            return keys[None]
        if kid is None:
            if len(keys) == 1:
                return next(iter(keys.values()))
            raise InvalidCredentials(
                "no key id", "the token names no key (kid header) and the broker has several"
            )
        found = keys.get(kid) if isinstance(kid, str) else None
        if found is None:
            raise InvalidCredentials(
                "unknown key id",
                f"the token names the key {str(kid)[:80]!r}, which is not among the broker's keys",
            )
        return found
