"""
Tests of ``--auth cert`` and the ``mtls:`` listener, without sockets: the
certificate checker, the portal with certificates, the endpoint's TLS settings
and what the adapters tell the session.

Certificates come from a CA made in the test (:mod:`tests.support.certificates`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography.x509.oid import NameOID
from OpenSSL import SSL, crypto
from twisted.cred import strcred
from twisted.internet import endpoints
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock
from twisted.python import usage

from stompbroker.protocol.errors import LoginFailed
from stompbroker.protocol.login import LoginRefused
from stompbroker.security.certificates import CertificateChecker, make_checker, name_of
from stompbroker.security.credentials import InvalidCredentials
from stompbroker.security.identity import Identity
from stompbroker.security.portal import authenticate, make_portal
from stompbroker.transport.mtls import read_certificates
from stompbroker.transport.peer_credentials import PeerCredentials, bearer_token
from tests.support.certificates import Authority, name, write_certificate, write_pair
from tests.support.options import parse

ALICE = name((NameOID.COMMON_NAME, "alice"), (NameOID.ORGANIZATION_NAME, "Example"))


@pytest.fixture(scope="module")
def authority() -> Authority:
    return Authority()


@pytest.fixture(scope="module")
def alice(authority: Authority) -> Any:
    """Alice's client certificate, as Twisted's TLS transports give it: a pyOpenSSL X509."""
    certificate, _ = authority.issue(ALICE)
    return crypto.X509.from_cryptography(certificate)


# -- names -------------------------------------------------------------------------------


def test_common_name_or_distinguished_name(alice: Any) -> None:
    """As RabbitMQ's ssl_cert_login: the subject's CN, or its RFC 4514 DN with name=dn."""
    assert name_of(alice) == "alice"
    assert name_of(alice.to_cryptography(), "dn") == "O=Example,CN=alice"


@pytest.mark.parametrize(
    ("subject", "reason"),
    [
        (name((NameOID.ORGANIZATION_NAME, "Example")), "certificate without common name"),
        (
            name((NameOID.COMMON_NAME, "a"), (NameOID.COMMON_NAME, "b")),
            "certificate with several common names",
        ),
    ],
)
def test_subject_without_one_common_name_is_refused(
    authority: Authority, subject: Any, reason: str
) -> None:
    """A certificate that does not name one user is refused with a reason the client sees."""
    certificate, _ = authority.issue(subject)
    with pytest.raises(InvalidCredentials) as refused:
        name_of(certificate)
    assert refused.value.reason == reason


def test_checker_options() -> None:
    """cert, cert:name=cn and cert:name=dn; anything else is a clear error."""
    assert make_checker("").source == "cn"
    assert make_checker("name=dn").source == "dn"
    with pytest.raises(ValueError, match="name must be cn or dn"):
        make_checker("name=uid")
    with pytest.raises(ValueError, match="unknown option"):
        make_checker("dn")
    assert strcred.makeChecker("cert:name=dn").source == "dn"


def test_twistd_accepts_auth_cert() -> None:
    """twistd stompbroker --auth cert is a supported description, not a usage error."""
    options = parse("--auth", "cert", "--http", "none")
    assert isinstance(options["credCheckers"][0], CertificateChecker)
    with pytest.raises(usage.UsageError):
        parse("--auth", "cert:name=uid")


# -- through the portal ------------------------------------------------------------------


def login(portal: Any, *args: Any, certificate: Any = None) -> Any:
    """:returns: the identity, or the exception, the portal answers with (after its delay)."""
    clock = Clock()
    results: list[Any] = []
    authenticate(portal, *args, clock=clock, certificate=certificate).addBoth(results.append)
    clock.advance(2)
    [result] = results
    return result if isinstance(result, Identity) else result.value


def test_certificate_logs_in_as_its_common_name(alice: Any) -> None:
    """A CONNECT with a verified certificate and no login becomes a login as its CN."""
    portal = make_portal([CertificateChecker()])
    identity = login(portal, None, None, certificate=alice)
    assert (identity.name, identity.anonymous, identity.expires) == ("alice", False, None)


def test_without_certificate_there_is_no_way_in(alice: Any) -> None:
    """With only --auth cert, a client without certificate, or with a password, is refused."""
    portal = make_portal([CertificateChecker()])
    assert type(login(portal, None, None)) is LoginFailed
    assert type(login(portal, "alice", "secret")) is LoginFailed
    assert login(make_portal([CertificateChecker()], True), None, None).anonymous


def test_certificates_and_passwords_side_by_side(alice: Any) -> None:
    """--auth cert with a password checker: both ways in work."""
    portal = make_portal([CertificateChecker("dn"), strcred.makeChecker("memory:bob:builder")])
    assert login(portal, None, None, certificate=alice).name == "O=Example,CN=alice"
    assert login(portal, "bob", "builder").name == "bob"


def test_refused_certificate_names_the_reason(authority: Authority) -> None:
    """A certificate without CN gets ERROR "login failed: certificate without common name"."""
    certificate, _ = authority.issue(name((NameOID.ORGANIZATION_NAME, "Example")))
    error = login(make_portal([CertificateChecker()]), None, None, certificate=certificate)
    assert isinstance(error, LoginRefused)
    assert error.message == "login failed: certificate without common name"


# -- the mtls: listener --------------------------------------------------------------------


@pytest.fixture
def server_files(tmp_path: Path, authority: Authority) -> dict[str, Path]:
    certificate, key = write_pair(
        tmp_path, "server", authority.issue(name((NameOID.COMMON_NAME, "broker")), server=True)
    )
    ca = write_certificate(tmp_path / "ca.pem", authority.certificate)
    return {"cert": certificate, "key": key, "ca": ca}


def context_of(description: str) -> SSL.Context:
    """:returns: the OpenSSL context of the endpoint an ``mtls:`` description makes."""
    endpoint = endpoints.serverFromString(MemoryReactorClock(), description)
    context: SSL.Context = endpoint._sslContextFactory.getContext()
    return context


def test_mtls_requires_and_verifies_client_certificates(server_files: dict[str, Path]) -> None:
    """mtls: asks every client for a certificate and fails the handshake without a valid one."""
    files = server_files
    context = context_of(
        f"mtls:0:privateKey={files['key']}:certKey={files['cert']}:caCerts={files['ca']}"
    )
    required = SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT
    assert context.get_verify_mode() & required == required


def test_mtls_optional_client_certificates(server_files: dict[str, Path]) -> None:
    """clientCert=optional still verifies a certificate a client presents, but lets others in."""
    files = server_files
    context = context_of(
        f"mtls:0:privateKey={files['key']}:certKey={files['cert']}:caCerts={files['ca']}"
        ":clientCert=optional"
    )
    assert context.get_verify_mode() & SSL.VERIFY_PEER
    assert not context.get_verify_mode() & SSL.VERIFY_FAIL_IF_NO_PEER_CERT


@pytest.mark.parametrize(
    ("extra", "message"),
    [("", "mtls needs caCerts=PATH"), (":caCerts={ca}:clientCert=maybe", "required or optional")],
)
def test_mtls_mistakes_are_clear(server_files: dict[str, Path], extra: str, message: str) -> None:
    """An mtls: listener without authorities, or with an unknown clientCert, does not start."""
    files = server_files
    with pytest.raises(ValueError, match=message):
        endpoints.serverFromString(
            MemoryReactorClock(),
            f"mtls:0:privateKey={files['key']}:certKey={files['cert']}" + extra.format(**files),
        )


def test_authorities_from_a_directory(tmp_path: Path) -> None:
    """caCerts= may name a directory: every PEM certificate in its files counts."""
    write_certificate(tmp_path / "one.pem", Authority("One").certificate)
    write_certificate(tmp_path / "two.pem", Authority("Two").certificate)
    assert len(read_certificates(str(tmp_path))) == 2
    with pytest.raises(ValueError, match="no PEM certificate"):
        read_certificates(str(tmp_path / "one.pem") + ".missing-dir-is-a-file")


# -- what the adapters tell the session ---------------------------------------------------


def test_peer_certificate_only_under_tls(alice: Any) -> None:
    """An adapter gives the TLS transport's peer certificate, and None on plain TCP."""

    class TLSTransport:
        def getPeerCertificate(self) -> Any:  # noqa: N802 - Twisted's name
            return alice

    assert PeerCredentials(TLSTransport()).peer_certificate() is alice
    assert PeerCredentials(object()).peer_certificate() is None


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc.def.ghi", "abc.def.ghi"),
        ("bearer   abc.def.ghi ", "abc.def.ghi"),
        ("Basic YWxpY2U6c2VjcmV0", None),
        ("Bearer", None),
        ("", None),
    ],
)
def test_bearer_token_from_the_authorization_header(header: str, token: str | None) -> None:
    """RFC 6750, 2.1: "Authorization: Bearer TOKEN", the scheme in any case; nothing else."""
    headers = {"authorization": header} if header else {}
    assert bearer_token(headers) == token
