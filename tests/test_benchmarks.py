"""
The benchmark suite (``benchmarks/``): its scanner and framing without sockets, then
every scenario for about a second against the real broker.

The scenario tests use tiny numbers: they check that each run ends by itself, that
its JSON line has the fields the docs promise, and that nothing was lost or
duplicated, not how fast anything is.
"""

from __future__ import annotations

import json
import os
import resource
import socketserver
import struct
import subprocess
import sys
import threading
import time
from array import array
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks import fanout_cost, paging, queue_cost
from benchmarks.cases import Case, Settings, Target
from benchmarks.cli import build_parser, cases_from, main, settings_from
from benchmarks.connection import Endpoint
from benchmarks.idle import fd_headroom
from benchmarks.launcher import PORTS, ROOT, port_block, subprocess_env
from benchmarks.measure import merge_seen, percentiles
from benchmarks.scenarios import _flow_shape, run_case
from benchmarks.websocket import FrameDecoder, client_frame, unmask
from benchmarks.wire import Inbox, SendTemplate, split_frames
from stompbroker.protocol.parser import FrameParser
from tests.support.process import BrokerProcess, free_port
from tests.support.redis import redis_server_binary

BODY = b"x" * 117


def message(seq: int, extra: str = "") -> bytes:
    """A MESSAGE frame as a broker would deliver a benchmark SEND."""
    return (
        (
            f"MESSAGE\ndestination:/topic/b\nmessage-id:m-{seq}\nsubscription:s1\n{extra}"
            f"seq:{seq}\ncontent-length:117\n\n"
        ).encode()
        + BODY
        + b"\x00"
    )


def feed(inbox: Inbox, stream: bytes, cuts: list[int]) -> None:
    """Feed ``stream`` to ``inbox`` in pieces cut at ``cuts``."""
    bounds = [0, *sorted(set(cuts)), len(stream)]
    for start, end in zip(bounds, bounds[1:], strict=False):
        inbox.receive(stream[start:end])


# -- the scanner ----------------------------------------------------------------


@pytest.mark.parametrize("ordered", [False, True])
def test_inbox_counts_each_seq_once_however_the_stream_is_cut(ordered: bool) -> None:
    """
    Frames split anywhere across reads, and EOLs between frames (STOMP 1.2, "Augmented BNF"),
    are each counted once.
    """
    stream = b"\n".join(message(seq) for seq in range(20))
    for cut in range(len(stream)):
        inbox = Inbox(ordered=ordered)
        feed(inbox, stream, [cut])
        assert (inbox.received, inbox.unique(), inbox.duplicated, inbox.out_of_order) == (
            20,
            20,
            0,
            0,
        )


@given(
    seqs=st.lists(st.integers(min_value=0, max_value=300), max_size=60),
    cuts=st.lists(st.integers(min_value=0, max_value=20000), max_size=5),
)
def test_fast_path_agrees_with_frame_by_frame_path(seqs: list[int], cuts: list[int]) -> None:
    """
    The in-order fast path counts received, unique, duplicated and out-of-order exactly like the
    frame loop, which matches a brute-force count.
    """
    stream = b"".join(message(seq) for seq in seqs) + b"RECEIPT\nreceipt-id:r\n\n\x00"
    figures = []
    for ordered in (False, True):
        inbox = Inbox(ordered=ordered)
        feed(inbox, stream, [cut % (len(stream) + 1) for cut in cuts])
        figures.append(
            (inbox.received, inbox.unique(), inbox.duplicated, inbox.out_of_order, inbox.receipts)
        )
    out_of_order = sum(1 for index, seq in enumerate(seqs) if seq < max(seqs[:index], default=-1))
    expected = (len(seqs), len(set(seqs)), len(seqs) - len(set(seqs)), out_of_order, 1)
    assert figures == [expected, expected]


