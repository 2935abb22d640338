"""The experiment scripts (absl apps); see WORKSPACE.md."""

from experiments import signals as _signals

if _signals.is_script():
  _signals.install()
