"""
TLS client certificates: a ``twisted.cred`` checker that logs a client in by
the certificate its TLS listener verified (``--auth cert``).

Like RabbitMQ's ``ssl_cert_login``, the user name is the certificate subject's
common name (``cert`` or ``cert:name=cn``), or its whole distinguished name in
RFC 4514 form, most specific part first (``cert:name=dn``:
``CN=alice,O=Example,C=GB``).  A client uses it by sending a CONNECT with
neither ``login`` nor ``passcode``; the access file then gives that name its
rights, as for a password login.

The checker trusts the certificate it is given: verifying it against the
trusted authorities is the listener's job (``--listen mtls:...``, see
:mod:`stompbroker.transport.mtls`).  A listener that does not ask for client
certificates (``ssl:``) never gives one, so its clients cannot log in this way.
"""

from __future__ import annotations

from typing import Any

from cryptography import x509
from cryptography.x509.oid import NameOID
from twisted.cred.checkers import ICredentialsChecker
from twisted.internet.defer import Deferred, fail, succeed
from zope.interface import implementer

from stompbroker.security.credentials import ICertificate, InvalidCredentials

__all__ = ["NAME_SOURCES", "CertificateChecker", "make_checker", "name_of"]

#: Where the user name comes from: the subject's common name, or its whole DN.
NAME_SOURCES = ("cn", "dn")


def _as_cryptography(certificate: Any) -> x509.Certificate:
    """Twisted's TLS transports give pyOpenSSL ``X509`` objects; read them with ``cryptography``."""
    to_cryptography = getattr(certificate, "to_cryptography", None)
    if to_cryptography is not None:
        converted: x509.Certificate = to_cryptography()
        return converted
    return certificate  # type: ignore[no-any-return]


def name_of(certificate: Any, source: str = "cn") -> str:
    """
    :param certificate: a pyOpenSSL ``X509`` or a ``cryptography`` certificate.
    :param source: ``cn`` or ``dn`` (:data:`NAME_SOURCES`).
    :returns: the user name the certificate logs in as.
    :raises InvalidCredentials: for a subject without exactly one common name
        (``cn``), or an empty subject (``dn``).
    """
    subject = _as_cryptography(certificate).subject
    if source == "dn":
        name = subject.rfc4514_string()
        if not name:
            raise InvalidCredentials(
                "certificate without subject", "the client certificate's subject is empty"
            )
        return name
    common_names = subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if len(common_names) != 1:
        raise InvalidCredentials(
            "certificate without common name"
            if not common_names
            else "certificate with several common names",
            f"the client certificate's subject ({subject.rfc4514_string()[:200]}) must have"
            " exactly one CN to log in by",
        )
    value = common_names[0].value
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


@implementer(ICredentialsChecker)
class CertificateChecker:
    """
    Accepts a verified client certificate as the user its subject names.

    :param source: ``cn`` or ``dn`` (:data:`NAME_SOURCES`).
    :raises ValueError: for another source.
    """

    credentialInterfaces = (ICertificate,)

    def __init__(self, source: str = "cn") -> None:
        if source not in NAME_SOURCES:
            raise ValueError(f"cert: name must be cn or dn, not {source!r}")
        self.source = source

    # Twisted annotates avatar ids as bytes; ours are text, which the realm takes.
    def requestAvatarId(self, credentials: Any) -> Deferred[str]:  # type: ignore[override]
        """
        :returns: a Deferred that fires with the user name, or fails with
            :class:`~stompbroker.security.credentials.InvalidCredentials`.
        """
        try:
            return succeed(name_of(credentials.certificate, self.source))
        except InvalidCredentials as refusal:
            return fail(refusal)


def make_checker(argstring: str) -> CertificateChecker:
    """
    :param argstring: what follows ``cert:`` in ``--auth``: empty, ``name=cn`` or ``name=dn``.
    :raises ValueError: for anything else.
    """
    if not argstring:
        return CertificateChecker()
    option, equals, value = argstring.partition("=")
    if option != "name" or not equals:
        raise ValueError(f"cert: unknown option {argstring!r}; the option is name=cn or name=dn")
    return CertificateChecker(value)