def test_inbox_keeps_the_first_error_and_counts_foreign_messages() -> None:
    """
    An ERROR frame's message header is kept (STOMP 1.2, "ERROR"), and a MESSAGE without seq is
    counted as foreign.
    """
    inbox = Inbox()
    inbox.receive(
        message(0)
        + b"MESSAGE\ndestination:/topic/b\nmessage-id:x\n\nnot ours\x00"
        + b"ERROR\nmessage:unknown destination\n\nbody\x00"
        + b"ERROR\nmessage:second\n\n\x00"
    )
    assert (inbox.received, inbox.foreign, inbox.error) == (1, 1, "unknown destination")


def test_inbox_times_messages_from_their_ts_header_after_the_warmup() -> None:
    """Latency is arrival time minus the ts header, for seq at or above the warm-up."""
    template = SendTemplate("/topic/b", BODY)
    inbox = Inbox(warmup_seq=1, timed=True)
    inbox.receive(
        template.timed_frame(0, 1_000, False) + template.timed_frame(1, 2_000, True), 5_000
    )
    assert list(inbox.latencies) == [3_000]


@pytest.mark.parametrize(
    ("version", "mode", "expected"),
    [
        ("1.2", "client-individual", [b"ACK\nid:a0\n\n\x00", b"ACK\nid:a1\n\n\x00"]),
        ("1.2", "client", [b"ACK\nid:a1\n\n\x00"]),
        ("1.1", "client", [b"ACK\nsubscription:s1\nmessage-id:m-1\n\n\x00"]),
        (
            "1.0",
            "client-individual",
            [b"ACK\nmessage-id:m-0\n\n\x00", b"ACK\nmessage-id:m-1\n\n\x00"],
        ),
        ("1.2", "auto", []),
    ],
)
def test_acks_follow_the_version_and_the_ack_mode(
    version: str, mode: str, expected: list[bytes]
) -> None:
    """
    client acknowledges cumulatively and client-individual each message; 1.2 ACKs carry the ack
    header's id, 1.1 subscription and message-id, 1.0 message-id (STOMP 1.2, "ACK"; 1.1, "ACK").
    """
    inbox = Inbox(version, "s1", mode)
    inbox.receive(message(0, "ack:a0\n") + message(1, "ack:a1\n"))
    assert inbox.take_acks() == expected
    assert inbox.take_acks() == []


def test_send_template_frames_are_valid_stomp() -> None:
    """
    Pre-encoded SENDs parse with the broker's own parser, with seq, receipt, ts and content-
    length right.
    """
    template = SendTemplate("/queue/q", BODY, (("persistent", "true"),))
    parser = FrameParser()
    frames = parser.receive_data(
        b"".join(template.frames(range(3, 9, 2), receipt=True)) + template.timed_frame(11, 42, True)
    )
    assert [frame.get("seq") for frame in frames] == ["3", "5", "7", "11"]
    assert [frame.get("receipt") for frame in frames] == [None, None, "r7", "r11"]
    assert frames[3].get("ts") == "42"
    assert {
        (frame.get("persistent"), frame.get("content-length"), frame.body) for frame in frames
    } == {("true", "117", BODY)}


def test_send_template_varies_a_header_with_seq() -> None:
    """A varying header gets PREFIX<seq % modulus> on every frame, timed ones and receipts too."""
    template = SendTemplate("/queue/q", BODY, (), ("JMSXGroupID", "g", 100))
    parser = FrameParser()
    encoded = b"".join(template.frames(range(99, 102), receipt=True))
    frames = parser.receive_data(encoded + template.timed_frame(250, 7, False))
    assert [(f.get("seq"), f.get("JMSXGroupID")) for f in frames] == [
        ("99", "g99"),
        ("100", "g0"),
        ("101", "g1"),
        ("250", "g50"),
    ]
    assert frames[2].get("receipt") == "r101" and frames[3].get("ts") == "7"


def test_split_frames_keeps_the_incomplete_rest() -> None:
    """Set-up reads cut complete frames out of the stream and keep the partial one."""
    frames, rest = split_frames(b"\nCONNECTED\nversion:1.2\n\n\x00RECEI")
    assert (frames, rest) == ([b"CONNECTED\nversion:1.2\n\n"], b"RECEI")


