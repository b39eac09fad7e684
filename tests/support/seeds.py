"""
The seed of a test that draws random numbers (a random moment to kill a broker):
random on every run, unless ``STOMPBROKER_TEST_SEED`` fixes it, and always
printed, so that the run of a failure can be repeated exactly.
"""

from __future__ import annotations

import os
import random

#: The environment variable that fixes the seed of every test that draws one.
SEED_VARIABLE = "STOMPBROKER_TEST_SEED"


def chosen_seed() -> int:
    """
    :returns: the seed for this test, printed (pytest shows it with a failure's output).
    :raises ValueError: when :data:`SEED_VARIABLE` is set to something not an integer.
    """
    fixed = os.environ.get(SEED_VARIABLE)
    seed = int(fixed) if fixed else random.randrange(2**32)
    print(f"seed {seed}; repeat with {SEED_VARIABLE}={seed}")
    return seed
