"""
permessage-deflate on the real broker: Autobahn's client (a child process, see
:mod:`tests.support.deflate_client`) offers it to ``twistd`` with ``--ws-compression``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.process import ROOT, BrokerProcess, run_python


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    workdir = tmp_path_factory.mktemp("deflate")
    with BrokerProcess(workdir, "--ws-compression", "--data-dir", "none") as process:
        yield process


def run_client(broker: BrokerProcess, *flags: str) -> dict[str, Any]:
    assert broker.ws_url is not None
    done = run_python(
        "-m", "tests.support.deflate_client", broker.ws_url, "50", "600", *flags, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_a_client_offering_deflate_gets_compressed_json(broker: BrokerProcess) -> None:
    """The offer is accepted; every message arrives, in far fewer bytes than it holds."""
    result = run_client(broker)
    assert result["extensions"] == ["PerMessageDeflate"]
    assert result["messages"] == 50
    assert result["wire_bytes_in"] < result["app_bytes_in"] / 3


def test_a_client_offering_nothing_is_served_uncompressed(broker: BrokerProcess) -> None:
    """The same exchange without an offer: plain messages, as many bytes on the wire."""
    result = run_client(broker, "--no-offer")
    assert result["extensions"] == []
    assert result["messages"] == 50
    assert result["wire_bytes_in"] >= result["app_bytes_in"]