# -- WebSocket framing ----------------------------------------------------------


def server_frame(payload: bytes, opcode: int = 0x1) -> bytes:
    """An unmasked server frame (RFC 6455 section 5.2)."""
    if len(payload) < 126:
        return struct.pack("!BB", 0x80 | opcode, len(payload)) + payload
    return struct.pack("!BBH", 0x80 | opcode, 126, len(payload)) + payload


@pytest.mark.parametrize("size", [0, 5, 125, 126, 70000])
def test_client_frames_are_masked_and_unmask_to_the_payload(size: int) -> None:
    """
    Client frames set the mask bit and carry a key that unmasks the payload (RFC 6455 section
    5.3).
    """
    payload = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    frame = client_frame(payload)
    assert frame[0] == 0x81 and frame[1] & 0x80
    length = frame[1] & 0x7F
    start = 2 + {126: 2, 127: 8}.get(length, 0)
    key, masked = frame[start : start + 4], frame[start + 4 :]
    assert unmask(masked, key) == payload


def test_decoder_joins_payloads_answers_pings_and_notes_close() -> None:
    """
    Data frames split anywhere come back as the STOMP stream; a ping is owed a pong, a close
    ends it (RFC 6455 section 5.5).
    """
    big = b"y" * 300
    wire = server_frame(b"MESSAGE\n\n\x00") + server_frame(b"ping", 0x9) + server_frame(big, 0x2)
    wire += server_frame(b"", 0x8)
    decoder = FrameDecoder()
    stream = b"".join(decoder.feed(wire[index : index + 7]) for index in range(0, len(wire), 7))
    assert stream == b"MESSAGE\n\n\x00" + big
    [pong] = decoder.replies
    assert pong[0] == 0x8A and unmask(pong[6:], pong[2:6]) == b"ping"
    assert decoder.closed


# -- figures --------------------------------------------------------------------


def test_percentiles_use_the_nearest_rank() -> None:
    """p50 of 1..1000 ms is the 500th value, p99.9 the 999th."""
    figures = percentiles(array("q", (value * 1_000_000 for value in range(1000, 0, -1))))
    assert (figures["p50_ms"], figures["p99_ms"], figures["p99_9_ms"], figures["max_ms"]) == (
        500.0,
        990.0,
        999.0,
        1000.0,
    )


def test_merge_seen_counts_distinct_and_overlapping_seqs() -> None:
    """A seq two consumers both got is a duplicate; the union is what arrived at all."""
    assert merge_seen([b"\x01\x01\x00\x01", b"\x00\x01\x01", b"\x00\x00\x00\x01\x00"]) == (4, 2)


def test_selector_fanout_runs_beside_fanout_when_named() -> None:
    """Named, selector-fanout runs for each --subscribers count, as fanout does."""
    args = build_parser().parse_args(["fanout", "selector-fanout", "--subscribers", "10"])
    assert [case.label for case in cases_from(args)] == [
        "fanout 10 sub",
        "selector-fanout 10 sub",
    ]


def test_feature_queue_scenarios_run_when_named() -> None:
    """queue-groups and queue-priorities run in each ack mode when named, as queue does."""
    args = build_parser().parse_args(["queue-groups", "queue-priorities"])
    assert [case.label for case in cases_from(args)] == [
        f"{scenario} 4x4 {ack}"
        for scenario in ("queue-groups", "queue-priorities")
        for ack in ("auto", "client", "client-individual")
    ]


