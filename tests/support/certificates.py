"""
A small certificate authority for the tests of ``--auth cert`` and ``mtls:``:
a CA, a server certificate for 127.0.0.1 and client certificates it signs, all
made with ``cryptography`` and written as PEM files.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def name(*parts: tuple[Any, str]) -> x509.Name:
    """:returns: a name from ``(oid, value)`` pairs, e.g. ``(NameOID.COMMON_NAME, "alice")``."""
    return x509.Name([x509.NameAttribute(oid, value) for oid, value in parts])


def _builder(subject: x509.Name, issuer: x509.Name, public_key: Any) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


class Authority:
    """
    A certificate authority that issues server and client certificates.

    :param common_name: the CA's own name.
    """

    def __init__(self, common_name: str = "Test CA") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = name((NameOID.COMMON_NAME, common_name))
        self.certificate = (
            _builder(self.name, self.name, self.key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(self.key, hashes.SHA256())
        )

    def issue(
        self, subject: x509.Name, server: bool = False
    ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        """:returns: a certificate for ``subject`` (for 127.0.0.1 if ``server``) and its key."""
        key = ec.generate_private_key(ec.SECP256R1())
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            _builder(subject, self.name, key.public_key())
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        return builder.sign(self.key, hashes.SHA256()), key


def write_certificate(path: Path, certificate: x509.Certificate) -> Path:
    path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return path


def write_key(path: Path, key: Any) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return path


def write_pair(directory: Path, stem: str, pair: tuple[x509.Certificate, Any]) -> tuple[Path, Path]:
    """:returns: the paths of ``STEM.pem`` and ``STEM.key``, written in ``directory``."""
    certificate, key = pair
    return (
        write_certificate(directory / f"{stem}.pem", certificate),
        write_key(directory / f"{stem}.key", key),
    )
