"""
The ``spark`` fixture: one small local SparkSession for every test that runs a
Spark job (``tests/sparkjobs`` and the statistics export end to end).  The root
``conftest.py`` offers it to the whole suite; PySpark is imported only when a
test asks for it.

Starting a JVM costs seconds, so the session is shared by the whole run:
``local[1]`` and one shuffle partition keep each job a handful of tasks, and
the UI and progress bars are off so nothing listens on a port or scribbles on
the terminal.  :func:`local_session` builds it, and the session of a child
process that a test kills (``tests/sparkjobs/query_child.py``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


#: A Spark child's JVM: the client compiler only and the serial collector start
#: it in about 60% of the time, and its jobs are too small to miss the rest.
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def child_env() -> dict[str, str]:
    """:returns: the environment of a Spark child: this checkout's code, a JVM quick to start."""
    from tests.support.process import subprocess_env

    env = subprocess_env()
    env["JDK_JAVA_OPTIONS"] = " ".join(filter(None, [env.get("JDK_JAVA_OPTIONS"), QUICK_JVM]))
    return env


def local_session(name: str) -> SparkSession:
    """:returns: a ``local[1]`` SparkSession in UTC named ``name``, quiet, on loopback only."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[1]")
        .appName(name)
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.driver.memory", "512m")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A ``local[1]`` SparkSession in UTC, stopped when the test run ends."""
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        pytest.fail("the Spark tests need Java 17: apt-get install openjdk-17-jre-headless")
    session = local_session("stompbroker-tests")
    yield session
    session.stop()