def test_cli_defaults_give_the_issue_cases() -> None:
    """
    Without options the suite runs fan-out to 10 and 75, 4x4 queues (plain and persistent) in
    each ack mode, 117-byte bodies, 10 000 msg/s latency; the feature scenarios run when named.
    """
    args = build_parser().parse_args([])
    labels = [case.label for case in cases_from(args)]
    assert labels == [
        "idle",
        "fanout 10 sub",
        "fanout 75 sub",
        "ws-fanout 10 sub",
        "queue 4x4 auto",
        "queue 4x4 client",
        "queue 4x4 client-individual",
        "persistent 4x4 auto",
        "persistent 4x4 client",
        "persistent 4x4 client-individual",
        "latency 1 sub",
    ]
    settings = settings_from(args)
    assert (settings.size, settings.rate, settings.receipt_every, settings.window) == (
        117,
        10_000,
        100,
        4,
    )
    shallow = settings_from(build_parser().parse_args(["--flow", "shallow"]))
    assert (shallow.receipt_every, shallow.window) == (8, 1)


def test_cli_persistent_scenario_is_the_issues_persistent_case() -> None:
    """
    Issue 14's persistent case (persistent:true, a receipt on every SEND, 4x4,
    client-individual, 1 KiB bodies) is ``persistent --ack client-individual --size 1024``.
    """
    args = build_parser().parse_args(["persistent", "--ack", "client-individual", "--size", "1024"])
    [case] = cases_from(args)
    assert case.label == "persistent 4x4 client-individual"
    settings = settings_from(args)
    assert settings.size == 1024
    assert _flow_shape(case, settings)["receipt_every"] == 1


# -- against the real broker ----------------------------------------------------

TINY = Settings(
    duration=0.6,
    max_count=50_000,
    stall=3.0,
    drain=5.0,
    procs=2,
    rate=2_000,
    warmup=0.1,
    connections=60,
    hold=0.2,
    setup_timeout=10.0,
)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """One real broker, with its WebSocket port, for the scenario tests of this module."""
    with BrokerProcess(tmp_path_factory.mktemp("bench-broker")) as broker:
        yield Target("stompbroker", Endpoint(*broker.address, broker.ws_url), broker.pid)


COMMON_FIELDS = {
    "benchmark",
    "scenario",
    "case",
    "target",
    "published",
    "delivered",
    "lost",
    "duplicated",
    "gen_cpu_pct",
    "broker_cpu_pct",
    "machine_cpu_pct",
    "receipt_every",
    "window",
    "ok",
    "error",
}


@pytest.mark.integration
@pytest.mark.parametrize(
    ("case", "headline"),
    [
        (Case("fanout", subscribers=3), "deliveries_per_s"),
        (Case("selector-fanout", subscribers=4), "deliveries_per_s"),
        (Case("ws-fanout", subscribers=2), "deliveries_per_s"),
        (Case("queue", producers=2, consumers=2, ack="auto"), "msgs_per_s"),
        (Case("queue", producers=2, consumers=2, ack="client"), "msgs_per_s"),
        (Case("queue", producers=2, consumers=2, ack="client-individual"), "msgs_per_s"),
        (Case("persistent"), "msgs_per_s"),
        (Case("queue-groups", producers=2, consumers=2, ack="client-individual"), "msgs_per_s"),
        (Case("queue-priorities", producers=2, consumers=2, ack="client"), "msgs_per_s"),
        (Case("latency"), "p99_ms"),
    ],
    ids=lambda value: value.label.replace(" ", "-") if isinstance(value, Case) else None,
)
def test_scenario_delivers_everything_once(target: Target, case: Case, headline: str) -> None:
    """
    Each publish-and-receive scenario ends by itself with every seq delivered exactly once and
    its figures in the JSON line.
    """
    started = time.monotonic()
    result = json.loads(json.dumps(run_case(case, target, TINY)))
    assert time.monotonic() - started < 20
    assert result["ok"], result
    assert COMMON_FIELDS <= result.keys()
    assert result["published"] > 0 and result["lost"] == 0 and result["duplicated"] == 0
    assert result[headline] > 0 and result["broker_cpu_pct"] is not None
    if case.scenario in ("queue", "queue-groups", "queue-priorities"):
        assert sum(result["per_consumer"]) == result["published"]
    elif case.scenario != "persistent":
        assert result["complete_subscribers"] == case.subscribers


