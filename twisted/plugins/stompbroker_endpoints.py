"""
The ``mtls:`` server endpoint: TLS that asks clients for certificates and verifies them.

``--listen mtls:61614:privateKey=key.pem:certKey=cert.pem:caCerts=ca.pem``.  Only
the parser's name lives here, so that twistd's plugin scan stays cheap; the
endpoint is built by :func:`stompbroker.transport.mtls.mutual_tls_endpoint`.
"""

from typing import Any

from twisted.internet.interfaces import IStreamServerEndpointStringParser
from twisted.plugin import IPlugin
from zope.interface import implementer


@implementer(IPlugin, IStreamServerEndpointStringParser)
class MutualTLSServerParser:
    """Parses ``mtls:PORT:privateKey=...:certKey=...:caCerts=...`` descriptions."""

    prefix = "mtls"

    def parseStreamServer(self, reactor: Any, *args: Any, **kwargs: Any) -> Any:
        """:returns: an ``SSL4ServerEndpoint`` that verifies client certificates."""
        from stompbroker.transport.mtls import mutual_tls_endpoint

        return mutual_tls_endpoint(reactor, *args, **kwargs)


mutualTLSServerParser = MutualTLSServerParser()
