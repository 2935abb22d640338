"""The experiment scripts (absl apps); see WORKSPACE.md."""

import sys as _sys

from experiments import early as _early
from experiments import signals as _signals
from experiments import streams as _streams

if _signals.is_script():
  _streams.guard()
  _signals.install()
  _early.refuse_if_in_use(_sys.argv[1:])