@pytest.mark.integration
def test_shallow_pipeline_fanout(target: Target) -> None:
    """With one receipt outstanding every 8 frames the fan-out still delivers everything once."""
    shallow = attrs.evolve(TINY, receipt_every=8, window=1)
    result = run_case(Case("fanout", subscribers=2), target, shallow)
    assert result["ok"] and (result["receipt_every"], result["window"]) == (8, 1), result


@pytest.mark.integration
def test_idle_connections_are_held_and_measured(target: Target) -> None:
    """
    Every idle subscribed connection still receives the probe after the hold, and the broker's
    RSS per connection is reported.
    """
    result = run_case(Case("idle"), target, TINY)
    assert result["ok"], result
    assert result["held"] == result["opened"] == TINY.connections
    assert result["rss_per_conn_kb"] is not None and result["broker_fds"] >= TINY.connections


class SilentBroker(socketserver.ThreadingTCPServer):
    """A fake broker that connects and subscribes but never confirms a SEND."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), SilentHandler)


class SilentHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.settimeout(10)
        stream = b""
        while True:
            try:
                data = self.request.recv(65536)
            except OSError:
                return
            if not data:
                return
            frames, stream = split_frames(stream + data)
            for frame in frames:
                if frame.startswith(b"CONNECT"):
                    self.request.sendall(b"CONNECTED\nversion:1.2\n\n\x00")
                elif frame.startswith(b"SUBSCRIBE"):
                    receipt = frame.split(b"receipt:")[1].split(b"\n")[0]
                    self.request.sendall(b"RECEIPT\nreceipt-id:" + receipt + b"\n\n\x00")


@pytest.mark.integration
def test_a_broker_that_stops_answering_ends_the_run_as_stalled() -> None:
    """
    When no receipt comes for --stall seconds the publisher stops, the run ends on its own and
    is not ok.
    """
    server = SilentBroker()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address
        settings = Settings(duration=5.0, stall=0.5, drain=1.0, setup_timeout=5.0)
        started = time.monotonic()
        result = run_case(
            Case("fanout", subscribers=1), Target("silent", Endpoint(host, port)), settings
        )
        assert time.monotonic() - started < 10
    finally:
        server.shutdown()
        server.server_close()
    assert result["stalled"] and not result["ok"]
    assert result["published"] == settings.receipt_every * settings.window


@pytest.mark.integration
def test_compare_runs_both_brokers_and_prints_ratios(
    target: Target, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """
    --compare alternates the suite's own stompbroker with another broker and prints a ratio per
    case.
    """
    json_out = tmp_path / "results.jsonl"
    status = main(
        [
            "fanout",
            "--subscribers", "2",
            "--duration", "0.5",
            "--compare", f"127.0.0.1:{target.endpoint.port}",
            "--compare-pid", str(target.pid),
            "--compare-name", "peer",
            "--json-out", str(json_out),
        ]
    )  # fmt: skip
    output = capsys.readouterr().out
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert status == 0, output
    assert [(line["target"], line["ok"]) for line in lines] == [
        ("stompbroker", True),
        ("peer", True),
    ]
    assert lines[0]["address"] != lines[1]["address"]
    assert "stompbroker / peer" in output
    assert len(json_out.read_text().splitlines()) == 2


@pytest.mark.integration
def test_cluster_scenarios_cross_two_nodes_and_lose_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """
    cluster-fanout and cluster-queue start redis-server and two nodes, publish on one and
    receive on the other, and deliver everything once; they run only when named.
    """
    redis_server_binary()
    assert all("cluster" not in case.label for case in cases_from(build_parser().parse_args([])))
    status = main(
        [
            "cluster-fanout", "cluster-queue",
            "--subscribers", "2",
            "--producers", "2", "--consumers", "2", "--ack", "client-individual",
            "--duration", "0.5",
        ]
    )  # fmt: skip
    output = capsys.readouterr().out
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert status == 0, output
    assert [(line["case"], line["ok"], line["lost"]) for line in lines] == [
        ("cluster-fanout 2 sub", True, 0),
        ("cluster-queue 2x2 client-individual", True, 0),
    ]


def test_unknown_scenario_is_refused() -> None:
    """A misspelt scenario is a usage error, not a silent no-op."""
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["fanuot"])
    assert exit_info.value.code == 2


@pytest.mark.integration
def test_unreachable_broker_is_reported_not_raised() -> None:
    """A broker nobody listens for gives a result with an error, quickly."""
    target = Target("nobody", Endpoint("127.0.0.1", free_port()))
    result = run_case(Case("fanout", subscribers=1), target, Settings(setup_timeout=2.0))
    assert not result["ok"] and "cannot connect" in result["error"]


def test_websocket_case_is_skipped_for_a_broker_without_an_endpoint() -> None:
    """A broker with no WebSocket URL skips the WebSocket fan-out instead of failing the run."""
    result = run_case(
        Case("ws-fanout", subscribers=1), Target("tcp-only", Endpoint("127.0.0.1", 1)), TINY
    )
    assert result["skipped"] and not result["ok"] and "error" not in result


def test_idle_connections_stay_within_the_brokers_free_descriptors() -> None:
    """The idle scenario opens at most 80% of the descriptors a process has free (from /proc)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    open_now = len(os.listdir("/proc/self/fd"))
    headroom = fd_headroom(os.getpid())
    assert headroom is not None and abs(headroom - int((soft - open_now) * 0.8)) <= 2


