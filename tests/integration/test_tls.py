"""
TLS on both listeners: ``--listen ssl:...`` for STOMP and ``--http ssl:...`` for
``wss://`` and ``https://``, with a certificate the test makes for 127.0.0.1.

Clients verify the certificate against it, so a test passes only if the broker
really serves that certificate.
"""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support.clients import Collector, connect
from tests.support.process import BrokerProcess, free_port, wait_for_port
from tests.support.websocket import RawWebSocket


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """
    A self-signed certificate for ``localhost`` and ``127.0.0.1``, valid for a day.

    :returns: the paths of the certificate and of its private key, both PEM.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path = directory / "cert.pem"
    key_path = directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class TLSBroker:
    """A broker whose STOMP port and web port both speak only TLS."""

    def __init__(self, workdir: Path) -> None:
        self.cert, key = make_certificate(workdir)
        tls = f"privateKey={key}:certKey={self.cert}:interface=127.0.0.1"
        self.stomp_port = free_port()
        self.process = BrokerProcess(
            workdir, "--listen", f"ssl:{self.stomp_port}:{tls}", http=f"ssl:{{port}}:{tls}"
        )
        wait_for_port(self.stomp_port, process=self.process.process)
        self.context = ssl.create_default_context(cafile=str(self.cert))

    @property
    def web(self) -> tuple[str, int]:
        return ("127.0.0.1", self.process.http_port)


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSBroker]:
    broker = TLSBroker(tmp_path_factory.mktemp("tls"))
    yield broker
    broker.process.stop()


def stomp_over_tls(broker: TLSBroker) -> tuple[Any, Collector]:
    return connect(("127.0.0.1", broker.stomp_port), ca_certs=str(broker.cert))


def test_stomp_over_tls_listener(tls_broker: TLSBroker) -> None:
    """--listen ssl: serves STOMP to a client that verifies the broker's certificate."""
    connection, inbox = stomp_over_tls(tls_broker)
    try:
        connection.subscribe("/topic/tls", id="0")
        connection.send("/topic/tls", b"secret", receipt="r")
        assert inbox.wait_for(lambda: inbox.bodies() == [b"secret"])
    finally:
        connection.disconnect()


def test_wss_and_https_on_the_tls_web_port(tls_broker: TLSBroker) -> None:
    """
    --http ssl: serves wss:// to a verifying client, which shares a topic with a TLS STOMP client.
    """
    websocket = RawWebSocket(tls_broker.web, tls=tls_broker.context)
    connection, _ = stomp_over_tls(tls_broker)
    try:
        assert (websocket.status, websocket.headers["sec-websocket-protocol"]) == (101, "v12.stomp")
        websocket.send(
            b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"
            b"SUBSCRIBE\nid:0\ndestination:/topic/wss\nreceipt:r\n\n\x00"
        )
        [connected, receipt] = websocket.read_stomp(2)
        assert (connected.command, receipt.command) == ("CONNECTED", "RECEIPT")
        connection.send("/topic/wss", b"over tls twice")
        [message] = websocket.read_stomp(1)
        assert message.body == b"over tls twice"
    finally:
        websocket.close()
        connection.disconnect()
    https = http.client.HTTPSConnection(*tls_broker.web, timeout=5, context=tls_broker.context)
    try:
        https.request("GET", "/healthz")
        assert https.getresponse().status == 200
    finally:
        https.close()
