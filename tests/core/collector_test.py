"""The garbage collector's tuning: what exists is frozen, collections are
rarer."""

import gc

from codesign.core import collector


def test_tune_freezes_what_exists_and_sets_the_thresholds():
  kept = [[] for _ in range(1000)]  # containers: the collector tracks them
  before = gc.get_freeze_count()
  collector.tune()
  assert gc.get_freeze_count() >= before + len(kept)
  assert gc.get_threshold() == collector.THRESHOLDS
  assert collector.THRESHOLDS[0] > 700  # Python's default, which it raises