def test_queue_cost_moves_every_message_once_and_prints_its_cost(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """
    benchmarks.queue_cost runs each ack mode through real sessions and prints a JSON line per mode.
    """
    assert queue_cost.main(["--messages", "2000", "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    records = [json.loads(line) for line in lines if line.startswith("{")]
    assert [record["ack"] for record in records] == list(queue_cost.ACK_MODES)
    for record in records:
        assert record["messages"] == 2000
        assert record["us_per_message"] > 0
        assert record["msgs_per_s_one_core"] == pytest.approx(1e6 / record["us_per_message"], 1e-3)


def test_queue_cost_refuses_a_run_that_lost_or_duplicated(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose messages do not arrive exactly once is an error, not a figure."""
    original = queue_cost.Run._batch

    def same_seq_twice(start: int) -> bytes:
        return original(start).replace(b"seq:%d\n" % (start + 1), b"seq:%d\n" % start)

    monkeypatch.setattr(queue_cost.Run, "_batch", staticmethod(same_seq_twice))
    with pytest.raises(RuntimeError, match="1 lost, 1 duplicated"):
        queue_cost.measure("client-individual", 100, 1)


@pytest.mark.parametrize("frames", ("suite", "stompbench"))
@pytest.mark.parametrize("part", ("path", "send", "parse-send", "parse-ack"))
def test_queue_parts_runs_each_part_over_the_messages_asked_for(part: str, frames: str) -> None:
    """benchmarks.queue_parts moves every message of a part (the path: each once) and exits 0."""
    from benchmarks import queue_parts

    assert queue_parts.run_part(part, 300, frames) == 300
    assert queue_parts.main([part, "300", "--frames", frames]) == 0


@pytest.mark.parametrize("writer", ("inline", "thread"))
def test_persistent_parts_stores_receipts_delivers_and_removes_every_message(
    writer: str, tmp_path: Path
) -> None:
    """benchmarks.persistent_parts: a RECEIPT and one delivery per message, and the store empty."""
    from benchmarks import persistent_parts

    run = persistent_parts.run_path(160, body=100, writer=writer, where=str(tmp_path))
    assert (run.sent, run.receipts, len(run.seen)) == (160, 160, 160)
    # Ten rounds of sixteen SENDs, each its commit; the ACKs' deletes ride the next.
    assert run.store is not None and run.store.stats.operations >= 320
    assert persistent_parts.main(["64", "--dir", str(tmp_path)]) == 0
    assert persistent_parts.main(["64", "--writer", "none"]) == 0


@pytest.mark.parametrize("part", ("read", "entries"))
def test_cluster_read_parts_takes_and_settles_every_message_read(part: str) -> None:
    """benchmarks.cluster_read_parts: every message read is settled, one script per read."""
    from benchmarks import cluster_read_parts

    assert cluster_read_parts.run_part(part, 1200) == 1000
    assert cluster_read_parts.main([part, "500"]) == 0


@pytest.mark.parametrize("ack", queue_cost.ACK_MODES)
def test_queue_cost_with_the_go_generators_frames_moves_every_message_once(ack: str) -> None:
    """queue_cost --frames stompbench: three user headers per SEND, ACKs naming three headers."""
    record = queue_cost.measure(ack, 1000, 1, "stompbench")
    assert record["frames"] == "stompbench" and record["messages"] == 1000


def test_fanout_cost_delivers_every_message_to_every_subscriber_and_prints_its_cost(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """benchmarks.fanout_cost fans out through real sessions and prints a JSON line per count."""
    assert fanout_cost.main(["--messages", "300", "--subscribers", "1,3", "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    records = [json.loads(line) for line in lines if line.startswith("{")]
    assert [record["subscribers"] for record in records] == [1, 3]
    for record in records:
        assert record["messages"] == 300
        assert record["us_per_delivery"] > 0
        assert record["deliveries_per_s_one_core"] == pytest.approx(
            1e6 / record["us_per_delivery"], 1e-3
        )


def test_fanout_cost_refuses_a_run_that_lost_a_delivery(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run in which a subscriber missed a message is an error, not a figure."""
    original = fanout_cost.Run._batch

    def one_fewer(start: int) -> bytes:
        return original(start).replace(b"seq:%d\n" % start, b"noseq:%d\n" % start)

    monkeypatch.setattr(fanout_cost.Run, "_batch", staticmethod(one_fewer))
    with pytest.raises(RuntimeError, match="got \\[99\\] of 100"):
        fanout_cost.measure(2, 100, 1)


@pytest.mark.integration
def test_api_publish_checks_the_depth_after_each_batch_size(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """benchmarks.api_publish publishes one by one and in batches, the queue's depth checked."""
    from benchmarks import api_publish

    assert api_publish.main(["--messages", "30", "--batches", "1,7"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line[:1] == "{"]
    assert [line["figure"] for line in lines] == ["batches of 1", "batches of 7"]
    assert all(line["value"] > 0 for line in lines)


@pytest.mark.integration
def test_webhook_latency_hears_each_member_and_the_one_sent_while_down(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """benchmarks.webhook_latency times member_added and a delivery after the app was down."""
    from benchmarks import webhook_latency

    assert webhook_latency.main(["--repeat", "2", "--down", "0.5"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line[:1] == "{"]
    assert [line["figure"].split(" (")[0] for line in lines] == [
        "member_added, SUBSCRIBE to the app",
        "after 0.5 s down",
    ]
    assert all(line["value"] > 0 for line in lines)


@pytest.mark.integration
def test_presence_latency_reads_each_join_and_leave_on_both_nodes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """benchmarks.presence_latency times a member's join and leave, each event checked."""
    from benchmarks import presence_latency

    redis_server_binary()
    assert presence_latency.main(["--repeat", "2"]) == 0
    output = capsys.readouterr().out
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert [line["figure"] for line in lines] == [
        "member join, same node",
        "member leave, same node",
        "member join, other node",
        "member leave, other node",
    ]
    assert all(line["value"] > 0 for line in lines)


@pytest.mark.integration
def test_resume_cluster_resumes_on_both_nodes_with_every_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """benchmarks.resume_cluster resumes on the same node and on the other, each checked."""
    from benchmarks import resume_cluster

    redis_server_binary()
    assert resume_cluster.main(["--missed", "50", "--repeat", "1"]) == 0
    output = capsys.readouterr().out
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert [(line["figure"], line["unit"].strip()) for line in lines] == [
        ("resume of 50 missed messages, same node", "ms to caught-up"),
        ("resume of 50 missed messages, other node", "ms to caught-up"),
        ("resume of 50 missed messages, same node", "CPU ms, nodes + Redis"),
        ("resume of 50 missed messages, other node", "CPU ms, nodes + Redis"),
    ]
    assert all(line["value"] > 0 for line in lines)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("part", "flags", "command"),
    [
        ("send", [], "xadd 1.00"),
        ("route", [], ""),
        ("send", ["--persistent", "--duplicate-id"], "zadd 1.00"),
    ],
)
def test_cluster_publish_parts_stores_every_message_sent(
    part: str, flags: list[str], command: str
) -> None:
    """
    benchmarks.cluster_publish_parts (its own reactor: a process of its own) exits 0, and
    prints the Redis commands per SEND (one script each with a duplicate-id: one ZADD in it;
    the script goes as EVAL until Redis holds it, then EVALSHA).
    """
    redis_server_binary()
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.cluster_publish_parts", part, "800", *flags],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert "800 SENDs" in done.stdout.decode() and command in done.stdout.decode()


@pytest.mark.integration
@pytest.mark.parametrize("flags", [["--kill"], ["--non-persistent"]])
def test_backlog_fills_kills_restarts_and_drains_exactly_once_in_order(
    flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """benchmarks.backlog prints one JSON line with its figures, and checks the drain."""
    from benchmarks import backlog

    assert backlog.main(["--total", "300K", "--window", "20", *flags]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["receipted"] == 300 and report["delivered"] == 300
    assert (report["lost"], report["duplicated"], report["out_of_order"]) == (0, 0, 0)
    assert report["held"] is False and report["peak_rss_mb"] > 0
    assert (report["restart_listen_s"] is not None) == ("--kill" in flags)


@pytest.mark.integration
def test_the_paging_benchmark_builds_restarts_and_drains_a_paged_backlog() -> None:
    """benchmarks.paging, tiny: the backlog pages, comes back after SIGKILL, drains in order."""
    tiny = ["--megabytes", "1", "--fit-megabytes", "1", "--queue-memory", "64K", "--window", "50"]
    report = paging.run(paging.build_parser().parse_args(tiny))
    assert report["messages"] == 1024 and report["fit_messages"] == 1024
    for key in ("first_listen_s", "restart_listen_s", "restart_rss_mb", "drain_msgs_per_s"):
        assert report[key] > 0


@pytest.mark.integration
def test_the_paging_benchmark_drains_a_paged_non_persistent_backlog() -> None:
    """benchmarks.paging --non-persistent, tiny: built and drained in order, no restart."""
    tiny = ["--megabytes", "1", "--fit-megabytes", "1", "--queue-memory", "64K", "--window", "50"]
    report = paging.run(paging.build_parser().parse_args([*tiny, "--non-persistent"]))
    assert report["persistent"] is False and report["messages"] == 1024
    assert report["drain_msgs_per_s"] > 0 and report["fit_drain_msgs_per_s"] > 0
    assert "restart_listen_s" not in report and report["build_slowest_tenth_share"] > 0


@pytest.mark.integration
def test_the_paging_benchmark_times_a_move_of_a_paged_queue() -> None:
    """benchmarks.paging --move, tiny: one API call moves the whole paged queue."""
    report = paging.move_cost(600, 100, 50, "16K")
    assert (report["messages"], report["moved"]) == (600, 600)
    assert report["move_s"] > 0 and len(report["probe_ms_during"]) == 3


def test_each_test_worker_picks_ports_of_its_own_below_the_ephemeral_range() -> None:
    """Two pytest-xdist workers never hand out the same port, nor one a connection could take."""
    blocks = [set(port_block(f"gw{index}", 3)) for index in range(3)]
    assert all(blocks) and sum(map(len, blocks)) == len(set().union(*blocks))
    assert max(PORTS) < 32768 and set().union(*blocks) <= set(PORTS)
    assert port_block(None, 1) == PORTS
