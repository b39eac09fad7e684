"""
Client-certificate logins on the real broker: ``--listen mtls:...:caCerts=ca.pem``
with ``--auth cert`` and an access file, driven by ``stomp.py`` over TLS with
certificates a CA made in the test issued.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import stomp
from cryptography.x509.oid import NameOID

from tests.support.certificates import Authority, name, write_certificate, write_pair
from tests.support.clients import Collector
from tests.support.process import BrokerProcess, free_port, wait_for_port

ACCESS = """
[users.alice]
read = ["/topic/certs.#"]
write = ["/topic/certs.#"]
"""


class MutualTLSBroker:
    """A broker whose STOMP TLS port asks clients for certificates from one CA."""

    def __init__(self, workdir: Path) -> None:
        self.authority = Authority()
        self.ca = write_certificate(workdir / "ca.pem", self.authority.certificate)
        server = self.authority.issue(name((NameOID.COMMON_NAME, "broker")), server=True)
        cert, key = write_pair(workdir, "server", server)
        alice = self.authority.issue(name((NameOID.COMMON_NAME, "alice")))
        self.alice_cert, self.alice_key = write_pair(workdir, "alice", alice)
        stranger = Authority("Another CA").issue(name((NameOID.COMMON_NAME, "alice")))
        self.stranger_cert, self.stranger_key = write_pair(workdir, "stranger", stranger)
        (workdir / "access.toml").write_text(ACCESS)
        self.port = free_port()
        self.process = BrokerProcess(
            workdir,
            "--listen",
            f"mtls:{self.port}:privateKey={key}:certKey={cert}:caCerts={self.ca}"
            ":interface=127.0.0.1",
            "--auth",
            "cert",
            "--access",
            str(workdir / "access.toml"),
            "--data-dir",
            "none",
            http=None,
        )
        wait_for_port(self.port, process=self.process.process)

    def connect(self, cert: Path, key: Path) -> tuple[stomp.Connection12, Collector]:
        """A ``stomp.py`` connection that presents ``cert`` and sends no login."""
        address = ("127.0.0.1", self.port)
        connection = stomp.Connection12([address], auto_decode=False)
        connection.set_ssl(
            for_hosts=[address], key_file=str(key), cert_file=str(cert), ca_certs=str(self.ca)
        )
        inbox = Collector()
        connection.set_listener("inbox", inbox)
        connection.connect(wait=True)
        return connection, inbox

    def handshake(self, cert: Path | None, key: Path | None) -> bytes:
        """:returns: what the broker answers a CONNECT with, over TLS with (or without) ``cert``."""
        context = ssl.create_default_context(cafile=str(self.ca))
        if cert is not None:
            context.load_cert_chain(str(cert), str(key))
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
                return tls.recv(65536)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MutualTLSBroker]:
    broker = MutualTLSBroker(tmp_path_factory.mktemp("mtls"))
    yield broker
    broker.process.stop()


def test_client_certificate_logs_in_as_its_common_name(broker: MutualTLSBroker) -> None:
    """A verified certificate with CN=alice logs in as alice, whose access rules apply."""
    connection, inbox = broker.connect(broker.alice_cert, broker.alice_key)
    try:
        connection.subscribe("/topic/certs.a", id="0", receipt="s")
        assert inbox.wait_for(lambda: "s" in inbox.receipts)
        connection.send("/topic/certs.a", b"signed and sealed")
        assert inbox.wait_for(lambda: inbox.bodies() == [b"signed and sealed"])
    finally:
        connection.disconnect()
    assert "login of alice from 127.0.0.1" in broker.process.log()


@pytest.mark.parametrize(
    ("who", "alert"),
    [("no certificate", "CERTIFICATE_REQUIRED"), ("another CA's certificate", "UNKNOWN_CA")],
)
def test_clients_without_a_valid_certificate_do_not_get_through_tls(
    broker: MutualTLSBroker, who: str, alert: str
) -> None:
    """The mtls: listener ends the handshake of a client without a certificate from its CA."""
    cert, key = (
        (None, None) if who == "no certificate" else (broker.stranger_cert, broker.stranger_key)
    )
    with pytest.raises(ssl.SSLError, match=alert):
        broker.handshake(cert, key)
