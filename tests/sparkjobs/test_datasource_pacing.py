"""``minMessagesPerTrigger`` with ``maxTriggerDelay``: the Kafka source's rule, on a given clock."""

from __future__ import annotations

from sparkjobs.datasource.pacing import TriggerPacing


class Clock:
    """Seconds that move only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_first_trigger_runs_then_a_batch_waits_for_the_minimum_or_the_delay() -> None:
    clock = Clock()
    pacing = TriggerPacing(minimum=5, max_delay=60.0, clock=clock)
    assert pacing.admit(lambda: 1)
    clock.now += 10
    assert not pacing.admit(lambda: 4)
    assert pacing.admit(lambda: 5)
    clock.now += 59.9
    assert not pacing.admit(lambda: 0)
    clock.now += 0.1
    assert pacing.admit(lambda: 1)
    clock.now += 30
    assert not pacing.admit(lambda: 2), "the delay counts from the last batch, not the first"


def test_no_count_is_taken_once_the_delay_has_passed() -> None:
    """Counting may read messages on the driver: a trigger already due does not."""
    clock = Clock()
    pacing = TriggerPacing(minimum=5, max_delay=1.0, clock=clock)
    counted: list[int] = []

    def count() -> int:
        counted.append(1)
        return 0

    assert pacing.admit(count)
    clock.now += 2
    assert pacing.admit(count)
    assert counted == []
