"""
How a parallel run (pytest-xdist, ``--dist loadgroup``, which pyproject.toml
asks for) spreads the tests over its workers.

Each test module goes to one worker whole, so that a module-scoped fixture (a
shared broker, a Redis server, a pair of cluster nodes) starts once, not once
per worker.  Every test that needs Spark goes to one worker too: a
SparkSession is a JVM of half a gigabyte that takes seconds to start, and the
``spark`` fixture is per worker.  The heavy modules, those that start
processes, are handed out first and the quick ones last, so the workers finish
together rather than one waiting on a long module started at the end.

``-n auto`` starts half again as many workers as there are cores: an
integration test spends much of its time waiting on the processes it started
(a broker, Redis, Chromium), so two workers on two cores left about a core
idle (a fresh clone's run: 8 min of CPU in 9.7 min), and three finish the
suite in about four fifths of the time.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.tiers import is_integration

#: The Spark jobs' tests, which start Spark in the test process or in children.
SPARKJOBS = Path(__file__).resolve().parents[1] / "sparkjobs"


def group_of(item: pytest.Item) -> str:
    """:returns: the name of the unit of work ``item`` belongs to: ``spark``, or its module."""
    if "spark" in getattr(item, "fixturenames", ()) or SPARKJOBS in Path(str(item.path)).parents:
        return "spark"
    return item.nodeid.split("::", 1)[0]


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """:returns: the workers ``-n auto`` starts: one and a half per core, at least two."""
    return max(2, (os.cpu_count() or 1) * 3 // 2)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group each test and put the heavy ones first, before pytest-xdist reads the groups."""
    if not hasattr(config, "workerinput"):
        return
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item)))
    items.sort(key=handing_order)


def handing_order(item: pytest.Item) -> int:
    """:returns: 0 for Spark's tests (the longest unit), 1 for other integration tests, 2 else."""
    if group_of(item) == "spark":
        return 0
    return 1 if is_integration(item) else 2
