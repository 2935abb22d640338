"""absl's flag parsing for every script, with a bad flag value ending in
one sentence on stderr and exit status 2 (no traceback). Defines no
flags, so scripts that do not take experiments.common's flags (export,
doc_numbers) use it too."""

from absl import flags

from codesign.core.errors import InputError, exit_with


def parse_flags(argv: list[str]) -> list[str]:
  """absl's flag parsing, with a bad flag value ending in one sentence."""
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    exit_with(InputError(' '.join(str(e).split())))
