"""
Tests for :mod:`stompbroker.broker.features.duplicate_ids`: each destination's
window of duplicate-detection ids, bounded in count and time.  No clock: the
time is passed in.
"""

from __future__ import annotations

from stompbroker.broker.features.duplicate_ids import DuplicateWindows, duplicate_id_of


def test_an_id_is_new_once_per_destination() -> None:
    """The first SEND with an id is new; a repeat to the same destination is not; another is."""
    windows = DuplicateWindows()
    assert windows.first_time("/queue/a", "x", 0.0, 10, 60.0)
    assert not windows.first_time("/queue/a", "x", 1.0, 10, 60.0)
    assert windows.first_time("/queue/b", "x", 1.0, 10, 60.0)


def test_the_window_keeps_the_newest_count_ids() -> None:
    """Past ``count`` ids the oldest leaves the window, and is new again; it is reported evicted."""
    windows = DuplicateWindows()
    for number in range(3):
        assert windows.first_time("/queue/a", f"id-{number}", 0.0, 3, 60.0)
    assert windows.first_time("/queue/a", "id-3", 0.0, 3, 60.0)
    assert windows.size("/queue/a") == 3
    assert windows.take_evicted() == {"/queue/a": ["id-0"]}
    assert not windows.first_time("/queue/a", "id-1", 0.0, 3, 60.0)
    assert windows.first_time("/queue/a", "id-0", 0.0, 3, 60.0)
    assert windows.take_evicted() == {"/queue/a": ["id-1"]}


def test_an_id_older_than_the_window_is_new_again() -> None:
    """An id seen more than ``seconds`` ago has left the window."""
    windows = DuplicateWindows()
    assert windows.first_time("/queue/a", "x", 100.0, 10, 60.0)
    assert not windows.first_time("/queue/a", "x", 159.0, 10, 60.0)
    assert windows.first_time("/queue/a", "x", 160.0, 10, 60.0)


def test_a_count_of_zero_turns_detection_off() -> None:
    """With no room in the window, every SEND is new and nothing is kept."""
    windows = DuplicateWindows()
    assert windows.first_time("/queue/a", "x", 0.0, 0, 60.0)
    assert windows.first_time("/queue/a", "x", 0.0, 0, 60.0)
    assert windows.size("/queue/a") == 0


def test_a_forgotten_id_is_new_again() -> None:
    """An id whose message was not stored leaves the window: the retry goes through."""
    windows = DuplicateWindows()
    windows.first_time("/queue/a", "x", 0.0, 10, 60.0)
    windows.forget("/queue/a", "x")
    windows.forget("/queue/nowhere", "x")
    assert windows.first_time("/queue/a", "x", 0.0, 10, 60.0)


def test_seeded_ids_count_from_the_seeding_and_keep_the_newest() -> None:
    """Ids put back at start are repeats for a window from then; only the newest count stay."""
    windows = DuplicateWindows()
    for number in range(4):
        windows.seed("/queue/a", f"id-{number}", 1000.0, 3)
    windows.seed("/queue/b", "id-0", 1000.0, 0)
    assert windows.take_evicted() == {"/queue/a": ["id-0"]}
    assert not windows.first_time("/queue/a", "id-3", 1059.0, 3, 60.0)
    assert windows.first_time("/queue/a", "id-0", 1059.0, 3, 60.0)
    assert windows.first_time("/queue/b", "id-0", 1059.0, 3, 60.0)


def test_both_header_names_carry_an_id_and_the_first_wins() -> None:
    """Ours, ``duplicate-id``, and Artemis's ``_AMQ_DUPL_ID``; the first of them counts."""
    assert duplicate_id_of((("a", "1"), ("duplicate-id", "x"), ("_AMQ_DUPL_ID", "y"))) == "x"
    assert duplicate_id_of((("_AMQ_DUPL_ID", "y"),)) == "y"
    assert duplicate_id_of((("a", "1"),)) is None
