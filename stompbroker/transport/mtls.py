"""
A TLS listener that asks clients for certificates and verifies them: the
``mtls:`` server endpoint, for ``--auth cert`` (mutual TLS).

Twisted's ``ssl:`` server endpoint never asks a client for a certificate (its
``caCertsDir`` is for client endpoints only), so this one adds what is missing::

    mtls:61614:privateKey=key.pem:certKey=cert.pem:caCerts=ca.pem

takes ``ssl:``'s ``privateKey``, ``certKey``, ``extraCertChain``, ``interface``
and ``backlog``, and

- ``caCerts=PATH``: the authorities client certificates must chain to, a PEM
  file of one or more certificates, or a directory of such files (required);
- ``clientCert=required`` (the default): a client without a valid certificate
  fails the handshake; ``clientCert=optional``: a client may present none (and
  log in with a password), but one it presents must be valid.

The plugin in ``twisted/plugins/stompbroker_endpoints.py`` makes the prefix
known to ``endpoints.serverFromString``, so it works for ``--listen`` and
``--http`` (``wss://`` with client certificates) and for embedders alike.
"""

from __future__ import annotations

import os
import re
from typing import Any

from twisted.internet import ssl
from twisted.internet.endpoints import SSL4ServerEndpoint
from twisted.python.filepath import FilePath

__all__ = ["CLIENT_CERT_MODES", "mutual_tls_endpoint", "read_certificates"]

#: ``clientCert=``: whether a client must present a certificate.
CLIENT_CERT_MODES = ("required", "optional")

_PEM_CERTIFICATE = re.compile(
    rb"-----BEGIN CERTIFICATE-----\r?\n.+?\r?\n-----END CERTIFICATE-----", re.DOTALL
)


def read_certificates(path: str) -> list[ssl.Certificate]:
    """
    :param path: a PEM file of certificates, or a directory of PEM files.
    :returns: every certificate found.
    :raises ValueError: if there is none.
    """
    files = sorted(FilePath(path).children()) if os.path.isdir(path) else [FilePath(path)]
    certificates = [
        ssl.Certificate.loadPEM(match.group())
        for file in files
        if file.isfile()
        for match in _PEM_CERTIFICATE.finditer(file.getContent())
    ]
    if not certificates:
        raise ValueError(f"mtls: no PEM certificate in {path}")
    return certificates


def mutual_tls_endpoint(
    reactor: Any,
    port: str,
    privateKey: str = "server.pem",  # noqa: N803 - the names of ssl:'s options
    certKey: str | None = None,  # noqa: N803
    caCerts: str | None = None,  # noqa: N803
    clientCert: str = "required",  # noqa: N803
    extraCertChain: str | None = None,  # noqa: N803
    interface: str = "",
    backlog: str = "50",
) -> SSL4ServerEndpoint:
    """
    Build an ``mtls:`` endpoint from its description's parts (see the module docstring).

    :raises ValueError: without ``caCerts``, for another ``clientCert``, or for
        files without the certificates and key they must hold.
    """
    if caCerts is None:
        raise ValueError("mtls needs caCerts=PATH: the authorities client certificates chain to")
    if clientCert not in CLIENT_CERT_MODES:
        raise ValueError(f"mtls: clientCert must be required or optional, not {clientCert!r}")
    server = ssl.PrivateCertificate.loadPEM(
        FilePath(certKey or privateKey).getContent() + b"\n" + FilePath(privateKey).getContent()
    )
    chain = None if extraCertChain is None else read_certificates(extraCertChain)
    options = ssl.CertificateOptions(
        privateKey=server.privateKey.original,
        certificate=server.original,
        extraCertChain=None if chain is None else [c.original for c in chain],
        # verify and caCerts rather than trustRoot, which cannot make a
        # certificate optional.
        verify=True,
        caCerts=[certificate.original for certificate in read_certificates(caCerts)],
        requireCertificate=clientCert == "required",
    )
    return SSL4ServerEndpoint(reactor, int(port), options, int(backlog), interface)
