"""
Resumable sessions as operators see them, on a real in-process broker without
sockets: the book's figures from real sessions, ``/stats`` and ``/metrics``,
and the memory watermark, which counts resume buffers and sheds them before
it pauses publishers (docs/resume.md, "Costs, and what is bounded" and
"Watching them").
"""

from __future__ import annotations

from prometheus_client import generate_latest

from stompbroker.broker.flow.broker_limits import Limits
from stompbroker.protocol.resume.resume_book import ResumeBook
from stompbroker.protocol.session import SessionConfig
from stompbroker.stats.documents import stats_document
from stompbroker.stats.metrics import metrics_registry
from stompbroker.stats.model import StatsModel
from stompbroker.stats.sampling_services import LiveStats
from tests.support.broker import Client, World


def world(buffer: int = 100_000, memory_high: int = 0, memory_low: int = 0) -> World:
    """:returns: a broker world whose sessions are resumable, their book known to the broker."""
    made = World(limits=Limits(memory_high=memory_high, memory_low=memory_low))
    book = ResumeBook(made.clock, 60, buffer)
    made.broker.keep_resumable_sessions(book)
    made.config = SessionConfig(heartbeat=(0, 0), resumption=book)
    return made


def book_of(here: World) -> ResumeBook:
    book: ResumeBook = here.broker.resumption
    return book


def dropped_subscriber(here: World) -> Client:
    """:returns: a resumable client subscribed to /topic/t, whose connection is then lost."""
    client = here.client(resume_token="")
    client.send_frame("SUBSCRIBE", id="s", destination="/topic/t")
    client.session.connection_lost()
    return client


def test_real_sessions_are_counted_connected_then_detached_by_their_session_id() -> None:
    """A connected session's sent frames count as connected bytes; once dropped, as detached."""
    here = world()
    book = book_of(here)
    client = here.client(resume_token="")
    client.send_frame("SUBSCRIBE", id="s", destination="/topic/t")
    here.broker.publish("/topic/t", "hello")
    [message] = client.messages()
    assert (book.connected, book.detached) == (1, 0)
    assert book.connected_bytes > len(b"hello")
    sent = book.connected_bytes
    client.session.connection_lost()
    here.broker.publish("/topic/t", "missed")
    [record] = book.sessions()
    assert record.session == client.connected.get("session")
    assert (book.connected, book.connected_bytes, book.detached) == (0, 0, 1)
    assert book.buffered_bytes > sent
    assert record.buffer.appended - record.mark == 1


def test_a_resume_with_a_gap_is_counted() -> None:
    """A resume whose buffer overflowed counts as resumed and as resumed with a gap."""
    here = world(buffer=400)
    first = dropped_subscriber(here)
    for number in range(20):
        here.broker.publish("/topic/t", f"m{number}")
    assert book_of(here).sessions()[0].gap
    again = here.client(resume_token=first.connected.get("resume-token") or "")
    assert again.connected.get("resume-gap") == "true"
    book = book_of(here)
    assert (book.resumed, book.gaps, book.connected, book.detached) == (1, 1, 1, 0)


def test_stats_and_metrics_show_the_sessions_their_bytes_and_counters() -> None:
    """/stats has a resumable_sessions object; /metrics the gauges by state and the counters."""
    here = world()
    dropped_subscriber(here)
    here.broker.publish("/topic/t", "missed")
    here.client(resume_token="not-a-token")
    model = StatsModel(here.broker)
    figures = stats_document(model, None)["resumable_sessions"]
    held = book_of(here).buffered_bytes
    assert figures["detached"] == 1 and figures["connected"] == 1
    assert figures["detached_bytes"] == held > 0
    assert (figures["resumed"], figures["refused"], figures["expired"]) == (0, 1, 0)
    text = generate_latest(metrics_registry(LiveStats(model))).decode()
    assert 'stompbroker_resumable_sessions{state="detached"} 1.0' in text
    assert f'stompbroker_resume_buffer_bytes{{state="detached"}} {float(held)}' in text
    assert "stompbroker_resumes_refused_total 1.0" in text
    for counter in (
        "resumes",
        "resumes_with_gap",
        "resumable_sessions_expired",
        "resumable_sessions_ended",
        "resume_buffer_shed_frames",
    ):
        assert f"stompbroker_{counter}_total 0.0" in text
    here.clock.advance(60)
    assert stats_document(model, None)["resumable_sessions"]["expired"] == 1


def test_without_resumable_sessions_the_figures_are_absent() -> None:
    """A broker that keeps no resumable sessions shows null in /stats and no such metrics."""
    here = World()
    model = StatsModel(here.broker)
    assert stats_document(model, None)["resumable_sessions"] is None
    assert "resum" not in generate_latest(metrics_registry(LiveStats(model))).decode()


def test_resume_buffers_count_toward_memory_high_and_are_shed_before_publishers_pause() -> None:
    """
    Buffers of absent clients that push memory over --memory-high lose their
    older frames instead of pausing publishers; their client is told resume-gap:true.
    """
    here = world(memory_high=3000, memory_low=2000)
    here.broker.memory_gauge = lambda: 1000
    here.broker.startService()
    first = dropped_subscriber(here)
    for number in range(40):
        here.broker.publish("/topic/t", f"message {number:04d}" + "." * 50)
    book = book_of(here)
    assert 1000 + book.held_bytes() > 3000
    here.clock.advance(1)
    assert 1000 + book.held_bytes() < 2000
    assert here.broker.backpressure.pending is None
    assert book.shed_frames > 0 and book.sessions()[0].gap
    again = here.client(resume_token=first.connected.get("resume-token") or "")
    assert again.connected.get("resume-gap") == "true"
    assert again.early[-1].body.startswith(b"message 0039")
    here.broker.stopService()


def test_publishers_pause_only_when_memory_is_high_without_the_buffers() -> None:
    """Over the mark with every buffer empty, publishers pause as for any memory alarm."""
    here = world(memory_high=3000, memory_low=2000)
    used = [1000]
    here.broker.memory_gauge = lambda: used[0]
    here.broker.startService()
    dropped_subscriber(here)
    for number in range(10):
        here.broker.publish("/topic/t", f"message {number:04d}")
    used[0] = 3500
    here.clock.advance(1)
    book = book_of(here)
    assert book.held_bytes() == 0
    assert here.broker.backpressure.pending is not None
    used[0] = 1000
    here.clock.advance(1)
    assert here.broker.backpressure.pending is None
    here.broker.stopService()
