"""
The report run with plain ``python`` starts a quiet local Spark: no warnings a
report user cannot act on (the native-hadoop library, windows without
partitions), no progress bars, no "Setting default log level" notice.
"""

from __future__ import annotations

import shlex

import pytest

from sparkjobs.report import QUIET_LOGGING, quiet_local_spark
from tests.support.process import run_python

#: A local session started as the report starts its own, counting three rows.
SESSION = """
from sparkjobs.report import quiet_local_spark
quiet_local_spark()
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").getOrCreate()
print(spark.range(3).count())
spark.stop()
"""


def test_the_submit_arguments_point_spark_at_the_quiet_configuration() -> None:
    """Unset, PYSPARK_SUBMIT_ARGS gets the errors-only log4j file and no progress bars."""
    environ: dict[str, str] = {}
    quiet_local_spark(environ)
    arguments = shlex.split(environ["PYSPARK_SUBMIT_ARGS"])
    assert arguments[-1] == "pyspark-shell"
    assert f"-Dlog4j2.configurationFile={QUIET_LOGGING.absolute()}" in arguments
    assert "spark.ui.showConsoleProgress=false" in arguments
    assert QUIET_LOGGING.is_file()


def test_submit_arguments_of_ones_own_are_left_alone() -> None:
    """A user's PYSPARK_SUBMIT_ARGS is theirs: the report does not touch it."""
    environ = {"PYSPARK_SUBMIT_ARGS": "--driver-memory 2g pyspark-shell"}
    quiet_local_spark(environ)
    assert environ == {"PYSPARK_SUBMIT_ARGS": "--driver-memory 2g pyspark-shell"}


@pytest.mark.integration
def test_a_quiet_local_session_prints_no_spark_warnings() -> None:
    """A real local session started so logs no WARN line and no log-level notice."""
    completed = run_python("-c", SESSION, timeout=180)
    assert (completed.returncode, completed.stdout) == (0, "3\n")
    assert "WARN " not in completed.stderr
    assert "NativeCodeLoader" not in completed.stderr
    assert "Setting default log level" not in completed.stderr
